'use strict';
'require view';
'require rpc';
'require poll';
'require ui';
'require dom';
'require agentd.common as common';

var callStatus = rpc.declare({
	object: 'agentd',
	method: 'status',
	expect: { '': {} }
});

var callPeers = rpc.declare({
	object: 'agentd',
	method: 'peers',
	expect: { '': {} }
});

var callAgents = rpc.declare({
	object: 'agentd',
	method: 'agents',
	expect: { '': {} }
});

var callStats = rpc.declare({
	object: 'agentd',
	method: 'stats',
	expect: { '': {} }
});

var callTasks = rpc.declare({
	object: 'agentd',
	method: 'tasks',
	expect: { '': {} }
});

var callReload = rpc.declare({
	object: 'agentd',
	method: 'reload',
	expect: { '': {} }
});

/* Most events the page keeps (newest first). */
var MAX_EVENTS = 20;

return view.extend({
	/* The per-agent address service (`status.ipv6`): mode, prefix, link,
	 * addresses bound, and the first reason it cannot bind, if any. */
	ipv6Text: function(v) {
		if (!v || typeof(v) != 'object')
			return _('off');
		var line = _('%s: %s on %s, %d of %d bound').format(v.mode,
			v.prefix || _('no prefix'), v.interface, v.bound, v.max_addresses);
		if (!v.ready && Array.isArray(v.problems) && v.problems.length)
			line += ' — ' + _('not ready: %s').format(v.problems[0]);
		return line;
	},

	/* What the last poll saw, to turn changes into events. */
	last: null,
	events: [],

	load: function() {
		return Promise.all([ callStatus(), callPeers(), callAgents(), callStats(), callTasks() ]);
	},

	/* Events are the changes this page saw between two polls: agentd
	 * going down or up, a config reload, a session changing state, the
	 * route count moving. */
	noteEvents: function(st, peers) {
		var now = new Date(), seen = [];
		var down = common.errorOf(st) != null;
		var state = { down: down, generation: down ? null : st.config.generation, routes: down ? null : st.routes.total, peers: {} };
		(Array.isArray(peers.peers) ? peers.peers : []).forEach(function(p) { state.peers[p.router_id] = p.state; });

		var prev = this.last;
		if (prev == null) {
			seen.push(down ? _('agentd is not reachable: %s').format(common.errorOf(st))
				: _('agentd %s up for %s').format(st.router_id, common.duration(st.uptime_s)));
		}
		else {
			if (prev.down != down)
				seen.push(down ? _('agentd went away: %s').format(common.errorOf(st)) : _('agentd is back'));
			if (!down && prev.generation != null && prev.generation != state.generation)
				seen.push(_('configuration reloaded (generation %s)').format(state.generation));
			if (!down && prev.routes != null && prev.routes != state.routes)
				seen.push(_('routes: %d → %d').format(prev.routes, state.routes));
			Object.keys(state.peers).forEach(function(id) {
				if (prev.peers[id] != state.peers[id])
					seen.push(_('peer %s: %s').format(id, state.peers[id]));
			});
			Object.keys(prev.peers).forEach(function(id) {
				if (!(id in state.peers))
					seen.push(_('peer %s removed').format(id));
			});
		}
		this.last = state;
		for (var i = 0; i < seen.length; i++)
			this.events.unshift([ now.toLocaleTimeString(), seen[i] ]);
		this.events.length = Math.min(this.events.length, MAX_EVENTS);
	},

	update: function(root, data) {
		var st = data[0], peers = data[1], agents = data[2], stats = data[3], tasks = data[4];
		var err = common.errorOf(st);
		var byId = function(id) { return root.querySelector('#' + id); };
		var set = function(id, v) { common.setText(byId(id), common.dash(v)); };

		this.noteEvents(st, peers);
		set('agentd-health', err ? _('not running: %s').format(err) : _('running'));
		if (!err) {
			set('agentd-router-id', st.router_id);
			set('agentd-software', st.software);
			set('agentd-uptime', common.duration(st.uptime_s));
			set('agentd-config', st.config.ok ? _('ok (generation %s)').format(st.config.generation)
				: (st.config.error || _('%d problems').format(st.config.problems_total)));
			set('agentd-policy', st.policy.ok ? _('ok') : st.policy.error);
			set('agentd-routes', _('%d (local %d, static %d, peer %d)').format(
				st.routes.total, st.routes.local, st.routes.static, st.routes.peer));
			set('agentd-ipv6', this.ipv6Text(st.ipv6));
		}

		var list = Array.isArray(peers.peers) ? peers.peers : [];
		var up = list.filter(function(p) { return p.established; }).length;
		set('agentd-peers', common.errorOf(peers) || _('%d of %d established').format(up, list.length));
		var alist = Array.isArray(agents.agents) ? agents.agents : [];
		set('agentd-agents', common.errorOf(agents) || String(alist.length));
		var gw = (stats && stats.gateway && typeof(stats.gateway) == 'object') ? stats.gateway : null;
		set('agentd-gateway', common.errorOf(stats) || (gw ? _('reporting') : _('no report from agent-gw')));
		var t = (tasks && tasks.tasks && typeof(tasks.tasks) == 'object') ? tasks.tasks : null;
		set('agentd-tasks', common.errorOf(tasks) || (t ? _('%d of %d held').format(t.held, t.capacity) : _('no report from agent-gw')));

		common.fill(byId('agentd-peer-table'), list.map(function(p) {
			return [ p.router_id, p.address + ':' + p.port, p.state,
				p.established ? common.duration(p.uptime_s) : '-',
				String(p.routes_in), String(p.routes_out), common.dash(p.last_error) ];
		}), common.errorOf(peers) || _('No peers configured.'));

		common.fill(byId('agentd-events'), this.events, _('No events yet.'));
	},

	handleReload: function(ev) {
		return callReload().then(function(res) {
			var err = common.errorOf(res);
			ui.addNotification(null, E('p', [ err ? _('Reload failed: %s').format(err)
				: _('agentd reloaded its configuration (generation %s).').format(res.generation) ]), err ? 'error' : 'info');
		}, function(e) {
			/* Refused by ubus, e.g. a session without write access. */
			ui.addNotification(null, E('p', [ _('Reload failed: %s').format(e.message) ]), 'error');
		});
	},

	render: function(data) {
		var row = function(label, id) {
			return E('tr', { 'class': 'tr' }, [
				E('td', { 'class': 'td left', 'width': '33%' }, [ label ]),
				E('td', { 'class': 'td left', 'id': id }, [ '-' ])
			]);
		};

		var node = E('div', { 'id': 'agentd-overview' }, [
			E('h2', [ _('Agent routing: overview') ]),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', [ _('Health') ]),
				E('table', { 'class': 'table', 'id': 'agentd-health-table' }, [
					row(_('agentd'), 'agentd-health'),
					row(_('Router ID'), 'agentd-router-id'),
					row(_('Software'), 'agentd-software'),
					row(_('Uptime'), 'agentd-uptime'),
					row(_('Configuration'), 'agentd-config'),
					row(_('Policy'), 'agentd-policy'),
					row(_('IPv6 per agent'), 'agentd-ipv6'),
					row(_('Gateway'), 'agentd-gateway')
				]),
				E('div', { 'class': 'right' }, [
					/* Write-scoped (ubus agentd.reload): disabled for a
					 * read-only user, as upstream's form footer is
					 * (L.hasViewPermission() is false with read access). */
					E('button', { 'class': 'btn cbi-button-action', 'id': 'agentd-reload',
						'disabled': L.hasViewPermission() ? null : '',
						'click': ui.createHandlerFn(this, 'handleReload') }, [ _('Reload configuration') ])
				])
			]),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', [ _('Counts') ]),
				E('table', { 'class': 'table' }, [
					row(_('Routes'), 'agentd-routes'),
					row(_('Agents'), 'agentd-agents'),
					row(_('Peers'), 'agentd-peers'),
					row(_('Async tasks'), 'agentd-tasks')
				])
			]),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', [ _('Peers') ]),
				common.table('agentd-peer-table', [ _('Peer'), _('Address'), _('State'), _('Uptime'),
					_('Routes in'), _('Routes out'), _('Last error') ])
			]),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', [ _('Recent events') ]),
				common.table('agentd-events', [ _('Time'), _('Event') ])
			])
		]);

		/* Filled now, then updated in place every 5 s. */
		this.update(node, data);
		poll.add(L.bind(function() {
			return Promise.all([ callStatus(), callPeers(), callAgents(), callStats(), callTasks() ])
				.then(L.bind(this.update, this, node));
		}, this), 5);

		return node;
	},

	handleSaveApply: null,
	handleSave: null,
	handleReset: null
});
