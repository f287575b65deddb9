'use strict';
'require baseclass';
'require dom';
'require rpc';
'require uci';
'require ui';

/*
 * STAND-IN for luci-base's form.js, for tests only: the part of the
 * documented API the agentd views use — form.Map (section, render, save,
 * reset), form.NamedSection / TypedSection / GridSection (option, tab,
 * taboption, addremove, anonymous, nodescriptions, modaltitle, handleAdd,
 * cfgsections, formvalue) and the options Value, Flag, ListValue, DynamicList and
 * TextValue (default, rmempty, optional, placeholder, validate, value(),
 * editable, modalonly, rows, monospace, cfgvalue, formvalue, write,
 * remove, parse). Widgets are plain HTML controls with upstream's ids
 * (`cbid.<config>.<section>.<option>`); parse/write/remove follow
 * upstream's rules (what a save writes is what real LuCI would write).
 *
 * Where the agentd app once met upstream behaviour the stand-in lacked,
 * the stand-in now does what upstream's form.js / ui.js do (each place
 * says which): a Flag's validator sees the checkbox's `value` attribute
 * ('1'), textvalue falls back to `default` and a grid cell without either
 * shows "none", and a Map goes read-only when rpcd says the session may
 * not write the package.
 */

/* Upstream form.js: rpc.declare({ object: 'session', method: 'access',
 * params: [ 'scope', 'object', 'function' ], expect: { access: false } }). */
var callSessionAccess = rpc.declare({
	object: 'session',
	method: 'access',
	params: [ 'scope', 'object', 'function' ],
	expect: { 'access': false }
});

function cbid(config, sid, option) {
	return 'cbid.%s.%s.%s'.format(config, sid, option);
}

function truthy(v) {
	return [ '1', 'yes', 'on', 'true', 'enabled' ].indexOf(String(v)) >= 0;
}

function same(a, b) {
	if (Array.isArray(a) || Array.isArray(b))
		return JSON.stringify(L.toArray(a)) == JSON.stringify(L.toArray(b));
	return String(a == null ? '' : a) == String(b == null ? '' : b);
}

function invalid(message) {
	var e = new Error(message);
	e.validation = true;
	return e;
}

