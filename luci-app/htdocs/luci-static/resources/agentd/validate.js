'use strict';
'require baseclass';
'require form';
'require uci';
'require agentd.schema as schema';

/*
 * Value checks of /etc/config/agentd in the browser, the same as
 * uci-schema's `check_value` (uci-schema/src/schema/check.rs) over the
 * generated table agentd/schema.js: a value the Settings, Policy or
 * Mappings page accepts is one `agentd --check-config` accepts. The test
 * suite runs checkKind() over a corpus whose verdicts come from the Rust
 * checks (tests/luci-harness/validation-samples.json).
 */

var U16 = BigInt(65535);
var U64_MAX = '18446744073709551615';

function digits(s) {
	return s.length > 0 && /^[0-9]+$/.test(s);
}

/* parse_uint: plain decimal u64, as a BigInt, or null. */
function parseUint(s) {
	if (!digits(s))
		return null;
	var v = BigInt(s);
	return (v <= BigInt('18446744073709551615')) ? v : null;
}

/* Rust's read_number for a u16/u32: decimal, leading zeros allowed. */
function portLike(s, max) {
	return digits(s) && BigInt(s) <= max;
}

function byteLength(s) {
	return new TextEncoder().encode(s).length;
}

/* Ipv4Addr::from_str: four decimal octets, no leading zeros. */
function ipv4(s) {
	var p = s.split('.');
	if (p.length != 4)
		return false;
	for (var i = 0; i < 4; i++) {
		if (!/^[0-9]{1,3}$/.test(p[i]) || (p[i].length > 1 && p[i][0] == '0') || +p[i] > 255)
			return false;
	}
	return true;
}

/* Hex groups of one side of '::'; an IPv4 tail counts two. */
function groups6(str, allowV4) {
	if (str === '')
		return 0;
	var p = str.split(':'), n = 0;
	for (var i = 0; i < p.length; i++) {
		if (allowV4 && i == p.length - 1 && ipv4(p[i]))
			return n + 2;
		if (!/^[0-9a-fA-F]{1,4}$/.test(p[i]))
			return -1;
		n++;
	}
	return n;
}

/* Ipv6Addr::from_str: 8 groups, or fewer around one '::' that stands for
 * at least one group; an embedded IPv4 address only at the end. */
function ipv6(s) {
	var halves = s.split('::');
	if (halves.length > 2)
		return false;
	if (halves.length == 1)
		return groups6(s, true) == 8;
	var head = groups6(halves[0], false), tail = groups6(halves[1], true);
	return head >= 0 && tail >= 0 && head + tail <= 7;
}

function ip(s) {
	return ipv4(s) || ipv6(s);
}

/* SocketAddr::from_str: 'v4:port' or '[v6%scope]:port'. */
function socketAddr(s) {
	var m = /^\[([^\]]*)\]:(.*)$/.exec(s);
	if (m) {
		var a = m[1].split('%');
		if (a.length > 2 || !ipv6(a[0]) || (a.length == 2 && !portLike(a[1], BigInt(4294967295))))
			return false;
		return portLike(m[2], U16);
	}
	var i = s.lastIndexOf(':');
	return i > 0 && ipv4(s.substring(0, i)) && portLike(s.substring(i + 1), U16);
}

function dnsLabel(s) {
	return s.length >= 1 && s.length <= 63 && /^[A-Za-z0-9-]+$/.test(s) &&
		s[0] != '-' && s[s.length - 1] != '-';
}

function domainName(s) {
	if (s.endsWith('.'))
		s = s.substring(0, s.length - 1);
	/* RFC 3696 §2: a numeric last label is a mistyped address, not a name. */
	return s.length > 0 && s.length <= 253 && s.split('.').every(dnsLabel)
		&& !/^[0-9]+$/.test(s.substring(s.lastIndexOf('.') + 1));
}

function token(s, extra) {
	if (s.length < 1 || s.length > 128)
		return false;
	for (var i = 0; i < s.length; i++) {
		var c = s[i];
		if (!/[A-Za-z0-9._-]/.test(c) && extra.indexOf(c) < 0)
			return false;
	}
	return true;
}

function printable(s) {
	return /^[\x21-\x7e]*$/.test(s);
}

function hostPort(s) {
	if (socketAddr(s))
		return true;
	var i = s.lastIndexOf(':');
	if (i < 0)
		return false;
	var port = parseUint(s.substring(i + 1));
	return domainName(s.substring(0, i)) && port != null && port >= 1n && port <= U16;
}

