/*
 * STAND-IN for LuCI's client runtime (luci-base's luci.js), for tests only.
 *
 * Written from upstream's documented API (openwrt/luci,
 * modules/luci-base/htdocs/luci-static/resources/luci.js and its JSDoc):
 * the class system (`L.Class` / `baseclass`: extend, super, singleton,
 * instantiate, isSubclass), the class loader (`L.require`: the leading
 * `'require name [as alias]'` strings of a module, its factory evaluated
 * with (window, document, L, deps...) and the returned class
 * instantiated), `L.bind`, `L.hasViewPermission`, `L.resolveDefault`, `L.isObject`, `L.toArray`,
 * `L.url`, `L.resource`, `L.env`, `L.error`/`L.raise`, `E()`/`dom`
 * (create, append, content, attr, parent, data, bindClassInstance,
 * findClassInstance, callClassMethod), `poll` (add, remove, start, stop,
 * active), `request` (get, post), `view` (load, render, handleSave,
 * handleSaveApply, handleReset, addFooter), `String.prototype.format` and
 * `_()` — only as much of each as the agentd views use. It is not
 * upstream code and not a LuCI: no menu, no login, no theme.
 *
 * Test hooks (not LuCI API): window.__luci.strings (every `_()` string
 * seen), window.__luci.declared (every rpc.declare), window.__luci.ready.
 */