var AbstractValue = baseclass.extend({
	__init__: function(section, option, title, description) {
		this.section = section;
		this.map = section.map;
		this.config = section.map.config;
		this.option = option;
		this.title = title;
		this.description = description;
		this.default = null;
		this.rmempty = true;
		this.optional = false;
		this.placeholder = null;
		this.keylist = [];
		this.vallist = [];
	},

	validate: function(section_id, value) { return true; },
	depends: function() {},
	value: function(key, val) {
		this.keylist.push(String(key));
		this.vallist.push(val != null ? val : key);
	},

	cfgvalue: function(sid) { return uci.get(this.config, sid, this.option); },
	/* Upstream AbstractValue.textvalue: the stored value, else `default`,
	 * else null (a grid cell then shows "none"). */
	textvalue: function(sid) {
		var v = this.cfgvalue(sid);
		if (v == null)
			v = this.default;
		if (Array.isArray(v))
			v = v.join(' ');
		return (v != null) ? String(v) : null;
	},
	/* What the widget shows before the user touches it. */
	shownvalue: function(sid) {
		var v = this.cfgvalue(sid);
		return v == null ? this.default : v;
	},
	write: function(sid, value) { return uci.set(this.config, sid, this.option, value); },
	remove: function(sid) { return uci.unset(this.config, sid, this.option); },

	findWidget: function(sid, root) {
		return (root || document).querySelector('[id="' + cbid(this.config, sid, this.option) + '"]');
	},
	formvalue: function(sid, root) {
		var w = this.findWidget(sid, root);
		return w ? w.value : null;
	},

	/* true, or the first validation message of the value (each item of a list). */
	check: function(sid, value) {
		var items = Array.isArray(value) ? value : [ value ];
		if (!items.length)
			items = [ '' ];
		for (var i = 0; i < items.length; i++) {
			var r = this.validate(sid, items[i]);
			if (r !== true)
				return (typeof(r) == 'string') ? r : _('Invalid value');
		}
		return true;
	},

	/* Upstream's AbstractValue.parse: a non-empty value different from
	 * the stored one is written; an empty one removes the option
	 * (rmempty/optional) or, when the option may not be empty, is
	 * refused unless it was empty already. */
	parse: function(sid, root) {
		var w = this.findWidget(sid, root);
		if (!w)
			return Promise.resolve();
		var fval = this.formvalue(sid, root), ok = this.check(sid, fval), cval = this.cfgvalue(sid);
		if (ok !== true)
			return Promise.reject(invalid(_('%s: %s').format(this.title || this.option, ok)));
		var empty = (fval == null || fval === '' || (Array.isArray(fval) && !fval.length));
		if (!empty) {
			if (cval == null || !same(cval, fval))
				return Promise.resolve(this.write(sid, fval));
		}
		else if (this.rmempty || this.optional) {
			return Promise.resolve(this.remove(sid));
		}
		else if (cval == null || !same(cval, fval)) {
			return Promise.reject(invalid(_('Option "%s" must not be empty.').format(this.title || this.option)));
		}
		return Promise.resolve();
	},

	/* Upstream renders every widget with `disabled: this.readonly ??
	 * this.map.readonly`. */
	isReadonly: function() {
		return (this.readonly != null) ? !!this.readonly : !!this.map.readonly;
	},

	widget: function(sid) {
		var v = this.shownvalue(sid);
		return E('input', { 'type': 'text', 'class': 'cbi-input-text', 'id': cbid(this.config, sid, this.option),
			'value': v == null ? '' : String(v), 'placeholder': this.placeholder,
			'disabled': this.isReadonly() ? '' : null });
	},

	/* Marks the widget invalid while its value does not validate. */
	attachValidation: function(sid, w, err) {
		var self = this;
		var run = function() {
			var r = self.check(sid, self.formvalue(sid, dom.parent(w, '.cbi-value').parentNode));
			w.classList.toggle('cbi-input-invalid', r !== true);
			dom.content(err, [ r === true ? '' : r ]);
		};
		w.addEventListener('input', run);
		w.addEventListener('change', run);
	},

	render: function(sid, nodescr) {
		var w = this.widget(sid), err = E('div', { 'class': 'cbi-value-error' });
		this.attachValidation(sid, w.matches('input,select,textarea') ? w : w.querySelector('input,select,textarea'), err);
		return E('div', { 'class': 'cbi-value', 'id': 'cbi-%s-%s-%s'.format(this.config, sid, this.option), 'data-name': this.option }, [
			E('label', { 'class': 'cbi-value-title', 'for': cbid(this.config, sid, this.option) }, [ this.title || this.option ]),
			E('div', { 'class': 'cbi-value-field' }, [
				w, err,
				(this.description && !nodescr) ? E('div', { 'class': 'cbi-value-description' }, [ this.description ]) : ''
			])
		]);
	}
});

var Value = AbstractValue.extend({});

var TextValue = AbstractValue.extend({
	widget: function(sid) {
		var v = this.shownvalue(sid);
		return E('textarea', { 'class': 'cbi-input-textarea', 'id': cbid(this.config, sid, this.option),
			'rows': this.rows || 4, 'placeholder': this.placeholder, 'disabled': this.isReadonly() ? '' : null,
			'style': this.monospace ? 'font-family:monospace' : null }, [ v == null ? '' : String(v) ]);
	}
});

var Flag = AbstractValue.extend({
	__init__: function() {
		this.super('__init__', arguments);
		this.enabled = '1';
		this.disabled = '0';
		this.default = this.disabled;
	},
	widget: function(sid) {
		var w = E('input', { 'type': 'checkbox', 'class': 'cbi-input-checkbox', 'id': cbid(this.config, sid, this.option),
			'value': this.enabled, 'disabled': this.isReadonly() ? '' : null });
		w.checked = truthy(this.shownvalue(sid));
		return w;
	},
	/* Upstream ui.Checkbox renders `<input type="checkbox"
	 * value="<value_enabled>">` and binds its validator to that input
	 * (setUpdateEvents → addValidator); validation.js's Validator.validate
	 * reads `this.field.value`, the value attribute, so the option's
	 * validate(section_id, value) always gets value_enabled ('1'),
	 * checked or not. The real state is this.formvalue(section_id). */
	check: function(sid, value) {
		return AbstractValue.prototype.check.call(this, sid, this.enabled);
	},
	formvalue: function(sid, root) {
		var w = this.findWidget(sid, root);
		return w ? (w.checked ? this.enabled : this.disabled) : null;
	},
	textvalue: function(sid) {
		return truthy(this.shownvalue(sid)) ? _('yes') : _('no');
	},
	/* Upstream's Flag.parse: the default with rmempty removes the
	 * option, anything else is written. */
	parse: function(sid, root) {
		var w = this.findWidget(sid, root);
		if (!w)
			return Promise.resolve();
		var fval = this.formvalue(sid, root), ok = this.check(sid, fval);
		if (ok !== true)
			return Promise.reject(invalid(_('%s: %s').format(this.title || this.option, ok)));
		if (fval == this.default && (this.optional || this.rmempty))
			return Promise.resolve(this.remove(sid));
		return Promise.resolve(this.write(sid, fval));
	}
});

