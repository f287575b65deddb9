'use strict';
'require view';
'require rpc';
'require poll';
'require ui';
'require dom';
'require agentd.common as common';

var callRoutes = rpc.declare({
	object: 'agentd',
	method: 'routes',
	expect: { '': {} }
});

var callLookup = rpc.declare({
	object: 'agentd',
	method: 'lookup',
	params: [ 'capability', 'version', 'tenant', 'source', 'explain' ],
	expect: { '': {} }
});

/* Scores come from lookups; at most this many (capability, version,
 * tenant) triples are scored
 * per refresh, so a large RIB costs a bounded number of calls. */
var MAX_SCORED = 32;

return view.extend({
	load: function() {
		return callRoutes().then(L.bind(this.withScores, this));
	},

	/* The RIB plus, for each table entry, its score in a lookup of its
	 * capability and version by its own tenant ('-' where that lookup
	 * does not rank it: not eligible, or denied by policy). */
	withScores: function(routes) {
		var list = Array.isArray(routes.routes) ? routes.routes : [];
		var keys = [];
		list.forEach(function(r) {
			var k = [ r.capability, r.version, r.tenant ].join('\n');
			if (keys.indexOf(k) < 0 && keys.length < MAX_SCORED)
				keys.push(k);
		});
		return Promise.all(keys.map(function(k) {
			var p = k.split('\n');
			return callLookup(p[0], +p[1], p[2] || undefined, undefined, true);
		})).then(function(lookups) {
			var scores = {};
			lookups.forEach(function(l, i) {
				var tenant = keys[i].split('\n')[2];
				(Array.isArray(l.candidates) ? l.candidates : []).forEach(function(c) {
					scores[c.path_id + '\n' + tenant] = c;
				});
			});
			return [ routes, scores ];
		});
	},

	update: function(root, data) {
		var routes = data[0], scores = data[1];
		var list = Array.isArray(routes.routes) ? routes.routes : [];
		common.fill(root.querySelector('#agentd-route-table'), list.map(function(r) {
			var c = scores[r.path_id + '\n' + r.tenant];
			return [ r.path_id, r.capability + ' v' + r.version, r.source,
				(r.path && r.path.length) ? r.path.join(' > ') : '-',
				r.origin, r.endpoint,
				String(r.latency_ms), String(r.cost), String(r.load), String(r.trust),
				r.healthy ? _('up') : _('down'),
				r.eligible ? _('yes') : _('no'),
				c ? '%d (#%d)'.format(c.score, c.rank) : '-',
				typeof(r.expires_in_s) == 'number' ? common.duration(r.expires_in_s) : common.dash(r.expires_in_s) ];
		}), common.errorOf(routes) || _('The RIB is empty.'));
	},

	handleLookup: function(ev) {
		var root = this.root;
		/* An empty field is left out of the call (undefined is not sent). */
		var val = function(id) { var v = root.querySelector('#' + id).value.trim(); return v === '' ? undefined : v; };
		var cap = val('agentd-lookup-capability'), ver = val('agentd-lookup-version');
		var out = root.querySelector('#agentd-lookup-result');
		if (cap === undefined) {
			dom.content(out, common.notice(_('Enter a capability.')));
			return Promise.resolve();
		}
		if (ver !== undefined && !/^[1-9][0-9]*$/.test(ver)) {
			dom.content(out, common.notice(_('The version is an integer ≥ 1.')));
			return Promise.resolve();
		}
		return callLookup(cap, ver === undefined ? undefined : +ver, val('agentd-lookup-tenant'), val('agentd-lookup-source'), true)
			.then(L.bind(this.renderLookup, this, out));
	},

	renderLookup: function(out, res) {
		var err = common.errorOf(res);
		if (err) {
			dom.content(out, common.notice(err));
			return;
		}
		var verdict = res.denied
			? _('Denied (%s) by %s').format(common.dash(res.refusal), res.rule || _('the default action'))
			: (res.winner ? _('Winner: %s (rule %s)').format(res.winner, res.rule || _('default'))
				: _('No eligible route (%s)').format(common.dash(res.refusal)));
		var table = common.table('agentd-lookup-candidates', [ _('Rank'), _('Path'), _('Source'),
			_('Via'), _('Origin'), _('Endpoint'), _('Score') ]);
		common.fill(table, (res.candidates || []).map(function(c) {
			return [ String(c.rank), c.path_id, c.source, common.dash(c.next_hop), c.origin, c.endpoint, String(c.score) ];
		}), _('No candidates.'));
		var rej = Object.keys(res.rejections || {}).map(function(k) { return '%s: %d'.format(k, res.rejections[k]); });
		dom.content(out, [
			E('p', { 'id': 'agentd-lookup-verdict' }, [ verdict ]),
			table,
			E('p', [ _('Rejected: %s').format(rej.length ? rej.join(', ') : _('none')) ])
		]);
	},

	render: function(data) {
		var input = function(id, label, placeholder) {
			return E('div', { 'class': 'cbi-value' }, [
				E('label', { 'class': 'cbi-value-title', 'for': id }, [ label ]),
				E('div', { 'class': 'cbi-value-field' }, [
					E('input', { 'type': 'text', 'class': 'cbi-input-text', 'id': id, 'placeholder': placeholder })
				])
			]);
		};
		var node = E('div', { 'id': 'agentd-routes' }, [
			E('h2', [ _('Agent routing: routes') ]),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', [ _('Routing table') ]),
				common.table('agentd-route-table', [ _('Entry'), _('Capability'), _('Source'), _('Path'),
					_('Origin'), _('Endpoint'), _('Latency (ms)'), _('Cost'), _('Load'), _('Trust'),
					_('Health'), _('Eligible'), _('Score'), _('Lease') ])
			]),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', [ _('Lookup and explain') ]),
				input('agentd-lookup-capability', _('Capability'), 'demo.echo'),
				input('agentd-lookup-version', _('Version'), '1'),
				input('agentd-lookup-tenant', _('Tenant'), _('default')),
				input('agentd-lookup-source', _('Source agent'), 'agent://tenant/name'),
				E('div', { 'class': 'cbi-page-actions' }, [
					E('button', { 'class': 'btn cbi-button-action', 'id': 'agentd-lookup-run',
						'click': ui.createHandlerFn(this, 'handleLookup') }, [ _('Look up') ])
				]),
				E('div', { 'id': 'agentd-lookup-result' })
			])
		]);
		this.root = node;

		this.update(node, data);
		poll.add(L.bind(function() {
			return callRoutes().then(L.bind(this.withScores, this)).then(L.bind(this.update, this, node));
		}, this), 5);
		return node;
	},

	handleSaveApply: null,
	handleSave: null,
	handleReset: null
});
