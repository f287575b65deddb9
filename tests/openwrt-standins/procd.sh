# shellcheck shell=sh
# STAND-IN for OpenWrt's /lib/functions/procd.sh (package/system/procd),
# for the feed's tests only. Each documented procd_* function an init
# script may call appends one line to $PROCD_LOG: the function name and
# its arguments, tab-separated (procd's own version builds a JSON message
# for `ubus call service set|signal|delete` instead).
#
# procd_close_service runs the script's service_triggers first, as the
# real one does. procd_send_signal does what procd does on `ubus call
# service signal`: it signals the instance's process — here the PID the
# test wrote to $PROCD_STATE/<service>.<instance>.pid for a process it
# started itself.

: "${PROCD_LOG:?PROCD_LOG must name the call log}"

_procd_record() {
	_line="$1"
	shift
	for _arg in "$@"; do
		_line="$(printf '%s\t%s' "$_line" "$_arg")"
	done
	printf '%s\n' "$_line" >>"$PROCD_LOG"
}

procd_open_service() { _procd_record procd_open_service "$@"; }
procd_close_service() {
	service_triggers
	_procd_record procd_close_service "$@"
}
procd_open_instance() { _procd_record procd_open_instance "$@"; }
procd_set_param() { _procd_record procd_set_param "$@"; }
procd_append_param() { _procd_record procd_append_param "$@"; }
procd_close_instance() { _procd_record procd_close_instance "$@"; }
procd_add_reload_trigger() { _procd_record procd_add_reload_trigger "$@"; }
procd_add_jail() { _procd_record procd_add_jail "$@"; }
procd_add_jail_mount() { _procd_record procd_add_jail_mount "$@"; }
procd_add_jail_mount_rw() { _procd_record procd_add_jail_mount_rw "$@"; }
procd_kill() { _procd_record procd_kill "$@"; }

procd_send_signal() {
	_procd_record procd_send_signal "$@"
	_pidfile="${PROCD_STATE:?}/$1.${2:-*}.pid"
	[ -r "$_pidfile" ] || return 0
	kill -s "${3:-HUP}" "$(cat "$_pidfile")"
}