var ListValue = AbstractValue.extend({
	widget: function(sid) {
		var v = this.shownvalue(sid), self = this;
		return E('select', { 'class': 'cbi-input-select', 'id': cbid(this.config, sid, this.option),
			'disabled': this.isReadonly() ? '' : null },
			this.keylist.map(function(k, i) {
				return E('option', { 'value': k, 'selected': (String(v == null ? '' : v) == k) ? '' : null }, [ String(self.vallist[i]) ]);
			}));
	},
	textvalue: function(sid) {
		var v = this.shownvalue(sid), i = this.keylist.indexOf(String(v == null ? '' : v));
		return i >= 0 ? String(this.vallist[i]) : (v == null ? null : String(v));
	}
});

/* One item per line (upstream shows one input per item). */
var DynamicList = AbstractValue.extend({
	widget: function(sid) {
		var v = L.toArray(this.cfgvalue(sid));
		return E('textarea', { 'class': 'cbi-dynlist', 'id': cbid(this.config, sid, this.option), 'rows': Math.max(2, v.length + 1),
			'placeholder': this.placeholder, 'disabled': this.isReadonly() ? '' : null }, [ v.join('\n') ]);
	},
	shownvalue: function(sid) { return L.toArray(this.cfgvalue(sid)); },
	formvalue: function(sid, root) {
		var w = this.findWidget(sid, root);
		return w ? w.value.split('\n').map(function(s) { return s.trim(); }).filter(function(s) { return s !== ''; }) : null;
	},
	textvalue: function(sid) {
		var v = L.toArray(this.cfgvalue(sid));
		return v.length ? v.join(', ') : null;
	},
	check: function(sid, value) {
		for (var i = 0; i < (value || []).length; i++) {
			var r = this.validate(sid, value[i]);
			if (r !== true)
				return (typeof(r) == 'string') ? r : _('Invalid value');
		}
		return true;
	}
});

var AbstractSection = baseclass.extend({
	__init__: function(map) {
		this.map = map;
		this.config = map.config;
		this.children = [];
		this.tabs = null;
	},
	option: function(cls, name, title, description) {
		var o = cls.instantiate([ this, name, title, description ]);
		this.children.push(o);
		return o;
	},
	tab: function(name, title) {
		this.tabs = this.tabs || [];
		this.tabs.push([ name, title ]);
	},
	taboption: function(tab, cls, name, title, description) {
		var o = this.option(cls, name, title, description);
		o.tab = tab;
		return o;
	},
	/* The form value of another option of this section (upstream:
	 * AbstractSection.formvalue). */
	formvalue: function(sid, option) {
		for (var i = 0; i < this.children.length; i++)
			if (this.children[i].option == option) {
				var v = this.children[i].formvalue(sid);
				return v != null ? v : this.children[i].cfgvalue(sid);
			}
		return null;
	},
	parse: function(root) {
		var self = this, tasks = [];
		this.cfgsections().forEach(function(sid) {
			self.children.forEach(function(o) { tasks.push(o.parse(sid, root)); });
		});
		return Promise.all(tasks);
	},
	renderOptions: function(sid) {
		var self = this;
		return E('div', { 'class': 'cbi-section-node', 'id': 'cbi-%s-%s'.format(this.config, sid) },
			this.children.map(function(o) { return o.render(sid, self.nodescriptions); }));
	}
});

