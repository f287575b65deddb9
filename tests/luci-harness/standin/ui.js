'use strict';
'require baseclass';
'require dom';
'require uci';

/*
 * STAND-IN for luci-base's ui.js, for tests only: addNotification,
 * showModal / hideModal, createHandlerFn and changes.apply, with
 * upstream's documented signatures. Widgets are plain HTML controls.
 */

var modal = null;

var Changes = baseclass.extend({
	/* Commits the staged changes (upstream: uci apply with rollback, then
	 * confirm once the page can still reach the router). */
	apply: function(checked) {
		return uci.apply(10).then(function() {
			window.__luci.applied = (window.__luci.applied || 0) + 1;
			document.dispatchEvent(new CustomEvent('uci-applied'));
			L.require('ui').then(function(ui) {
				ui.addNotification(null, E('p', [ _('Configuration changes applied.') ]), 'info');
			});
		});
	}
});

return baseclass.extend({
	changes: new Changes(),

	addNotification: function(title, children, classes) {
		var mc = document.getElementById('maincontent');
		var msg = E('div', { 'class': 'alert-message fade-in ' + (classes || '') }, [
			title ? E('h4', [ title ]) : '',
			E('div', {}, []),
		]);
		dom.append(msg.lastChild, children);
		mc.insertBefore(msg, mc.firstChild);
		return msg;
	},

	showModal: function(title, children) {
		this.hideModal();
		modal = E('div', { 'id': 'modal_overlay', 'class': 'modal' }, [
			E('div', { 'class': 'modal-dialog' }, [ title ? E('h4', [ title ]) : '' ])
		]);
		dom.append(modal.firstChild, children);
		document.body.appendChild(modal);
		return modal.firstChild;
	},

	hideModal: function() {
		if (modal && modal.parentNode)
			modal.parentNode.removeChild(modal);
		modal = null;
	},

	/* A click handler calling ctx[fn] (or fn) with the bound arguments and
	 * the event; the control is disabled while a returned promise runs. */
	createHandlerFn: function(ctx, fn) {
		if (typeof(fn) == 'string')
			fn = ctx[fn];
		if (typeof(fn) != 'function')
			return null;
		var args = this.varargs(arguments, 2);
		return function(ev) {
			var t = ev.currentTarget, p = Promise.resolve(fn.apply(ctx, args.concat(ev)));
			if (t && t.classList) {
				t.classList.add('spinning');
				t.disabled = true;
			}
			return p.catch(L.error).finally(function() {
				if (t && t.classList) {
					t.classList.remove('spinning');
					t.disabled = false;
				}
			});
		};
	}
});
