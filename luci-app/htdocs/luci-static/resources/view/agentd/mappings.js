'use strict';
'require view';
'require form';
'require uci';
'require agentd.validate as validate';

/*
 * MCP tools and A2A skills: `config mapping '<name>'` sections, each
 * backed by a capability. The options are the schema table's for
 * `mapping` (title, input schema and the rest as uci-schema defines them).
 */

var COLUMNS = [ 'enabled', 'protocol', 'title', 'capability', 'version' ];

return view.extend({
	load: function() {
		return uci.load('agentd');
	},

	render: function() {
		var m, s, o;

		m = new form.Map('agentd', _('Agent routing: MCP and A2A mappings'),
			_('Each mapping publishes one capability as an MCP tool (at /mcp) or an A2A skill (at /a2a); a call is an ordinary invocation with policy, selection and forwarding.'));

		s = m.section(form.GridSection, 'mapping', _('Mappings'));
		s.addremove = true;
		s.anonymous = false;
		s.nodescriptions = true;
		s.modaltitle = function(section_id) { return _('Mapping %s').format(section_id); };
		/* A new mapping's name: the schema's name alphabet, not yet used. */
		s.handleAdd = validate.addNamed('mapping');

		validate.order('mapping').forEach(function(name) {
			var widget = (name == 'description') ? form.TextValue : null;
			o = validate.option(s, 'mapping', name, null, widget);
			if (COLUMNS.indexOf(name) < 0)
				o.modalonly = true;
			if (name == 'input_schema') {
				o.rows = 8;
				o.monospace = true;
			}
		});

		return m.render();
	}
});