function ipNet(s) {
	var i = s.indexOf('/'), addr = (i < 0) ? s : s.substring(0, i);
	var max = ipv4(addr) ? 32n : (ipv6(addr) ? 128n : null);
	if (max == null)
		return false;
	if (i < 0)
		return true;
	var len = parseUint(s.substring(i + 1));
	return len != null && len <= max;
}

function pattern(s) {
	if (s.length < 1 || s.length > 256 || !printable(s))
		return false;
	if (s == '*')
		return true;
	if (s.endsWith('.*')) {
		var prefix = s.substring(0, s.length - 2);
		return prefix.length > 0 && prefix.indexOf('*') < 0;
	}
	return s.indexOf('*') < 0;
}

function agentUri(s) {
	if (!s.startsWith('agent://'))
		return false;
	var rest = s.substring(8), i = rest.indexOf('/');
	return i >= 0 && token(rest.substring(0, i), '') && token(rest.substring(i + 1), '/:@');
}

function url(s) {
	var rest = s.startsWith('http://') ? s.substring(7) : (s.startsWith('https://') ? s.substring(8) : null);
	if (rest == null || s.length > 512 || !printable(s))
		return false;
	var authority = rest.split(/[/?#]/)[0];
	if (authority.indexOf('@') >= 0)
		return false;
	var port = null, host = authority;
	if (authority[0] == '[') {
		var j = authority.indexOf(']');
		if (j < 0 || !ipv6(authority.substring(1, j)))
			return false;
		var tail = authority.substring(j + 1);
		if (tail === '')
			return true;
		if (tail[0] != ':')
			return false;
		port = parseUint(tail.substring(1));
		return port != null && port >= 1n && port <= U16;
	}
	var k = authority.indexOf(':');
	if (k >= 0) {
		host = authority.substring(0, k);
		port = parseUint(authority.substring(k + 1));
		if (port == null || port < 1n || port > U16)
			return false;
	}
	return ip(host) || domainName(host);
}

/* Decoded length of standard or URL-safe base64, padding optional. */
function base64Len(s) {
	var body = s.replace(/=+$/, ''), pad = s.length - body.length;
	if (pad > 2 || body.length == 0 || !/^[A-Za-z0-9+/_-]+$/.test(body))
		return null;
	var rem = body.length % 4;
	if (rem == 1 || (pad > 0 && (body.length + pad) % 4 != 0))
		return null;
	return Math.floor(body.length / 4) * 3 + Math.max(rem - 1, 0);
}

function jsonObject(s) {
	try {
		var v = JSON.parse(s);
		return v != null && typeof(v) == 'object' && !Array.isArray(v);
	}
	catch (e) {
		return false;
	}
}

var BOOLS = [ '1', 'yes', 'on', 'true', 'enabled', '0', 'no', 'off', 'false', 'disabled' ];

var CHECKS = {
	bool: function(k, s) { return BOOLS.indexOf(s) >= 0 },
	uint: function(k, s) {
		var v = parseUint(s);
		return v != null && v >= BigInt(k.min) && v <= BigInt(k.max);
	},
	enum: function(k, s) { return k.values.indexOf(s) >= 0 },
	text: function(k, s) { return true },
	token: function(k, s) { return s.length > 0 && s.length <= 512 && printable(s) },
	fingerprint: function(k, s) { return /^sha256:[0-9A-Fa-f]{64}$/.test(s) },
	path: function(k, s) {
		return s[0] == '/' && byteLength(s) <= 4096 && !/[\x00-\x1f\x7f-\x9f]/.test(s);
	},
	socketaddr: function(k, s) { return socketAddr(s) },
	hostport: function(k, s) { return hostPort(s) },
	host: function(k, s) { return ip(s) || domainName(s) },
	resolver: function(k, s) { return ip(s) || socketAddr(s) },
	dnslabel: function(k, s) { return dnsLabel(s) },
	domainname: function(k, s) { return domainName(s) },
	ifname: function(k, s) { return s.length >= 1 && s.length <= 15 && /^[A-Za-z0-9._@-]+$/.test(s) },
	agentprefix: function(k, s) {
		if (s == 'auto')
			return true;
		var i = s.indexOf('/');
		if (i < 0 || !ipv6(s.substring(0, i)))
			return false;
		var len = parseUint(s.substring(i + 1));
		if (len == null || len < 48n || len > 64n)
			return false;
		var head = s.substring(0, i);
		var first = head.indexOf('::') == 0 ? 0 : parseInt(head.split(':')[0], 16);
		return (first & 0xe000) == 0x2000 || (first & 0xfe00) == 0xfc00;
	},
	ipnet: function(k, s) { return ipNet(s) },
	name: function(k, s) { return token(s, '') },
	routeid: function(k, s) { return token(s, ':') },
	pattern: function(k, s) { return pattern(s) },
	agenturi: function(k, s) { return agentUri(s) },
	url: function(k, s) { return url(s) },
	jwtkey: function(k, s) { return s.startsWith('ed25519:') && base64Len(s.substring(8)) === 32 },
	jsonobject: function(k, s) { return jsonObject(s) }
};

/* What a kind accepts, worded as uci-schema's errors word it. */
function expected(k) {
	switch (k.kind) {
	case 'bool': return _("a boolean '1' or '0'");
	case 'uint': return _('an integer %s..=%s').format(k.min, k.max);
	case 'enum': return _('one of %s').format(k.values.map(function(v) { return "'" + v + "'" }).join(', '));
	case 'token': return _('printable ASCII without spaces');
	case 'fingerprint': return _("a key fingerprint 'sha256:' and 64 hex digits");
	case 'path': return _('an absolute path');
	case 'socketaddr': return _("an address 'ip:port' or '[ipv6]:port'");
	case 'hostport': return _("'host:port'");
	case 'host': return _('a host name or IP address');
	case 'resolver': return _("an IP address, optionally with ':port'");
	case 'dnslabel': return _("a DNS label (letters, digits, inner '-', at most 63)");
	case 'domainname': return _('a DNS domain name');
	case 'ifname': return _('an interface name (at most 15 characters)');
	case 'agentprefix': return _("'auto' or an IPv6 prefix 'addr/len' of /48 to /64 in 2000::/3 or fc00::/7");
	case 'ipnet': return _("an IP network 'addr/len' or an address");
	case 'name': return _("a name of letters, digits, '.', '_' and '-'");
	case 'routeid': return _("an id of letters, digits, '.', '_', ':' and '-'");
	case 'pattern': return _("'*', an exact name, or 'prefix.*'");
	case 'agenturi': return _("an agent URI 'agent://tenant/name'");
	case 'url': return _('an http:// or https:// URL');
	case 'jwtkey': return _("'ed25519:' followed by a base64 32-byte public key");
	case 'jsonobject': return _('a JSON object');
	default: return _('text');
	}
}

/*
 * The checks between options of one section that uci-schema makes when it
 * builds the config (uci-schema/src/config/build.rs: required_when, order,
 * Exclusive, and the rules a `check` names with `fails`) for the sections
 * these pages edit. test_luci.py holds each
 * to `agentd --check-config`: the page refuses what the check refuses.
 */
var CROSS = {
	gateway: [
		{ need: 'public_key', when: 'public_cert', holds: nonEmpty, because: _('public_cert is set') },
		{ need: 'public_cert', when: 'public_key', holds: nonEmpty, because: _('public_key is set') }
	],
	ipv6: [
		{ need: 'prefix', when: 'mode', holds: function(v) { return v != 'off'; }, because: _('mode is not off') },
		{ check: [ 'mode', 'prefix' ], fails: function(val) {
			var p = String(val('prefix'));
			if (String(val('mode')) != 'ndp-proxy' || p == '' || p == 'auto' || parseUint(p.split('/')[1] || '') == 64n)
				return null;
			return _("mode 'ndp-proxy' answers neighbour solicitations on the upstream link's /64: the prefix must be that /64 (or 'auto')");
		} }
	],
	relay: [
		{ need: 'server', when: 'mode', holds: function(v) { return v == 'client'; }, because: _("mode is 'client'") },
		{ lower: 'reconnect_min_ms', upper: 'reconnect_max_ms' }
	],
	cloud: [ { need: 'url', when: 'enabled', holds: function(v) { return BOOLS.indexOf(v) >= 0 && BOOLS.indexOf(v) < 5; }, because: _("enabled is '1'") } ],
	mapping: [ { exclusive: [ 'input_schema', 'input_schema_file' ] } ]
};

/* A list option (a DynamicList's formvalue, or its default) is set when
 * it holds a non-empty entry. */
function nonEmpty(v) {
	if (Array.isArray(v))
		return v.some(function(e) { return e != null && e !== '' });
	return v != null && v !== '';
}

return baseclass.extend({
	/* The table entry of `type.option`, or null. */
	spec: function(type, option) {
		var s = schema.sections[type];
		return (s && s.options[option]) ? s.options[option] : null;
	},

	/* Whether `name` may name a new `type` section: the kind of the
	 * option the section name stands for (a rule's id, a mapping's name),
	 * a name libuci accepts, and unused by any section of the package —
	 * libuci refuses a name reused with another type. True or a message. */
	sectionName: function(type, name) {
		var sec = schema.sections[type], key = null;
		Object.keys(sec.options).forEach(function(n) { if (sec.options[n].section_name) key = n; });
		if (key != null && !this.check(sec.options[key], name))
			return _('%s: expected %s').format(key, expected(sec.options[key]));
		/* libuci's uci_validate_name: a section name in the file is
		 * letters, digits and '_' only (stricter than some id kinds). */
		if (!/^[A-Za-z0-9_]+$/.test(name))
			return _("%s: a UCI section name is letters, digits and '_' only").format(name);
		var other = uci.get('agentd', name);
		if (other != null)
			return _('%s is already the name of a %s section').format(name, other['.type']);
		return true;
	},

	/* A GridSection's handleAdd that refuses a bad or used name. */
	addNamed: function(type) {
		var self = this;
		return function(ev, name) {
			var ok = self.sectionName(type, name == null ? '' : name);
			if (ok !== true)
				return Promise.reject(new Error(ok));
			return form.GridSection.prototype.handleAdd.apply(this, [ ev, name ]);
		};
	},

	/* The options of a section type in the schema's order, without the
	 * one that is the section's name (a rule's id, a mapping's name). */
	order: function(type) {
		var sec = schema.sections[type];
		return sec.order.filter(function(n) { return !sec.options[n].section_name; });
	},

	/* uci-schema's check_value for one kind (`{kind, min, max, values}`). */
	checkKind: function(kind, value) {
		var fn = CHECKS[kind.kind];
		return fn ? fn(kind, String(value)) : false;
	},

	/* OptionSpec::means_empty: 'off' where the option has an empty
	 * meaning and 'off' is not itself one of its values, or '' where that
	 * meaning is the default. libuci does not store an option set to ''
	 * (rpcd never returns it, a save drops it), so '' is the default
	 * everywhere, in the daemons too; 'off' is how a listener goes off. */
	meansEmpty: function(spec, value) {
		value = String(value);
		return spec.empty != null &&
			((value === '' && spec.default === '') || (value === 'off' && !this.checkKind(spec, 'off')));
	},

	/* OptionSpec::needs_off: the empty meaning is not the default, so only
	 * 'off' says it (a listener on by default). */
	needsOff: function(spec) {
		return spec.empty != null && spec.default !== '' && !spec.required && !spec.section_name;
	},

	/* OptionSpec::check: the kind, or the option's empty value. */
	check: function(spec, value) {
		return this.meansEmpty(spec, value) || this.checkKind(spec, String(value));
	},

	expected: expected,

	/* What an option of the section being edited will mean once saved:
	 * the field's value, or the default when it is empty. */
	effective: function(section, section_id, type, name) {
		var v = section.formvalue(section_id, name), spec = this.spec(type, name);
		if (v == null || v === '' || (Array.isArray(v) && !v.length))
			return spec ? spec.default : null;
		return v;
	},

	/* The first cross-option rule of `type` involving `name` (as the
	 * required option or as the one that requires it, either end of an
	 * order or an exclusive pair) that the section breaks, as a message,
	 * or true. Both ends check: LuCI does not validate an empty field. */
	cross: function(section, section_id, type, name, value) {
		var rules = CROSS[type] || [], self = this;
		var val = function(n) {
			if (n != name)
				return self.effective(section, section_id, type, n);
			return (value === '' || value == null) ? self.spec(type, n).default : value;
		};
		for (var i = 0; i < rules.length; i++) {
			var r = rules[i];
			if ((r.need == name || r.when == name) && r.holds(String(val(r.when))) && !nonEmpty(val(r.need)))
				return _('%s is required when %s').format(r.need, r.because);
			if (r.upper == name || r.lower == name) {
				var lo = String(val(r.lower)), hi = String(val(r.upper));
				if (/^[0-9]+$/.test(lo) && /^[0-9]+$/.test(hi) && BigInt(lo) > BigInt(hi))
					return _('%s (%s) must not exceed %s (%s)').format(r.lower, lo, r.upper, hi);
			}
			if (r.check && r.check.indexOf(name) >= 0) {
				var why = r.fails(val);
				if (why)
					return why;
			}
			if (r.exclusive && r.exclusive.indexOf(name) >= 0 &&
			    r.exclusive.filter(function(n) { return nonEmpty(val(n)); }).length > 1)
				return _('at most one of %s').format(r.exclusive.join(', '));
		}
		return true;
	},

	/* The default as the page shows it: 'unlimited' for the largest u64
	 * (uci-schema's "no bound"), the meaning of the empty value where the
	 * default is empty, else the default itself; null without one. */
	shownDefault: function(spec) {
		var d = spec.default;
		if (Array.isArray(d))
			return d.length ? d.join(' ') : null;
		if (d == null)
			return null;
		if (spec.kind == 'uint' && d === U64_MAX)
			return _('unlimited');
		if (d === '')
			return (spec.empty != null) ? spec.empty : null;
		return d;
	},

	/*
	 * A form option for `type.option` of /etc/config/agentd with the
	 * table's label (unless `title` is given), validation, default (as
	 * placeholder, and in grid cells of unset options, as upstream's
	 * textvalue does with `default`) and doc line. `widget` overrides the
	 * form class; `tab` puts it on a section tab.
	 */
	option: function(section, type, name, title, widget, tab) {
		var spec = this.spec(type, name), self = this;
		if (spec == null)
			throw new Error('agentd: no option %s.%s in the schema'.format(type, name));
		title = title || spec.label || name;

		var cls = widget || (spec.kind == 'bool' ? form.Flag
			: (spec.list ? form.DynamicList
			: (spec.kind == 'enum' ? form.ListValue
			: (spec.kind == 'jsonobject' ? form.TextValue : form.Value))));
		var o = tab ? section.taboption(tab, cls, name, title, spec.doc)
			: section.option(cls, name, title, spec.doc);

		/* As LuCI saves: a Flag or ListValue at its default is removed
		 * (absent means the default), an emptied Value is removed. */
		if (cls === form.Flag) {
			o.default = spec.default;
			/* Upstream ui.Checkbox validates the input's `value`
			 * attribute, which is always value_enabled: `value` is '1'
			 * whether ticked or not. The state is the form value. */
			o.validate = function(section_id, value) {
				return self.cross(section, section_id, type, name, this.formvalue(section_id));
			};
			return o;
		}

		/* A grid cell of an unset option shows what it means (upstream's
		 * textvalue falls back to `default`, which a Value here leaves
		 * unset: it would be written into the file on every save). */
		o.textvalue = function(section_id) {
			var v = this.cfgvalue(section_id);
			if (Array.isArray(v))
				v = v.length ? v.join(' ') : null;
			if (v == null || v === '')
				return self.shownDefault(spec);
			return (spec.kind == 'uint' && v === U64_MAX) ? _('unlimited') : String(v);
		};

		if (cls === form.ListValue) {
			if (spec.empty != null)
				o.value('', spec.empty);
			spec.values.forEach(function(v) { o.value(v, v) });
			o.default = spec.default;
		}
		else if (spec.list) {
			if (Array.isArray(spec.default) && spec.default.length)
				o.placeholder = spec.default.join(' ');
		}
		else if (this.needsOff(spec)) {
			/* An empty field is the default (uci stores no '' and neither
			 * do the daemons read one); 'off' turns it off. */
			o.placeholder = this.shownDefault(spec);
			o.description = '%s %s'.format(spec.doc, _("Empty: the default; 'off': %s.").format(spec.empty));
		}
		else if (typeof(spec.default) == 'string' && spec.default !== '') {
			o.placeholder = this.shownDefault(spec);
		}
		else if (spec.empty != null) {
			o.placeholder = spec.empty;
		}

		if (spec.required || spec.section_name)
			o.rmempty = false;

		o.validate = function(section_id, value) {
			if (value == null || value === '') {
				if (spec.required && !(spec.empty != null))
					return _('required');
			}
			else if (!self.check(spec, value)) {
				return _('expected %s').format(expected(spec));
			}
			return self.cross(section, section_id, type, name, value == null ? '' : value);
		};

		return o;
	}
});
