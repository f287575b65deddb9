# shellcheck shell=sh
# STAND-IN for OpenWrt's /lib/functions.sh (package/base-files), for the
# feed's tests only: the user and group helpers a uci-defaults script
# uses, with upstream's documented behaviour on ${IPKG_INSTROOT}/etc/group
# and /etc/passwd (ids from 32768 up; the shadow entry and file locks of
# the real helpers are left out).

group_exists() {
	grep -qs "^${1}:" "${IPKG_INSTROOT}/etc/group"
}

group_add() {
	[ -f "${IPKG_INSTROOT}/etc/group" ] || return 1
	echo "${1}:x:${2}:" >>"${IPKG_INSTROOT}/etc/group"
}

group_add_next() {
	gid=$(grep -s "^${1}:" "${IPKG_INSTROOT}/etc/group" | cut -d: -f3)
	if [ -n "$gid" ]; then
		echo "$gid"
		return
	fi
	gids=$(cut -d: -f3 "${IPKG_INSTROOT}/etc/group")
	gid=32768
	while echo "$gids" | grep -q "^$gid$"; do
		gid=$((gid + 1))
	done
	group_add "$1" "$gid"
	echo "$gid"
}

user_exists() {
	grep -qs "^${1}:" "${IPKG_INSTROOT}/etc/passwd"
}

user_add() {
	name="$1"
	uid="$2"
	gid="$3"
	desc="${4:-$1}"
	home="${5:-/var/run/$1}"
	shell="${6:-/bin/false}"
	if [ -z "$uid" ]; then
		uids=$(cut -d: -f3 "${IPKG_INSTROOT}/etc/passwd")
		uid=32768
		while echo "$uids" | grep -q "^$uid$"; do
			uid=$((uid + 1))
		done
	fi
	[ -z "$gid" ] && gid=$uid
	[ -f "${IPKG_INSTROOT}/etc/passwd" ] || return 1
	echo "${name}:x:${uid}:${gid}:${desc}:${home}:${shell}" >>"${IPKG_INSTROOT}/etc/passwd"
}
