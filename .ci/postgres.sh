#!/usr/bin/env bash
# Throwaway PostgreSQL cluster for the Postgres Y-store tests.
#
#   source .ci/postgres.sh          # start a cluster, export its DSN, stop it on shell exit
#   .ci/postgres.sh CMD [ARGS...]   # start a cluster, run CMD with the env set, stop it
#
# Exports:
#   JUPYTER_MCP_SIDECAR_TEST_PG_DSN     postgres://sidecar:<password>@127.0.0.1:<port>/sidecar_test
#   JUPYTER_MCP_SIDECAR_TEST_PG_CTL     wrapper: "$JUPYTER_MCP_SIDECAR_TEST_PG_CTL stop|start|restart
#                                       [pg_ctl args]" runs pg_ctl on this cluster as its owner
#   JUPYTER_MCP_SIDECAR_TEST_PGDATA     the cluster's data directory
# Functions (when sourced): pg_stop (stop and remove the cluster), pg_restart.
#
# initdb runs as the `postgres` user when invoked as root (PostgreSQL refuses to run as
# root), else as the invoking user. If no PostgreSQL server is installed, it installs the
# Debian `postgresql` package.

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

pg_start() {
	local bindir owner tmp port password
	if ! bindir=$(_pg_find_bindir); then
		echo "postgres.sh: no PostgreSQL server found; installing the postgresql package" >&2
		apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2 || return 1
		bindir=$(_pg_find_bindir) || { echo "postgres.sh: initdb not found after install" >&2; return 1; }
	fi
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
	rm -f "$tmp/pwfile"

	export JUPYTER_MCP_SIDECAR_TEST_PG_DSN="postgres://sidecar:$password@127.0.0.1:$port/sidecar_test?sslmode=disable"
	export JUPYTER_MCP_SIDECAR_TEST_PG_CTL="$tmp/pg_ctl.sh"
	export JUPYTER_MCP_SIDECAR_TEST_PGDATA="$tmp/data"
	_PG_TMP=$tmp
	echo "postgres.sh: PostgreSQL $("$bindir/postgres" -V | awk '{print $3}') on 127.0.0.1:$port, data $tmp/data" >&2
}

pg_restart() {
	"$JUPYTER_MCP_SIDECAR_TEST_PG_CTL" restart >/dev/null
}

pg_stop() {
	if [ -n "${_PG_TMP:-}" ] && [ -d "$_PG_TMP" ]; then
		"$_PG_TMP/pg_ctl.sh" stop -m fast >/dev/null 2>&1 || "$_PG_TMP/pg_ctl.sh" stop -m immediate >/dev/null 2>&1
		rm -rf "$_PG_TMP"
	fi
	unset _PG_TMP JUPYTER_MCP_SIDECAR_TEST_PG_DSN JUPYTER_MCP_SIDECAR_TEST_PG_CTL JUPYTER_MCP_SIDECAR_TEST_PGDATA
}

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
		echo "$JUPYTER_MCP_SIDECAR_TEST_PG_DSN"
	fi
fi
