'use strict';
'require view';
'require form';
'require uci';
'require agentd.validate as validate';

/*
 * Settings of /etc/config/agentd: one named section per subsystem, each
 * option from the schema table (agentd/schema.js, generated from
 * uci-schema) with its label, range, default and doc, so what this page
 * saves is what `agentd --check-config` accepts. An empty field removes
 * the option: it then takes its default (shown as the placeholder); a
 * listener is turned off with 'off'. Save & Apply commits the file and
 * rpcd runs reload_config, whose config.change makes procd run the init
 * scripts' reload (agentd re-reads the file, agent-gw restarts on it).
 *
 * The `cloud` section is not offered: the cloud connector does not exist
 * yet, and its options would change nothing.
 */

var SECTIONS = [
	[ 'gateway', _('Gateway'), _('agent-gw: listeners, authentication, limits, tasks and streams.') ],
	[ 'arpx', _('Route exchange (ARPX)'), _('Sessions with peer routers.') ],
	[ 'discovery', _('Discovery'), _('mDNS/DNS-SD discovery and admission of routers.') ],
	[ 'ipv6', _('IPv6'), _('Per-agent IPv6 /128 addresses.') ],
	[ 'relay', _('Relay'), _('NAT relay.') ]
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
				validate.option(s, type, name);
			});
		});

		return m.render();
	}
});