var NamedSection = AbstractSection.extend({
	__init__: function(map, section, type, title, description) {
		this.super('__init__', [ map ]);
		this.section = section;
		this.sectiontype = type;
		this.title = title;
		this.description = description;
		this.addremove = false;
	},
	cfgsections: function() {
		var s = uci.get(this.config, this.section);
		return (s && s['.type'] == this.sectiontype) ? [ this.section ] : [];
	},
	render: function() {
		var self = this, exists = this.cfgsections().length > 0;
		var node = E('fieldset', { 'class': 'cbi-section', 'id': 'cbi-%s-%s'.format(this.config, this.section) }, [
			this.title ? E('h3', [ this.title ]) : '',
			this.description ? E('div', { 'class': 'cbi-section-descr' }, [ this.description ]) : ''
		]);
		if (exists) {
			node.appendChild(this.renderOptions(this.section));
			if (this.addremove)
				node.appendChild(E('button', { 'class': 'cbi-button cbi-button-remove', 'disabled': this.map.readonly ? '' : null, 'click': function() {
					uci.remove(self.config, self.section);
					return self.map.rerender();
				} }, [ _('Delete') ]));
		}
		else if (this.addremove) {
			node.appendChild(E('button', { 'class': 'cbi-button cbi-button-add', 'id': 'cbi-add-%s'.format(this.section),
				'disabled': this.map.readonly ? '' : null, 'click': function() {
				uci.add(self.config, self.sectiontype, self.section);
				return self.map.rerender();
			} }, [ _('Add') ]));
		}
		return node;
	}
});

var TypedSection = AbstractSection.extend({
	__init__: function(map, type, title, description) {
		this.super('__init__', [ map ]);
		this.sectiontype = type;
		this.title = title;
		this.description = description;
		this.addremove = false;
		this.anonymous = false;
	},
	cfgsections: function() {
		return uci.sections(this.config, this.sectiontype).map(function(s) { return s['.name']; });
	},
	handleAdd: function(ev, name) {
		return uci.add(this.config, this.sectiontype, this.anonymous ? null : name);
	},
	renderAddControls: function() {
		var self = this;
		var name = this.anonymous ? null : E('input', { 'type': 'text', 'class': 'cbi-section-create-name', 'placeholder': _('New name'),
			'disabled': this.map.readonly ? '' : null });
		return E('div', { 'class': 'cbi-section-create' }, [
			name || '',
			E('button', { 'class': 'cbi-button cbi-button-add', 'disabled': this.map.readonly ? '' : null, 'click': function(ev) {
				var n = name ? name.value.trim() : null;
				if (name && n === '')
					return;
				return Promise.resolve(self.handleAdd(ev, n)).catch(function(e) {
					ui.addNotification(null, E('p', [ e.message ]), 'error');
				});
			} }, [ _('Add') ])
		]);
	},
	render: function() {
		var self = this;
		var node = E('fieldset', { 'class': 'cbi-section', 'id': 'cbi-%s-%s'.format(this.config, this.sectiontype) }, [
			this.title ? E('h3', [ this.title ]) : ''
		]);
		this.cfgsections().forEach(function(sid) { node.appendChild(self.renderOptions(sid)); });
		if (this.addremove)
			node.appendChild(this.renderAddControls());
		return node;
	}
});

var GridSection = TypedSection.extend({
	/* Adds the section and opens its dialog; dismissing the dialog of a
	 * section added this way removes it again. */
	handleAdd: function(ev, name) {
		var sid = uci.add(this.config, this.sectiontype, this.anonymous ? null : name);
		this.addedSection = sid;
		return this.map.rerender().then(L.bind(this.renderMoreOptionsModal, this, sid));
	},

	renderMoreOptionsModal: function(sid) {
		var self = this, body = this.renderOptions(sid);
		var title = (typeof(this.modaltitle) == 'function') ? this.modaltitle(sid) : (this.modaltitle || sid);
		ui.showModal(title, [
			body,
			E('div', { 'class': 'cbi-value-error', 'id': 'cbi-modal-error' }),
			E('div', { 'class': 'right' }, [
				E('button', { 'class': 'cbi-button cbi-button-neutral', 'click': function() {
					if (self.addedSection == sid)
						uci.remove(self.config, sid);
					self.addedSection = null;
					ui.hideModal();
					return self.map.rerender();
				} }, [ _('Dismiss') ]), ' ',
				E('button', { 'class': 'cbi-button cbi-button-positive important', 'id': 'cbi-modal-save',
					'disabled': self.map.readonly ? '' : null, 'click': function() {
					return Promise.all(self.children.map(function(o) { return o.parse(sid, body); })).then(function() {
						self.addedSection = null;
						ui.hideModal();
						return self.map.rerender();
					}).catch(function(e) {
						dom.content(document.getElementById('cbi-modal-error'), [ e.message ]);
					});
				} }, [ _('Save') ])
			])
		]);
	},

	render: function() {
		var self = this, cols = this.children.filter(function(o) { return !o.modalonly; });
		var table = E('table', { 'class': 'table cbi-section-table', 'id': 'cbi-%s-%s'.format(this.config, this.sectiontype) }, [
			E('tr', { 'class': 'tr table-titles' }, [ E('th', { 'class': 'th' }, [ this.anonymous ? '' : _('Name') ]) ]
				.concat(cols.map(function(o) { return E('th', { 'class': 'th' }, [ o.title || o.option ]); }))
				.concat([ E('th', { 'class': 'th cbi-section-actions' }, []) ]))
		]);
		this.cfgsections().forEach(function(sid) {
			table.appendChild(E('tr', { 'class': 'tr cbi-section-table-row', 'data-sid': sid }, [
				E('td', { 'class': 'td' }, [ self.anonymous ? '' : sid ])
			].concat(cols.map(function(o) {
				/* Upstream GridSection.renderTextValue: `(value != null) ?
				 * value : E('em', _('none'))`. */
				var v = o.editable ? null : o.textvalue(sid);
				return E('td', { 'class': 'td', 'data-name': o.option },
					[ o.editable ? o.widget(sid) : (v != null ? v : E('em', [ _('none') ])) ]);
			})).concat([ E('td', { 'class': 'td cbi-section-actions' }, [
				E('button', { 'class': 'cbi-button cbi-button-edit', 'click': function() { self.renderMoreOptionsModal(sid); } }, [ _('Edit') ]), ' ',
				self.addremove ? E('button', { 'class': 'cbi-button cbi-button-remove', 'disabled': self.map.readonly ? '' : null, 'click': function() {
					uci.remove(self.config, sid);
					return self.map.rerender();
				} }, [ _('Delete') ]) : ''
			]) ])));
		});
		return E('div', { 'class': 'cbi-section cbi-tblsection' }, [
			this.title ? E('h3', [ this.title ]) : '',
			table,
			this.addremove ? this.renderAddControls() : ''
		]);
	}
});

