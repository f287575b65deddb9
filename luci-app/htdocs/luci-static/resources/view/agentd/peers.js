'use strict';
'require view';
'require rpc';
'require poll';
'require ui';
'require dom';
'require uci';
'require agentd.common as common';

var callPeers = rpc.declare({
	object: 'agentd',
	method: 'peers',
	expect: { '': {} }
});

var callCandidates = rpc.declare({
	object: 'agentd',
	method: 'candidates',
	expect: { '': {} }
});

/* An approval or revocation names the record version the operator saw:
 * if the candidate re-announced with another endpoint or key meanwhile,
 * agentd refuses it and the page shows the new record. */
var callApprove = rpc.declare({
	object: 'agentd',
	method: 'approve',
	params: [ 'id', 'version' ],
	expect: { '': {} }
});

var callRevoke = rpc.declare({
	object: 'agentd',
	method: 'revoke',
	params: [ 'id', 'version' ],
	expect: { '': {} }
});

/* What a decision on a candidate may be, by its state (agentctl
 * candidates: pending, approved, admitted, rejected, conflict;
 * docs/discovery.md). Approve writes a discovered peer section: for a
 * pending router, for one the automatic mode rejected or admitted only
 * in memory, and for a conflict (the fresh approval of that record that
 * replaces the pin); an approved router (by an earlier approval or a
 * static peer section) is not approved again. Revoke removes an approval: only an approved one
 * (an admission in memory has nothing to revoke). Under admission 'off'
 * nothing may be decided. */
function mayApprove(admission, c) { return admission != 'off' && c.state != 'approved'; }
function mayRevoke(admission, c) { return admission != 'off' && c.state == 'approved'; }

/* The state, and for a conflict the reason agentd gives (the key it
 * knows for the router id against the one announced) and the mDNS
 * instance when mDNS renamed it. */
function stateCell(c) {
	if (!c.reason)
		return common.dash(c.state);
	var instance = (c.instance && c.instance != c.id) ? ' ' + _('(mDNS instance %s)').format(c.instance) : '';
	return E('span', { 'class': 'agentd-conflict' }, [ E('strong', [ String(c.state) ]), instance, E('br'), String(c.reason) ]);
}

/* While the router announces, its whole lifetime is left (the countdown
 * starts when the announcement ends). */
/* What the router of an approval announces now, against the record
 * version the approval was made for. An approval outlives the
 * announcement it was made on: when the router is gone or announces
 * another version, its candidate row cannot revoke it, this one can. */
function announcedNow(list, a) {
	/* Several hosts may announce one router id (a conflict): the one at
	 * the approved version first. */
	var same = list.filter(function(c) { return String(c.id) == a.id; });
	var c = same.filter(function(c) { return String(c.version) == a.version; })[0] || same[0];
	if (!c)
		return _('not announced');
	return String(c.version) == a.version ? _('at this version') : _('at version %s').format(c.version);
}

/* The approvals in the file: `peer` sections agentd wrote with
 * `discovered '1'` (docs/discovery.md). */
function approvals() {
	return uci.sections('agentd', 'peer').filter(function(s) {
		return s.discovered == '1' && s.router_id;
	}).map(function(s) {
		return { id: String(s.router_id), version: String(s.record_version || '0'),
			fingerprint: s.key_fingerprint, section: s['.name'] };
	});
}

function expiry(c) {
	if (c.announced)
		return _('announced');
	return typeof(c.expires_in_s) == 'number' ? _('in %s').format(common.duration(c.expires_in_s)) : '-';
}

/* The relay role (ubus peers' `relay`): which relay carries this router
 * and since when, each relay's last error, or a relay's client routers;
 * and that a relay sees the payloads it carries. '' when off. */
function relayText(r) {
	if (!r)
		return '';
	var text;
	if (r.mode == 'server') {
		text = _('Relay for %d of at most %d client routers%s.').format(r.clients.length, r.max_clients,
			r.clients.length ? ': ' + r.clients.join(', ') : '');
	} else {
		var used = (r.servers || []).filter(function(s) { return s.state == 'in_use' })[0];
		text = used
			? _('Reached through relay %s (%s) for %s.').format(used.server, common.dash(used.router_id), common.duration((used.since_ms || 0) / 1000))
			: _('No relay in use: this router cannot be reached from the mesh.');
		(r.servers || []).forEach(function(s) {
			if (s.state != 'in_use' && s.last_error)
				text += ' ' + _('Relay %s: %s.').format(s.server, s.last_error);
		});
	}
	return text + ' ' + _('The relay sees the payloads of the calls it carries.');
}

