'use strict';
'require baseclass';
'require request';

/*
 * STAND-IN for luci-base's rpc.js, for tests only: `rpc.declare({object,
 * method, params, expect, filter, reject})` and `rpc.list()` as upstream
 * documents them, speaking ubus JSON-RPC 2.0 to L.env.ubuspath
 * ({"jsonrpc":"2.0","id":N,"method":"call","params":[sid, object, method,
 * args]}, reply {"result":[status, data]} or {"error":{code,message}}).
 * Not batched (upstream batches; the reply shape is the same).
 */

var requestID = 1;

function url() {
	return L.env.ubuspath || '/ubus/';
}

function reply(req, res) {
	var msg = res.json();
	if (!L.isObject(msg) || msg.jsonrpc != '2.0')
		L.raise('RPCError', 'RPC call to %s/%s returned invalid message frame', req.object, req.method);
	if (L.isObject(msg.error) && msg.error.code && msg.error.message)
		L.raise('RPCError', 'RPC call to %s/%s failed with error %d: %s', req.object, req.method, msg.error.code, msg.error.message);

	var ret = null;
	if (Array.isArray(msg.result)) {
		if (req.raise && msg.result[0] !== 0)
			L.raise('RPCError', 'RPC call to %s/%s failed with ubus code %d', req.object, req.method, msg.result[0]);
		ret = (msg.result.length > 1) ? msg.result[1] : msg.result[0];
	}
	else {
		ret = msg.result;
	}

	if (req.expect) {
		var type = Object.prototype.toString;
		for (var key in req.expect) {
			if (ret != null && key != '')
				ret = ret[key];
			if (ret == null || type.call(ret) != type.call(req.expect[key]))
				ret = req.expect[key];
			break;
		}
	}
	if (typeof(req.filter) == 'function') {
		req.priv[0] = ret;
		req.priv[1] = req.params;
		ret = req.filter.apply(this, req.priv);
	}
	return ret;
}

return baseclass.extend({
	declare: function(options) {
		window.__luci.declared.push({ object: options.object, method: options.method, params: options.params || [] });
		return function() {
			var args = Array.prototype.slice.call(arguments), params = {}, p_off = 0;
			if (Array.isArray(options.params))
				for (p_off = 0; p_off < options.params.length; p_off++)
					params[options.params[p_off]] = args[p_off];
			var priv = [ undefined, undefined ].concat(args.slice(p_off));
			var req = { expect: options.expect, filter: options.filter, params: params, priv: priv,
				object: options.object, method: options.method, raise: options.reject };
			var msg = { jsonrpc: '2.0', id: requestID++, method: 'call',
				params: [ L.env.sessionid, options.object, options.method, params ] };
			return request.post(url(), msg).then(function(res) {
				if (!res.ok)
					L.raise('RPCError', 'RPC call to %s/%s failed with HTTP error %d', options.object, options.method, res.status);
				return reply(req, res);
			});
		};
	},

	list: function() {
		var msg = { jsonrpc: '2.0', id: requestID++, method: 'list',
			params: arguments.length ? Array.prototype.slice.call(arguments) : undefined };
		return request.post(url(), msg).then(function(res) { return res.json().result; });
	},

	getSessionID: function() { return L.env.sessionid; }
});