var CBIMap = baseclass.extend({
	__init__: function(config, title, description) {
		this.config = config;
		this.title = title;
		this.description = description;
		this.children = [];
		this.readonly = null;
		this.data = uci;
	},
	section: function(cls) {
		var s = cls.instantiate([ this ].concat(this.varargs(arguments, 1)));
		this.children.push(s);
		return s;
	},
	/* Upstream Map.load: unless `readonly` was set by the view, asks
	 * rpcd `session access` for ('uci', config, 'write') along with the
	 * load and goes read-only on false. */
	load: function() {
		var doCheckACL = (this.readonly == null);
		return Promise.all([
			doCheckACL ? callSessionAccess('uci', this.config, 'write') : true,
			uci.get(this.config) ? null : uci.load(this.config)
		]).then(L.bind(function(res) {
			if (res[0] === false)
				this.readonly = true;
		}, this));
	},
	renderContents: function() {
		var node = this.root || (this.root = E('div', { 'class': 'cbi-map', 'id': 'cbi-' + this.config }));
		dom.bindClassInstance(node, this);
		dom.content(node, [
			this.title ? E('h2', [ this.title ]) : '',
			this.description ? E('div', { 'class': 'cbi-map-descr' }, [ this.description ]) : ''
		].concat(this.children.map(function(s) { return s.render(); })));
		return node;
	},
	rerender: function() {
		return Promise.resolve(this.renderContents());
	},
	render: function() {
		return this.load().then(L.bind(this.renderContents, this));
	},
	parse: function() {
		var root = this.root;
		return this.children.reduce(function(p, s) {
			return p.then(function() { return s.parse(root); });
		}, Promise.resolve());
	},
	save: function(cb, silent) {
		return this.parse()
			.then(cb)
			.then(function() { return uci.save(); })
			.then(L.bind(this.renderContents, this))
			.catch(function(e) {
				if (!silent)
					ui.showModal(_('Save error'), [
						E('p', [ _('An error occurred while saving the form:') ]),
						E('p', [ E('em', { 'class': 'agentd-save-error' }, [ e.message ]) ]),
						E('div', { 'class': 'right' }, [ E('button', { 'class': 'cbi-button', 'click': function() { ui.hideModal(); } }, [ _('Dismiss') ]) ])
					]);
				return Promise.reject(e);
			});
	},
	reset: function() {
		return this.rerender();
	}
});

return baseclass.extend({
	Map: CBIMap,
	AbstractSection: AbstractSection,
	NamedSection: NamedSection,
	TypedSection: TypedSection,
	GridSection: GridSection,
	AbstractValue: AbstractValue,
	Value: Value,
	Flag: Flag,
	ListValue: ListValue,
	DynamicList: DynamicList,
	TextValue: TextValue
});
