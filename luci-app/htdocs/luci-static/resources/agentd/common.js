'use strict';
'require baseclass';
'require dom';

/*
 * Text from the daemon is always passed to E()/dom.content inside an
 * array: LuCI's dom.append() turns a bare string into innerHTML, an array
 * item into a text node.
 *
 * Small helpers shared by the agentd views: reading the rpcd plugin's
 * answers (one JSON object per call; `{"error": {...}}` when agentd is
 * down or a method is refused) and tables that are updated in place.
 */

return baseclass.extend({
	/* The error text of a plugin answer, or null when it is data. The
	 * plugin answers {"error":{"code","message"}}; older builds answered
	 * {"error":"code","message":"..."}; a bare ubus status is a number. */
	errorOf: function(reply) {
		if (typeof(reply) == 'number')
			return _('ubus error %d').format(reply);
		if (reply == null || typeof(reply) != 'object')
			return _('no answer');
		var e = reply.error;
		if (e == null)
			return null;
		if (typeof(e) == 'object')
			return '%s: %s'.format(e.code || 'error', e.message || '');
		return '%s: %s'.format(e, reply.message || '');
	},

	/* `1h02m`, `3m07s`, `12s` (agentctl's way of writing durations). */
	duration: function(s) {
		if (s == null || isNaN(s))
			return '-';
		s = Math.max(0, Math.floor(s));
		if (s < 60)
			return '%ds'.format(s);
		if (s < 3600)
			return '%dm%02ds'.format(Math.floor(s / 60), s % 60);
		return '%dh%02dm'.format(Math.floor(s / 3600), Math.floor((s % 3600) / 60));
	},

	dash: function(v) {
		return (v == null || v === '') ? '-' : String(v);
	},

	/* An empty table with a header row; fill() puts rows into it. */
	table: function(id, headers) {
		return E('table', { 'class': 'table', 'id': id }, [
			E('tr', { 'class': 'tr table-titles' }, headers.map(function(h) {
				return E('th', { 'class': 'th' }, h);
			}))
		]);
	},

	/* Replaces the table's data rows (the header row stays) with `rows`
	 * (arrays of cells: text or nodes), or one row saying `empty`. */
	fill: function(table, rows, empty) {
		while (table.rows.length > 1)
			table.deleteRow(1);
		if (!rows.length) {
			table.appendChild(E('tr', { 'class': 'tr placeholder' }, [
				E('td', { 'class': 'td', 'colspan': table.rows[0].cells.length }, E('em', [ empty ]))
			]));
			return;
		}
		rows.forEach(function(cells) {
			table.appendChild(E('tr', { 'class': 'tr' }, cells.map(function(c, i) {
				return E('td', { 'class': 'td', 'data-title': table.rows[0].cells[i].textContent }, [ c ]);
			})));
		});
	},

	/* A line of text whose content is replaced in place. */
	setText: function(node, text) {
		if (node)
			dom.content(node, [ text ]);
	},

	notice: function(text) {
		return E('div', { 'class': 'alert-message warning' }, [ text ]);
	}
});
