'use strict';
'require view';
'require rpc';
'require poll';
'require dom';
'require agentd.common as common';

var callAgents = rpc.declare({
	object: 'agentd',
	method: 'agents',
	expect: { '': {} }
});

var callRoutes = rpc.declare({
	object: 'agentd',
	method: 'routes',
	expect: { '': {} }
});

return view.extend({
	load: function() {
		return Promise.all([ callAgents(), callRoutes() ]);
	},

	/* Each local registration's lease runs out at a wall-clock deadline
	 * taken from `expires_in_s` when it was fetched; the page counts it
	 * down every second and re-reads the table every 5 s. */
	update: function(root, data) {
		var agents = data[0], routes = data[1], now = Date.now();
		var list = Array.isArray(agents.agents) ? agents.agents : [];
		var local = (Array.isArray(routes.routes) ? routes.routes : []).filter(function(r) {
			return r.source == 'local';
		});

		common.fill(root.querySelector('#agentd-agent-table'), list.map(function(a) {
			return [ a.origin, a.tenant, String(a.routes), String(a.healthy_routes),
				(a.capabilities || []).join(', ') ];
		}), common.errorOf(agents) || _('No agents are registered.'));

		common.fill(root.querySelector('#agentd-lease-table'), local.map(function(r) {
			var lease = E('span', { 'class': 'agentd-lease' }, [ '-' ]);
			if (typeof(r.expires_in_s) == 'number')
				lease.setAttribute('data-deadline', String(now + r.expires_in_s * 1000));
			else
				dom.content(lease, [ _('permanent') ]);
			return [ r.route_id, r.capability + ' v' + r.version, r.origin, r.endpoint,
				r.healthy ? _('up') : _('down'), lease ];
		}), common.errorOf(routes) || _('No local registrations.'));
		this.tick(root);
	},

	tick: function(root) {
		var now = Date.now();
		root.querySelectorAll('.agentd-lease[data-deadline]').forEach(function(span) {
			var left = (+span.getAttribute('data-deadline') - now) / 1000;
			dom.content(span, [ left > 0 ? common.duration(Math.ceil(left)) : _('expired') ]);
		});
	},

	render: function(data) {
		var node = E('div', { 'id': 'agentd-agents' }, [
			E('h2', [ _('Agent routing: agents') ]),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', [ _('Agents') ]),
				common.table('agentd-agent-table', [ _('Origin'), _('Tenant'), _('Routes'),
					_('Healthy'), _('Capabilities') ])
			]),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', [ _('Local registrations') ]),
				common.table('agentd-lease-table', [ _('Route'), _('Capability'), _('Origin'),
					_('Endpoint'), _('Health'), _('Lease left') ])
			])
		]);

		this.update(node, data);
		poll.add(L.bind(function() {
			return Promise.all([ callAgents(), callRoutes() ]).then(L.bind(this.update, this, node));
		}, this), 5);
		poll.add(L.bind(this.tick, this, node), 1);
		return node;
	},

	handleSaveApply: null,
	handleSave: null,
	handleReset: null
});