return view.extend({
	load: function() {
		return Promise.all([ callPeers(), callCandidates(), uci.load('agentd') ]);
	},

	update: function(root, data) {
		var peers = data[0], cands = data[1], self = this;
		/* Approve and Revoke are write-scoped (ubus agentd.approve/revoke):
		 * disabled for a read-only user (L.hasViewPermission() false), as
		 * upstream's form footer is. */
		var writable = !!L.hasViewPermission();
		var perr = common.errorOf(peers);
		common.setText(root.querySelector('#agentd-self'), perr ? perr
			: _('%s, key %s, sessions %s, listening on %s').format(common.dash(peers.router_id),
				common.dash(peers.fingerprint), peers.sessions + (peers.off_reason ? ' (' + peers.off_reason + ')' : ''),
				peers.listen ? peers.listen + (peers.listen_error ? ' – ' + peers.listen_error : '') : _('nothing')));

		common.setText(root.querySelector('#agentd-relay'), relayText(peers.relay));

		common.fill(root.querySelector('#agentd-session-table'),
			(Array.isArray(peers.peers) ? peers.peers : []).map(function(p) {
				return [ p.router_id, p.address + ':' + p.port,
					p.state + (p.next_dial_ms != null && !p.established ? ' ' + _('(retry in %s)').format(common.duration(p.next_dial_ms / 1000)) : ''),
					p.established ? common.duration(p.uptime_s) : '-',
					String(p.routes_in), String(p.routes_out),
					common.dash(p.last_error),
					p.last_close ? '%s (%s)'.format(p.last_close.code, p.last_close.by_us ? _('by us') : _('by peer')) : '-' ];
			}), perr || _('No peers configured.'));

		var cerr = common.errorOf(cands);
		var list = Array.isArray(cands.candidates) ? cands.candidates : [];
		common.setText(root.querySelector('#agentd-admission'), cerr
			? _('Discovery is not available: %s').format(cerr)
			: (cands.off_reason
				? _('Admission mode: %s; discovery is off: %s').format(common.dash(cands.admission), cands.off_reason)
				: _('Admission mode: %s').format(common.dash(cands.admission))));
		common.fill(root.querySelector('#agentd-candidate-table'), list.map(function(c) {
			/* The buttons carry the id and record version of the row shown:
			 * agentd refuses a decision on a record it no longer announces. */
			var id = String(c.id), version = c.version;
			return [ id, common.dash(c.domain),
				common.dash(c.address) + (c.port ? ':' + c.port : '') + (c.data_port ? ' ' + _('(data %s)').format(c.data_port) : ''),
				common.dash(c.fingerprint), String(version), stateCell(c), expiry(c),
				E('div', {}, [
					E('button', {
						'class': 'btn cbi-button-positive agentd-approve', 'data-id': id, 'data-version': String(version),
						'disabled': (writable && mayApprove(cands.admission, c)) ? null : '',
						'click': ui.createHandlerFn(self, 'handleDecision', callApprove, id, version)
					}, [ _('Approve') ]), ' ',
					E('button', {
						'class': 'btn cbi-button-negative agentd-revoke', 'data-id': id, 'data-version': String(version),
						'disabled': (writable && mayRevoke(cands.admission, c)) ? null : '',
						'click': ui.createHandlerFn(self, 'handleDecision', callRevoke, id, version)
					}, [ _('Revoke') ])
				]) ];
		}), cerr ? _('No candidates (discovery unavailable).') : _('No routers discovered.'));

		common.fill(root.querySelector('#agentd-approval-table'), approvals().map(function(a) {
			return [ a.id, a.version, common.dash(a.fingerprint), a.section, announcedNow(list, a),
				E('button', {
					'class': 'btn cbi-button-negative agentd-revoke-approval', 'data-id': a.id, 'data-version': a.version,
					'disabled': writable ? null : '',
					'click': ui.createHandlerFn(self, 'handleDecision', callRevoke, a.id, +a.version)
				}, [ _('Revoke') ]) ];
		}), _('No discovered router is approved.'));
	},

	handleDecision: function(fn, id, version, ev) {
		return fn(id, version).then(L.bind(function(res) {
			var err = common.errorOf(res);
			ui.addNotification(null, E('p', [ err
				? _('%s (record version %s): %s').format(id, version, err)
				: (fn === callApprove
					? _('%s (record version %s) approved: peer section %s written').format(id, version, res.section)
					: _('%s (record version %s) revoked: peer section %s removed').format(id, version, res.section)) ]),
				err ? 'error' : 'info');
			return this.refresh();
		}, this), function(e) {
			ui.addNotification(null, E('p', [ _('%s (record version %s): %s').format(id, version, e.message) ]), 'error');
		});
	},

	refresh: function() {
		/* Re-read the file: a decision here or elsewhere rewrites it. */
		uci.unload('agentd');
		return Promise.all([ callPeers(), callCandidates(), uci.load('agentd') ]).then(L.bind(this.update, this, this.root));
	},

	render: function(data) {
		var node = E('div', { 'id': 'agentd-peers' }, [
			E('h2', [ _('Agent routing: peers and discovery') ]),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', [ _('Sessions') ]),
				E('p', { 'id': 'agentd-self' }, [ '-' ]),
				E('p', { 'id': 'agentd-relay' }, [ '' ]),
				common.table('agentd-session-table', [ _('Peer'), _('Address'), _('State'), _('Uptime'),
					_('Routes in'), _('Routes out'), _('Last error'), _('Last close') ])
			]),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', [ _('Discovered routers') ]),
				E('p', { 'id': 'agentd-admission' }, [ '-' ]),
				common.table('agentd-candidate-table', [ _('Router'), _('Domain'), _('Address'),
					_('Key fingerprint'), _('Record version'), _('State'), _('Expires'), _('Decision') ])
			]),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', [ _('Approved discovered routers') ]),
				E('p', [ _('Approvals in the configuration, also of routers no longer announced or announcing another record version.') ]),
				common.table('agentd-approval-table', [ _('Router'), _('Record version'), _('Key fingerprint'),
					_('Section'), _('Announced now'), _('Decision') ])
			])
		]);
		this.root = node;
		this.update(node, data);
		poll.add(L.bind(this.refresh, this), 5);
		return node;
	},

	handleSaveApply: null,
	handleSave: null,
	handleReset: null
});
