'use strict';
'require baseclass';
'require rpc';

/*
 * STAND-IN for luci-base's uci.js, for tests only: load, get, set, unset,
 * add, remove, sections, save, apply, changes — upstream's documented
 * semantics over ubus object `uci` (get/set/add/delete/apply/confirm/
 * changes): edits are kept in the page until save() stages them in the
 * session (rpcd's delta), apply() commits the staged changes and runs the
 * reload triggers.
 */

var callGet = rpc.declare({ object: 'uci', method: 'get', params: [ 'config' ], expect: { values: {} } });
var callSet = rpc.declare({ object: 'uci', method: 'set', params: [ 'config', 'section', 'values' ], reject: true });
var callAdd = rpc.declare({ object: 'uci', method: 'add', params: [ 'config', 'type', 'name', 'values' ], expect: { section: '' }, reject: true });
var callDelete = rpc.declare({ object: 'uci', method: 'delete', params: [ 'config', 'section', 'options' ], reject: true });
var callApply = rpc.declare({ object: 'uci', method: 'apply', params: [ 'timeout', 'rollback' ], reject: true });
var callConfirm = rpc.declare({ object: 'uci', method: 'confirm', reject: true });
var callChanges = rpc.declare({ object: 'uci', method: 'changes', expect: { changes: {} } });

return baseclass.extend({
	__init__: function() {
		this.state = { values: {}, creates: {}, changes: {}, deletes: {} };
		this.n = 0;
	},

	load: function(packages) {
		var self = this;
		packages = Array.isArray(packages) ? packages : [ packages ];
		return Promise.all(packages.map(function(p) {
			return callGet(p).then(function(values) {
				self.state.values[p] = values;
				return p;
			});
		}));
	},

	unload: function(packages) {
		var self = this;
		(Array.isArray(packages) ? packages : [ packages ]).forEach(function(p) {
			delete self.state.values[p]; delete self.state.creates[p];
			delete self.state.changes[p]; delete self.state.deletes[p];
		});
	},

	/* A section as the page sees it: loaded values, then local edits. */
	_section: function(conf, sid) {
		var s = this.state;
		if (s.deletes[conf] && s.deletes[conf][sid] === true)
			return null;
		var base = (s.creates[conf] && s.creates[conf][sid]) || (s.values[conf] && s.values[conf][sid]);
		if (!base)
			return null;
		var out = Object.assign({}, base), ch = s.changes[conf] && s.changes[conf][sid];
		if (ch)
			Object.assign(out, ch);
		var del = s.deletes[conf] && s.deletes[conf][sid];
		if (del && del !== true)
			Object.keys(del).forEach(function(o) { delete out[o]; });
		return out;
	},

	sections: function(conf, type, cb) {
		var self = this, all = {};
		Object.assign(all, this.state.values[conf] || {}, this.state.creates[conf] || {});
		var list = Object.keys(all).map(function(sid) { return self._section(conf, sid); })
			.filter(function(s) { return s != null && (type == null || s['.type'] == type); })
			.sort(function(a, b) { return a['.index'] - b['.index']; });
		if (typeof(cb) == 'function')
			list.forEach(function(s) { cb.call(self, s, s['.name']); });
		return list;
	},

	get: function(conf, sid, opt) {
		var s = this._section(conf, sid);
		if (s == null)
			return null;
		return (opt == null) ? s : s[opt];
	},

	get_first: function(conf, type, opt) {
		var list = this.sections(conf, type);
		return list.length ? this.get(conf, list[0]['.name'], opt) : null;
	},

	set: function(conf, sid, opt, val) {
		var s = this.state;
		if (this._section(conf, sid) == null || opt == null || opt.charAt(0) == '.')
			return;
		if (val == null || val === '' || (Array.isArray(val) && !val.length))
			return this.unset(conf, sid, opt);
		if (s.creates[conf] && s.creates[conf][sid]) {
			s.creates[conf][sid][opt] = val;
			return;
		}
		s.changes[conf] = s.changes[conf] || {};
		s.changes[conf][sid] = s.changes[conf][sid] || {};
		s.changes[conf][sid][opt] = val;
		if (s.deletes[conf] && s.deletes[conf][sid] && s.deletes[conf][sid] !== true)
			delete s.deletes[conf][sid][opt];
	},

	unset: function(conf, sid, opt) {
		var s = this.state;
		if (s.creates[conf] && s.creates[conf][sid]) {
			delete s.creates[conf][sid][opt];
			return;
		}
		if (s.changes[conf] && s.changes[conf][sid])
			delete s.changes[conf][sid][opt];
		if (s.values[conf] && s.values[conf][sid] && opt in s.values[conf][sid]) {
			s.deletes[conf] = s.deletes[conf] || {};
			s.deletes[conf][sid] = s.deletes[conf][sid] || {};
			if (s.deletes[conf][sid] !== true)
				s.deletes[conf][sid][opt] = true;
		}
	},

	add: function(conf, type, name) {
		var s = this.state, sid = name || ('new%06x'.format(Math.random() * 0xffffff | 0));
		s.creates[conf] = s.creates[conf] || {};
		s.creates[conf][sid] = { '.type': type, '.name': sid, '.anonymous': !name, '.index': 1000 + this.n++, '.create': name };
		return sid;
	},

	remove: function(conf, sid) {
		var s = this.state;
		if (s.creates[conf] && s.creates[conf][sid]) {
			delete s.creates[conf][sid];
			return;
		}
		s.deletes[conf] = s.deletes[conf] || {};
		s.deletes[conf][sid] = true;
		if (s.changes[conf])
			delete s.changes[conf][sid];
	},

	/* Stages the page's edits in the session, then reloads the packages. */
	save: function() {
		var s = this.state, calls = [], pkgs = {};
		Object.keys(s.creates).forEach(function(conf) {
			Object.keys(s.creates[conf]).forEach(function(sid) {
				var sec = s.creates[conf][sid], values = {};
				Object.keys(sec).forEach(function(k) { if (k.charAt(0) != '.') values[k] = sec[k]; });
				calls.push(function() { return callAdd(conf, sec['.type'], sec['.create'] || undefined, values); });
				pkgs[conf] = true;
			});
		});
		Object.keys(s.changes).forEach(function(conf) {
			Object.keys(s.changes[conf]).forEach(function(sid) {
				if (Object.keys(s.changes[conf][sid]).length)
					calls.push(function() { return callSet(conf, sid, s.changes[conf][sid]); });
				pkgs[conf] = true;
			});
		});
		Object.keys(s.deletes).forEach(function(conf) {
			Object.keys(s.deletes[conf]).forEach(function(sid) {
				var d = s.deletes[conf][sid];
				calls.push(function() { return callDelete(conf, sid, d === true ? undefined : Object.keys(d)); });
				pkgs[conf] = true;
			});
		});
		var self = this;
		return calls.reduce(function(p, fn) { return p.then(fn); }, Promise.resolve()).then(function() {
			var list = Object.keys(pkgs).concat(Object.keys(s.values));
			s.creates = {}; s.changes = {}; s.deletes = {};
			return self.load(list.filter(function(p, i) { return list.indexOf(p) == i; }));
		});
	},

	apply: function(timeout) {
		return callApply(timeout || 10, true).then(function() { return callConfirm(); });
	},

	changes: function() {
		return callChanges();
	}
});
