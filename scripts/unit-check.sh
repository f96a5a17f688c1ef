#!/usr/bin/env bash
# Checks the systemd units an operator installs (configs/*.service, configs/systemd/):
#   - systemd-analyze verify, in a root directory holding the system's units, the unit and
#     the built binary at its ExecStart path (no running systemd needed): any line it
#     prints (an unknown key, a bad value, a missing command) is a failure;
#   - systemd-analyze security --offline=true: the exposure level at most 2.0;
#   - what verify cannot see: every path of ReadOnlyPaths=/ReadWritePaths=/
#     InaccessiblePaths= carries "-" (a path missing at start fails the unit with
#     226/NAMESPACE), and every group named in Group=/SupplementaryGroups= is created by
#     the unit's install steps (groupadd; else the start fails with 216/GROUP).
# Needs systemd-analyze (Debian's systemd package) and Go; a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v systemd-analyze >/dev/null || { echo "unit-check: systemd-analyze not found (apt-get install systemd)" >&2; exit 1; }
units=$(ls configs/*.service configs/systemd/*.service)
root=$(mktemp -d /tmp/unit-check.XXXXXX)
trap 'rm -rf "$root"' EXIT
sysunits=$(systemd-analyze --system unit-paths | grep -m1 -E '^/(usr/)?lib/systemd/system$')
mkdir -p "$root/usr/lib/systemd" "$root/etc/systemd/system" "$root/usr/local/bin"
cp -r "$sysunits" "$root/usr/lib/systemd/system"
VERSION=unit-check scripts/build.sh "$root/usr/local/bin/jupyter-mcp-sidecar"
failed=0
bad() { echo "unit-check: $*" >&2; failed=1; }
for unit in $units; do
	name=$(basename "$unit")
	cp "$unit" "$root/etc/systemd/system/$name"
	if ! grep -q '^ExecStart=/usr/local/bin/jupyter-mcp-sidecar ' "$unit"; then
		bad "$unit: ExecStart is not /usr/local/bin/jupyter-mcp-sidecar, which this check installs"
	fi
	out=$(systemd-analyze verify --root="$root" "$name" 2>&1) || bad "$unit: systemd-analyze verify failed"
	[ -z "$out" ] || bad "$unit: systemd-analyze verify says: $out"
	exposure=$(systemd-analyze security --offline=true "$root/etc/systemd/system/$name" 2>&1 |
		sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
	if [ -z "$exposure" ] || ! awk -v e="$exposure" 'BEGIN { exit !(e <= 2.0) }'; then
		bad "$unit: exposure level ${exposure:-unknown}, want at most 2.0 (systemd-analyze security --offline=true)"
	fi
	while read -r path; do
		case $path in -*) ;; *) bad "$unit: $path without \"-\": a path missing at start fails the unit (226/NAMESPACE)" ;; esac
	done < <(sed -n -E 's/^(ReadOnlyPaths|ReadWritePaths|InaccessiblePaths)=//p' "$unit" | tr ' ' '\n' | grep -v '^$' || true)
	while read -r group; do
		grep -Eq "^#.*groupadd .*\\b$group\\b" "$unit" ||
			bad "$unit: group $group is created by no install step (groupadd): the start fails with 216/GROUP"
	done < <(sed -n -E 's/^(Group|SupplementaryGroups)=//p' "$unit" | tr ' ' '\n' | grep -v '^$' || true)
	echo "$unit: verified, exposure $exposure"
done
[ "$failed" = 0 ] || exit 1
echo "unit-check: OK"
