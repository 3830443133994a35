#!/usr/bin/env bash
# kdc.sh: a real Kerberos KDC (MIT krb5kdc) on loopback for the GSSAPI tests, with its own realm,
# database and configuration in one directory; nothing of the machine's Kerberos set-up is used
# or changed.
#
#   scripts/kdc.sh start DIR PORT [PRINCIPAL...]
#       make realm RUNNEL.TEST in DIR, serving on 127.0.0.1:PORT (UDP and TCP); each PRINCIPAL
#       gets a random key, written to DIR/<principal with / and @ as _>.keytab; print DIR/krb5.conf,
#       the client configuration (KRB5_CONFIG for MIT's tools, java.security.krb5.conf for Java).
#       The KDC's PID goes to DIR/krb5kdc.pid.
#   scripts/kdc.sh stop DIR
#
# Needs MIT Kerberos' KDC and admin tools (Debian: krb5-kdc krb5-admin-server krb5-user).
set -euo pipefail
REALM=RUNNEL.TEST

case "${1:-}" in
start)
	DIR=${2:?usage: kdc.sh start DIR PORT [PRINCIPAL...]}
	PORT=${3:?usage: kdc.sh start DIR PORT [PRINCIPAL...]}
	shift 3
	for tool in krb5kdc kdb5_util kadmin.local; do
		command -v "$tool" >/dev/null || PATH="$PATH:/usr/sbin"
		command -v "$tool" >/dev/null || {
			echo "kdc.sh: $tool missing (apt-get install krb5-kdc krb5-admin-server)" >&2
			exit 1
		}
	done
	mkdir -p "$DIR"
	DIR=$(cd "$DIR" && pwd)
	cat >"$DIR/krb5.conf" <<EOF
[libdefaults]
	default_realm = $REALM
	dns_lookup_realm = false
	dns_lookup_kdc = false
	dns_canonicalize_hostname = false
	rdns = false
	udp_preference_limit = 1
	default_ccache_name = FILE:$DIR/ccache
	ticket_lifetime = 1h
[realms]
	$REALM = {
		kdc = 127.0.0.1:$PORT
	}
[domain_realm]
	localhost = $REALM
EOF
	cat >"$DIR/kdc.conf" <<EOF
[kdcdefaults]
	kdc_listen = 127.0.0.1:$PORT
	kdc_tcp_listen = 127.0.0.1:$PORT
[realms]
	$REALM = {
		database_name = $DIR/principal
		key_stash_file = $DIR/stash
		acl_file = $DIR/kadm5.acl
		max_life = 1h
		supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
	}
[logging]
	kdc = FILE:$DIR/kdc.log
EOF
	: >"$DIR/kadm5.acl"
	export KRB5_CONFIG="$DIR/krb5.conf" KRB5_KDC_PROFILE="$DIR/kdc.conf"
	kdb5_util -r "$REALM" create -s -P "runnel-test-master" >"$DIR/setup.log" 2>&1
	for p in "$@"; do
		kt="$DIR/$(echo "$p" | tr '/@' '__').keytab"
		kadmin.local -r "$REALM" -q "addprinc -randkey $p" >>"$DIR/setup.log" 2>&1
		kadmin.local -r "$REALM" -q "ktadd -k $kt $p" >>"$DIR/setup.log" 2>&1
		[[ -s "$kt" ]] || {
			cat "$DIR/setup.log" >&2
			echo "kdc.sh: no keytab for $p" >&2
			exit 1
		}
	done
	krb5kdc -n -r "$REALM" >>"$DIR/kdc.log" 2>&1 &
	echo $! >"$DIR/krb5kdc.pid"
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
			echo "$DIR/krb5.conf"
			exit 0
		fi
		sleep 0.1
	done
	cat "$DIR/kdc.log" >&2
	echo "kdc.sh: the KDC did not listen on 127.0.0.1:$PORT" >&2
	exit 1
	;;
stop)
	DIR=${2:?usage: kdc.sh stop DIR}
	if [[ -f "$DIR/krb5kdc.pid" ]]; then
		kill "$(cat "$DIR/krb5kdc.pid")" 2>/dev/null || true
		rm -f "$DIR/krb5kdc.pid"
	fi
	;;
*)
	echo "usage: kdc.sh start DIR PORT [PRINCIPAL...] | stop DIR" >&2
	exit 2
	;;
esac
