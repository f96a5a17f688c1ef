#!/usr/bin/env bash
# Throwaway PostgreSQL clusters for the tests that need a real server.
#
#   source .ci/postgres.sh          # start the clusters, export their env, stop them on shell exit
#   .ci/postgres.sh CMD [ARGS...]   # start the clusters, run CMD with the env set, stop them
#
# Two clusters start, so that tests that crash a server do not break the tests of other
# packages that `go test ./...` runs at the same time:
#   SIDECAR_TEST_PG_DSN        the shared cluster: never stop it
#                                          (postgres://sidecar:<password>@127.0.0.1:<port>/sidecar_test)
#   SIDECAR_TEST_PG_CRASH_DSN  a second cluster that tests may stop and restart,
#   SIDECAR_TEST_PG_CRASH_CTL  with "$SIDECAR_TEST_PG_CRASH_CTL stop|start|restart
#                                          [pg_ctl args]" (pg_ctl on it as its owner); one package
#                                          uses it at a time (ystore/postgres)
# Functions (when sourced): pg_stop (stop and remove both clusters).
#
# initdb runs as the `postgres` user when invoked as root (PostgreSQL refuses to run as
# root), else as the invoking user. If no PostgreSQL server is installed, the Debian
# `postgresql` package is installed.

_pg_find_bindir() {
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
			echo "$d"
			return 0
		fi
	done
	return 1
}

_pg_free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# _pg_cluster BINDIR: starts one cluster in a new temp dir and prints "DIR DSN".
_pg_cluster() {
	local bindir=$1 owner tmp port password
	owner=$(id -un)
	if [ "$(id -u)" = 0 ]; then
		owner=postgres
	fi
	tmp=$(mktemp -d /tmp/sidecar-pg.XXXXXX) || return 1
	chmod 0755 "$tmp"
	chown "$owner" "$tmp"
	port=$(_pg_free_port) || return 1
	password=$(python3 -c 'import secrets; print(secrets.token_hex(12))')

	cat >"$tmp/pg_ctl.sh" <<EOF
#!/usr/bin/env bash
# pg_ctl on the throwaway cluster in $tmp, as its owner.
action=\$1
shift
cmd=("$bindir/pg_ctl" -D "$tmp/data" -l "$tmp/server.log" -w -t 30 "\$action" "\$@")
if [ "\$(id -u)" = 0 ] && [ "$owner" != root ]; then
	exec runuser -u "$owner" -- "\${cmd[@]}"
fi
exec "\${cmd[@]}"
EOF
	chmod 0755 "$tmp/pg_ctl.sh"

	printf '%s\n' "$password" >"$tmp/pwfile"
	chown "$owner" "$tmp/pwfile"
	chmod 0600 "$tmp/pwfile"
	local initdb=("$bindir/initdb" -D "$tmp/data" -U postgres --auth-local=trust --auth-host=scram-sha-256
		--pwfile="$tmp/pwfile" -E UTF8 --locale=C.UTF-8 --no-sync)
	if [ "$owner" != "$(id -un)" ]; then
		runuser -u "$owner" -- "${initdb[@]}" >"$tmp/initdb.log" 2>&1
	else
		"${initdb[@]}" >"$tmp/initdb.log" 2>&1
	fi || { cat "$tmp/initdb.log" >&2; return 1; }
	rm -f "$tmp/pwfile"
	cat >>"$tmp/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$tmp'
fsync = off
# synchronous_commit stays on: tests crash the server (pg_ctl stop -m immediate) and
# expect every acknowledged commit to survive.
full_page_writes = off
max_connections = 100
EOF
	"$tmp/pg_ctl.sh" start >/dev/null || { cat "$tmp/server.log" >&2; return 1; }
	"$bindir/psql" -h "$tmp" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -q >/dev/null <<EOF || return 1
CREATE ROLE sidecar LOGIN PASSWORD '$password';
CREATE DATABASE sidecar_test OWNER sidecar;
EOF
	echo "postgres.sh: PostgreSQL $("$bindir/postgres" -V | awk '{print $3}') on 127.0.0.1:$port, data $tmp/data" >&2
	echo "$tmp postgres://sidecar:$password@127.0.0.1:$port/sidecar_test?sslmode=disable"
}

pg_start() {
	local bindir out
	if ! bindir=$(_pg_find_bindir); then
		echo "postgres.sh: no PostgreSQL server found; installing the postgresql package" >&2
		apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2 || return 1
		bindir=$(_pg_find_bindir) || { echo "postgres.sh: initdb not found after install" >&2; return 1; }
	fi
	out=$(_pg_cluster "$bindir") || return 1
	_PG_TMPS=("${out%% *}")
	export SIDECAR_TEST_PG_DSN="${out#* }"
	out=$(_pg_cluster "$bindir") || { pg_stop; return 1; }
	_PG_TMPS+=("${out%% *}")
	export SIDECAR_TEST_PG_CRASH_DSN="${out#* }"
	export SIDECAR_TEST_PG_CRASH_CTL="${out%% *}/pg_ctl.sh"
}

pg_stop() {
	local tmp
	for tmp in "${_PG_TMPS[@]}"; do
		if [ -d "$tmp" ]; then
			"$tmp/pg_ctl.sh" stop -m fast >/dev/null 2>&1 || "$tmp/pg_ctl.sh" stop -m immediate >/dev/null 2>&1
			rm -rf "$tmp"
		fi
	done
	_PG_TMPS=()
	unset SIDECAR_TEST_PG_DSN SIDECAR_TEST_PG_CRASH_DSN SIDECAR_TEST_PG_CRASH_CTL
}

_PG_TMPS=()
if [ "${BASH_SOURCE[0]}" != "$0" ]; then
	pg_start || return 1
	_pg_prev_trap=$(trap -p EXIT | sed -e "s/^trap -- '//" -e "s/' EXIT\$//")
	# shellcheck disable=SC2064
	trap "pg_stop; ${_pg_prev_trap}" EXIT
	unset _pg_prev_trap
else
	set -euo pipefail
	pg_start
	trap pg_stop EXIT
	if [ $# -gt 0 ]; then
		"$@"
	else
		echo "$SIDECAR_TEST_PG_DSN"
	fi
fi