(function(window, document) {
	'use strict';

	var hooks = window.__luci = { strings: {}, declared: [], ready: false, errors: [] };

	/* ---- String.prototype.format (the subset LuCI's views use) ---- */
	String.prototype.format = function() {
		var args = arguments, n = 0;
		return this.replace(/%(-)?(0)?(\d+)?(?:\.(\d+))?([sdifxXhq%])/g, function(m, left, zero, width, prec, type) {
			if (type == '%')
				return '%';
			var v = args[n++], s;
			switch (type) {
			case 'd': case 'i': s = String(Math.trunc(+v)); break;
			case 'f': s = (+v).toFixed(prec != null ? +prec : 6); break;
			case 'x': s = (+v >>> 0).toString(16); break;
			case 'X': s = (+v >>> 0).toString(16).toUpperCase(); break;
			case 'h': s = String(v == null ? '' : v).replace(/[&<>"']/g, function(c) {
				return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&#34;', "'": '&#39;' }[c];
			}); break;
			case 'q': s = JSON.stringify(String(v)); break;
			default: s = (v == null) ? '' : String(v);
			}
			if (width != null && s.length < +width) {
				var pad = (zero && !left ? '0' : ' ').repeat(+width - s.length);
				s = left ? s + pad : pad + s;
			}
			return s;
		});
	};

	/* ---- Class ---- */
	var superContext = null;
	var Class = Object.assign(function() {}, {
		extend: function(properties) {
			var props = {
				__base__: { value: this.prototype },
				__name__: { value: properties.__name__ || 'anonymous' }
			};
			var ClassConstructor = function() {
				if (!(this instanceof ClassConstructor))
					throw new TypeError('Constructor must not be called without "new"');
				if (Object.getPrototypeOf(this).hasOwnProperty('__init__')) {
					if (typeof(this.__init__) != 'function')
						throw new TypeError('Class __init__ member is not a function');
					this.__init__.apply(this, arguments);
				}
				else {
					this.super('__init__', arguments);
				}
			};
			for (var key in properties)
				if (!props[key] && properties.hasOwnProperty(key))
					props[key] = { value: properties[key], writable: true };
			ClassConstructor.prototype = Object.create(this.prototype, props);
			ClassConstructor.prototype.constructor = ClassConstructor;
			Object.assign(ClassConstructor, this);
			return ClassConstructor;
		},
		singleton: function(properties) {
			return Class.extend(properties).instantiate(Class.prototype.varargs(arguments, 1));
		},
		instantiate: function(args) {
			return new (Function.prototype.bind.apply(this, Class.prototype.varargs(args, 0, null)))();
		},
		isSubclass: function(_class) {
			return (_class != null && typeof(_class) == 'function' && _class.prototype instanceof this);
		},
		prototype: {
			varargs: function(args, offset) {
				return Array.prototype.slice.call(arguments, 2).concat(Array.prototype.slice.call(args, offset));
			},
			super: function(key, callArgs) {
				if (key == null)
					return null;
				for (superContext = Object.getPrototypeOf(superContext || Object.getPrototypeOf(this));
				     superContext && !superContext.hasOwnProperty(key);
				     superContext = Object.getPrototypeOf(superContext)) { }
				if (!superContext)
					return null;
				var res = superContext[key];
				if (arguments.length > 1) {
					if (typeof(res) != 'function')
						throw new ReferenceError(key + ' is not a function in base class');
					if (typeof(callArgs) != 'object')
						callArgs = this.varargs(arguments, 1);
					res = res.apply(this, callArgs);
				}
				superContext = null;
				return res;
			}
		}
	});

	/* ---- dom ---- */
	var dom = Class.singleton({
		__name__: 'LuCI.dom',
		elem: function(e) { return (e != null && typeof(e) == 'object' && 'nodeType' in e); },
		parse: function(s) {
			var d = document.createElement('div');
			d.innerHTML = s;
			return d.firstChild;
		},
		matches: function(node, selector) { return this.elem(node) && node.matches ? node.matches(selector) : false; },
		parent: function(node, selector) { return (this.elem(node) && node.closest) ? node.closest(selector) : null; },
		append: function(node, children) {
			if (!this.elem(node))
				return null;
			if (Array.isArray(children)) {
				for (var i = 0; i < children.length; i++)
					if (this.elem(children[i]))
						node.appendChild(children[i]);
					else if (children[i] !== null && children[i] !== undefined)
						node.appendChild(document.createTextNode('' + children[i]));
				return node.lastChild;
			}
			else if (typeof(children) === 'function') {
				return this.append(node, children(node));
			}
			else if (this.elem(children)) {
				return node.appendChild(children);
			}
			else if (children !== null && children !== undefined) {
				node.innerHTML = '' + children;
				return node.lastChild;
			}
			return null;
		},
		content: function(node, children) {
			if (!this.elem(node))
				return null;
			while (node.firstChild)
				node.removeChild(node.firstChild);
			return this.append(node, children);
		},
		attr: function(node, key, val) {
			if (!this.elem(node))
				return null;
			var attr = null;
			if (typeof(key) === 'object' && key !== null)
				attr = key;
			else if (typeof(key) === 'string')
				attr = {}, attr[key] = val;
			for (key in attr) {
				if (!attr.hasOwnProperty(key) || attr[key] == null)
					continue;
				switch (typeof(attr[key])) {
				case 'function': node.addEventListener(key, attr[key]); break;
				case 'object': node.setAttribute(key, JSON.stringify(attr[key])); break;
				default: node.setAttribute(key, attr[key]);
				}
			}
		},
		create: function() {
			var html = arguments[0], attr = arguments[1], data = arguments[2], elem;
			if (!(attr instanceof Object) || Array.isArray(attr))
				data = attr, attr = null;
			if (Array.isArray(html)) {
				elem = document.createDocumentFragment();
				for (var i = 0; i < html.length; i++)
					elem.appendChild(this.create(html[i]));
			}
			else if (this.elem(html)) {
				elem = html;
			}
			else if (html.charCodeAt(0) === 60) {
				elem = this.parse(html);
			}
			else {
				elem = document.createElement(html);
			}
			if (!elem)
				return null;
			this.attr(elem, attr);
			this.append(elem, data);
			return elem;
		},
		registry: new WeakMap(),
		data: function(node, key, val) {
			var d = this.registry.get(node);
			if (arguments.length > 2) {
				if (!d)
					this.registry.set(node, d = {});
				d[key] = val;
				return val;
			}
			return d ? (arguments.length > 1 ? d[key] : d) : null;
		},
		bindClassInstance: function(node, inst) { return this.data(node, '_class', inst); },
		findClassInstance: function(node) {
			var inst = null;
			do {
				inst = this.data(node, '_class');
				node = node.parentNode;
			} while (!(inst instanceof Class) && node != null);
			return inst;
		},
		callClassMethod: function(node, method) {
			var inst = this.findClassInstance(node);
			if (inst == null || typeof(inst[method]) != 'function')
				return null;
			return inst[method].apply(inst, inst.varargs(arguments, 2));
		},
		isEmpty: function(node) {
			return !node || !node.firstElementChild;
		}
	});

	/* ---- poll ---- */
	var poll = Class.singleton({
		__name__: 'LuCI.poll',
		queue: [],
		add: function(fn, interval) {
			if (interval == null || interval <= 0)
				interval = L.env.pollinterval || 5;
			if (isNaN(interval) || typeof(fn) != 'function')
				throw new TypeError('Invalid argument to LuCI.poll.add()');
			for (var i = 0; i < this.queue.length; i++)
				if (this.queue[i].fn === fn)
					return false;
			this.queue.push({ r: true, i: interval >>> 0, fn: fn });
			if (this.tick != null && !this.active())
				this.start();
			return true;
		},
		remove: function(fn) {
			var len = this.queue.length;
			this.queue = this.queue.filter(function(e) { return e.fn !== fn; });
			return this.queue.length != len;
		},
		start: function() {
			if (this.active())
				return false;
			this.tick = 0;
			if (this.queue.length) {
				this.timer = window.setInterval(this.step, 1000);
				this.step();
			}
			return true;
		},
		stop: function() {
			if (!this.active())
				return false;
			window.clearInterval(this.timer);
			delete this.timer;
			delete this.tick;
			return true;
		},
		step: function() {
			for (var i = 0, e = null; (e = poll.queue[i]) != null; i++) {
				/* The first tick only starts the clock: a view has just
				 * rendered what load() returned. */
				if ((poll.tick % e.i) != 0 || !e.r || poll.tick == 0)
					continue;
				e.r = false;
				Promise.resolve().then(e.fn).catch(L.error).finally((function() { this.r = true; }).bind(e));
			}
			poll.tick = (poll.tick + 1) % Math.pow(2, 32);
		},
		active: function() { return this.timer != null; }
	});

	/* ---- request (fetch-based; JSON helpers as upstream's Response) ---- */
	var request = Class.singleton({
		__name__: 'LuCI.request',
		request: function(url, options) {
			var opt = Object.assign({ method: 'GET' }, options), init = { method: opt.method, credentials: 'same-origin', headers: {} };
			if (opt.content != null) {
				init.body = (typeof(opt.content) == 'object') ? JSON.stringify(opt.content) : String(opt.content);
				init.headers['Content-Type'] = (typeof(opt.content) == 'object') ? 'application/json' : 'text/plain';
			}
			return fetch(url, init).then(function(res) {
				return res.text().then(function(text) {
					return {
						ok: res.ok, status: res.status, statusText: res.statusText, url: res.url,
						text: function() { return text; },
						json: function() { return JSON.parse(text); }
					};
				});
			});
		},
		get: function(url, options) { return this.request(url, Object.assign({ method: 'GET' }, options)); },
		post: function(url, data, options) { return this.request(url, Object.assign({ method: 'POST', content: data }, options)); }
	});

	/* ---- view ---- */
	var View = Class.extend({
		__name__: 'LuCI.view',
		__init__: function() {
			var vp = document.getElementById('view');
			dom.content(vp, E('div', { 'class': 'spinning' }, [ _('Loading view…') ]));
			return Promise.resolve(this.load())
				.then(L.bind(this.render, this))
				.then(L.bind(function(nodes) {
					dom.content(vp, nodes);
					dom.append(vp, this.addFooter());
					hooks.ready = true;
					document.dispatchEvent(new CustomEvent('luci-view-ready'));
				}, this)).catch(L.error);
		},
		load: function() {},
		render: function() {},
		handleSave: function(ev) {
			var tasks = [];
			document.getElementById('maincontent').querySelectorAll('.cbi-map').forEach(function(map) {
				tasks.push(dom.callClassMethod(map, 'save'));
			});
			return Promise.all(tasks);
		},
		handleSaveApply: function(ev, mode) {
			return this.handleSave(ev).then(function() {
				return L.require('ui').then(function(ui) { return ui.changes.apply(mode == '0'); });
			});
		},
		handleReset: function(ev) {
			var tasks = [];
			document.getElementById('maincontent').querySelectorAll('.cbi-map').forEach(function(map) {
				tasks.push(dom.callClassMethod(map, 'reset'));
			});
			return Promise.all(tasks);
		},
		addFooter: function() {
			var footer = E([]);
			if (!(this.handleSaveApply || this.handleSave || this.handleReset))
				return footer;
			/* Upstream view.addFooter: the buttons are disabled when every
			 * form.Map of the view is read-only, or, in a view without a
			 * map, when L.hasViewPermission() is false. */
			var self = this, hasmap = false, readonly = true;
			document.getElementById('view').querySelectorAll('.cbi-map').forEach(function(map) {
				var m = dom.findClassInstance(map);
				if (m) {
					hasmap = true;
					if (!m.readonly)
						readonly = false;
				}
			});
			if (!hasmap)
				readonly = !L.hasViewPermission();
			var btn = function(cls, label, fn) {
				/* A refused save (invalid values) is shown by the form. */
				return fn ? E('button', { 'class': 'cbi-button ' + cls, 'disabled': readonly ? '' : null, 'click': function(ev) {
					return Promise.resolve(fn.call(self, ev)).catch(function(e) {
						if (!(e && e.validation))
							try { L.error(e); } catch (x) { }
					});
				} }, [ label ]) : '';
			};
			footer.appendChild(E('div', { 'class': 'cbi-page-actions' }, [
				btn('cbi-button-apply', _('Save & Apply'), this.handleSaveApply), ' ',
				btn('cbi-button-save', _('Save'), this.handleSave), ' ',
				btn('cbi-button-reset', _('Reset'), this.handleReset)
			]));
			return footer;
		}
	});

	/* ---- L ---- */
	var classes = { baseclass: Promise.resolve(Class), dom: Promise.resolve(dom), poll: Promise.resolve(poll),
		request: Promise.resolve(request), view: Promise.resolve(View) };

	var LuCI = Class.extend({
		__name__: 'LuCI',
		__init__: function(env) {
			this.env = env;
		},
		Class: Class,
		dom: dom,
		Poll: poll,
		Request: request,
		view: View,
		bind: function(fn, self) {
			return Function.prototype.bind.apply(fn, this.varargs(arguments, 2, self));
		},
		isObject: function(v) { return (v != null && typeof(v) == 'object'); },
		toArray: function(v) {
			if (v == null) return [];
			if (Array.isArray(v)) return v;
			if (typeof(v) == 'object') return [ v ];
			var s = String(v).trim();
			return s == '' ? [] : s.split(/\s+/);
		},
		/* Upstream luci.js: null without any ACL group of the page,
		 * false with read access only, true with write access
		 * (L.env.nodespec comes from the dispatcher, luci_web.py). */
		hasViewPermission: function() {
			if (!this.isObject(this.env.nodespec) || !this.env.nodespec.satisfied)
				return null;
			return !this.env.nodespec.readonly;
		},
		resolveDefault: function(value, defvalue) {
			return Promise.resolve(value).catch(function() { return defvalue; });
		},
		path: function(prefix, parts) {
			var url = [ prefix || '' ];
			for (var i = 0; i < parts.length; i++)
				if (/^(?:[a-zA-Z0-9_.%,;-]+\/)*[a-zA-Z0-9_.%,;-]+$/.test(parts[i]))
					url.push('/', parts[i]);
			if (url.length === 1)
				url.push('/');
			return url.join('');
		},
		url: function() { return this.path(this.env.scriptname, arguments); },
		resource: function() { return this.path(this.env.resource, arguments); },
		raise: function(type, fmt) {
			var msg = fmt ? String.prototype.format.apply(fmt, this.varargs(arguments, 2)) : null;
			var e = (type instanceof Error) ? type : new (window[type || 'Error'] || Error)(msg || 'Unspecified error');
			if (!(type instanceof Error))
				e.name = type || 'Error';
			throw e;
		},
		/* Shows the error in the view (as upstream does) and reports it to
		 * the console, where the tests look for errors. */
		error: function(type, fmt) {
			try {
				L.raise.apply(L, Array.prototype.slice.call(arguments));
			}
			catch (e) {
				if (e === 'Session expired')
					throw e;
				hooks.errors.push(String(e && e.message || e));
				var vp = document.getElementById('view');
				if (vp)
					dom.append(vp, E('pre', { 'class': 'alert-message error' }, [ String(e && e.stack || e) ]));
				console.error('LuCI error:', e && e.message || e);
				throw e;
			}
		},
		require: function(name, from) {
			var L = this;
			from = from || [];
			if (classes[name] != null) {
				if (from.indexOf(name) != -1)
					L.raise('DependencyError', 'Circular dependency: class "%s" depends on "%s"', name, from.join('" which depends on "'));
				return classes[name];
			}
			var url = '%s/%s.js'.format(L.env.base_url, name.replace(/\./g, '/'));
			from = [ name ].concat(from);
			classes[name] = request.get(url).then(function(res) {
				if (!res.ok)
					L.raise('NetworkError', 'HTTP error %d while loading class file "%s"', res.status, url);
				var source = res.text(), depends = [], args = '';
				var requirematch = /^require[ \t]+(\S+)(?:[ \t]+as[ \t]+([a-zA-Z_]\S*))?$/, strictmatch = /^use[ \t]+strict$/;
				/* The leading string statements: 'use strict', 'require x [as y]'. */
				var re = /^\s*(?:\/\/[^\n]*\n|\/\*[\s\S]*?\*\/)*\s*(['"])([^'"\n]*)\1;?/, rest = source, m;
				while ((m = re.exec(rest)) != null) {
					var s = m[2], r = requirematch.exec(s);
					if (r) {
						depends.push(L.require(r[1], from));
						args += ', ' + (r[2] || r[1].replace(/[^a-zA-Z0-9_]/g, '_'));
					}
					else if (!strictmatch.exec(s)) {
						break;
					}
					rest = rest.substring(m[0].length);
				}
				return Promise.all(depends).then(function(instances) {
					var factory = eval('(function(window, document, L%s) { %s })\n\n//# sourceURL=%s\n'.format(args, source, url));
					var _class = factory.apply(factory, [ window, document, L ].concat(instances));
					if (!Class.isSubclass(_class))
						L.error('TypeError', '"%s" factory yields invalid constructor', name);
					var instance = new _class();
					classes[name] = Promise.resolve(instance);
					return instance;
				});
			});
			return classes[name];
		}
	});

	var L = window.L = new LuCI(window.__luci_env || {});
	window.E = function() { return dom.create.apply(dom, arguments); };
	/* Records the strings the app itself translates (the caller's source
	 * URL is one of the app's modules, not this stand-in's). */
	var fromApp = function() {
		var frames = String(new Error().stack).split('\n');
		return frames.length > 3 && /\/agentd\//.test(frames[3]);
	};
	window._ = function(s, ctx) {
		if (fromApp())
			hooks.strings[s] = true;
		return s;
	};
	window.N_ = function(n, s, p, ctx) {
		if (fromApp()) {
			hooks.strings[s] = true;
			hooks.strings[p] = true;
		}
		return (n == 1) ? s : p;
	};

	window.addEventListener('error', function(ev) { hooks.errors.push(String(ev.message)); });
	window.addEventListener('unhandledrejection', function(ev) {
		hooks.errors.push(String(ev.reason && ev.reason.message || ev.reason));
		console.error('Unhandled rejection:', ev.reason && ev.reason.message || ev.reason);
	});

	/* Boot: the page names its view (as LuCI's dispatcher does for a
	 * menu entry of action type "view"). */
	document.addEventListener('DOMContentLoaded', function() {
		Promise.all([ L.require('ui'), L.require('rpc'), L.require('form'), L.require('uci') ]).then(function() {
			poll.start();
			if (L.env.view)
				return L.require('view.' + L.env.view.replace(/\//g, '.'));
		}).catch(function(e) { console.error('view failed:', e && e.message || e); });
	});
})(window, document);
