'use strict';
'require view';
'require form';
'require uci';
'require agentd.validate as validate';

/*
 * Settings of /etc/config/agentd: one named section per subsystem, each
 * option from the schema table (agentd/schema.js, generated from
 * uci-schema) with its range, default and doc, so what this page saves
 * is what `agentd --check-config` accepts. An empty field removes the
 * option: it then takes its default (shown as the placeholder).
 * Save & Apply commits the file; the init script's reload trigger makes
 * agentd and agent-gw re-read it.
 */

var SECTIONS = [
	[ 'gateway', _('Gateway'), _('agent-gw: listeners, authentication, limits, tasks and streams.') ],
	[ 'arpx', _('Route exchange (ARPX)'), _('Sessions with peer routers.') ],
	[ 'discovery', _('Discovery'), _('mDNS/DNS-SD discovery and admission of routers.') ],
	[ 'ipv6', _('IPv6'), _('Per-agent IPv6 /128 addresses.') ],
	[ 'relay', _('Relay'), _('NAT relay.') ],
	[ 'cloud', _('Cloud'), _('Optional cloud connector.') ]
];

return view.extend({
	load: function() {
		return uci.load('agentd');
	},

	render: function() {
		var m = new form.Map('agentd', _('Agent routing: settings'),
			_('Options left empty take their default (shown greyed). Values are checked as agentd --check-config checks them.'));

		SECTIONS.forEach(function(def) {
			var type = def[0];
			/* Singleton sections are named after their type (DESIGN §9). */
			var s = m.section(form.NamedSection, type, type, def[1], def[2]);
			s.addremove = true;
			validate.order(type).forEach(function(name) {
				validate.option(s, type, name, name);
			});
		});

		return m.render();
	}
});
