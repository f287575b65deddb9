'use strict';
'require view';
'require form';
'require uci';
'require agentd.validate as validate';

/*
 * Policy rules: `config rule '<id>'` sections of /etc/config/agentd
 * (the section name is the rule id). The columns are the match and
 * verdict; constraints and score weights are in each rule's dialog.
 * Every option is validated by the schema table (agentd/validate.js).
 */

var COLUMNS = [ 'enabled', 'priority', 'action', 'tenant', 'source', 'capability' ];

return view.extend({
	load: function() {
		return uci.load('agentd');
	},

	render: function() {
		var m, s, o;

		m = new form.Map('agentd', _('Agent routing: policy'),
			_('Rules decide which routes a call may use. The matching rule with the highest priority wins (ties: the smaller id); a selected deny is final. Without a match the default action applies.'));

		s = m.section(form.NamedSection, 'main', 'agentd', _('Default'));
		s.addremove = false;
		validate.option(s, 'agentd', 'default_action', _('Default action'));

		s = m.section(form.GridSection, 'rule', _('Rules'));
		s.addremove = true;
		s.anonymous = false;
		s.sortable = false;
		s.nodescriptions = true;
		s.modaltitle = function(section_id) { return _('Rule %s').format(section_id); };
		/* A new rule's id: the schema's route-id alphabet, not yet used. */
		s.handleAdd = validate.addNamed('rule');

		validate.order('rule').forEach(function(name) {
			o = validate.option(s, 'rule', name);
			if (COLUMNS.indexOf(name) < 0)
				o.modalonly = true;
			else
				o.editable = (name == 'enabled');
		});

		return m.render();
	}
});
