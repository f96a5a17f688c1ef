#!/usr/bin/env bash
# Builds a release of the committed tree (HEAD, never the working copy's changes) into
# dist/<version>/, checks it, and stops before publishing, printing the commands that
# would publish it:
#   scripts/release.sh [VERSION]     (default: git describe --tags --always)
#
#   jupyter-mcp-sidecar-<v>-linux-{amd64,arm64}.tar.gz
#       the static binary (CGO_ENABLED=0, -trimpath, version and commit by -ldflags,
#       scripts/build.sh), LICENSE, README.md, CHANGELOG.md, configs/sidecar.yaml
#   jupyter_mcp_sidecar_feed-<pv>-py3-none-any.whl, jupyter_mcp_sidecar_feed-<pv>.tar.gz
#       the feed package (python -m build, then twine check --strict)
#   jupyter-mcp-sidecar-<v>-linux-{amd64,arm64}.oci.tar
#       the image, with buildah when it is installed (else skipped, saying so): the
#       binary above on an empty base with the CA certificates, numeric user
#       65532:65532, port 4040, entrypoint "jupyter-mcp-sidecar serve" (the Dockerfile's
#       final stage, built from the released binary instead of a second compile)
#   SHA256SUMS of all of them, verified.
#
# Knobs: PYTHON (default python3; a throwaway environment gets build and twine when it
# lacks them), BUILDAH (default buildah; "" to skip the image).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

commit=$(git rev-parse HEAD)
version=${1:-$(git describe --tags --always HEAD)}
if ! git diff --quiet HEAD 2>/dev/null; then
	echo "note: the working copy has uncommitted changes; the release is built from HEAD ($commit) without them" >&2
fi
out=$repo/dist/$version
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$out"
mkdir -p "$out"
step() { printf '\n== %s\n' "$*" >&2; }

step "source: $commit as $version"
git archive --format=tar HEAD | tar -x -C "$work" --one-top-level=src
src=$work/src
cmp -s "$src/LICENSE" "$src/jupyter_mcp_sidecar_feed/LICENSE" ||
	{ echo "jupyter_mcp_sidecar_feed/LICENSE differs from LICENSE" >&2; exit 1; }

for arch in amd64 arm64; do
	step "binary linux/$arch"
	name=jupyter-mcp-sidecar-$version-linux-$arch
	mkdir -p "$work/$name"
	(cd "$src" && GOOS=linux GOARCH=$arch VERSION=$version COMMIT=$commit scripts/build.sh "$work/$name/jupyter-mcp-sidecar")
	info=$(go version -m "$work/$name/jupyter-mcp-sidecar")
	for want in "CGO_ENABLED=0" "-trimpath=true" "GOARCH=$arch" "GOOS=linux"; do
		grep -qF -- "$want" <<<"$info" || { echo "$name: the build info lacks $want" >&2; exit 1; }
	done
	# -trimpath keeps -ldflags out of the build info: the stamp is looked for in the binary.
	grep -qaF -- "$version" "$work/$name/jupyter-mcp-sidecar" || { echo "$name: $version not stamped" >&2; exit 1; }
	if [ "$arch" = "$(go env GOHOSTARCH)" ]; then
		got=$("$work/$name/jupyter-mcp-sidecar" version)
		grep -qF "$version" <<<"$got" || { echo "$name version says: $got" >&2; exit 1; }
	fi
	cp "$src/LICENSE" "$src/README.md" "$src/CHANGELOG.md" "$src/configs/sidecar.yaml" "$work/$name/"
	tar -C "$work" --owner=0 --group=0 --numeric-owner -czf "$out/$name.tar.gz" "$name"
done

step "the feed package: wheel and sdist"
python=${PYTHON:-python3}
if ! "$python" -c 'import build, twine' 2>/dev/null; then
	"$python" -m venv "$work/py"
	"$work/py/bin/pip" install --quiet --disable-pip-version-check --no-input build twine >&2
	python=$work/py/bin/python
fi
"$python" -m build --outdir "$out" "$src/jupyter_mcp_sidecar_feed" >&2
"$python" -m twine check --strict "$out"/jupyter_mcp_sidecar_feed-*

buildah=${BUILDAH-buildah}
if [ -z "$buildah" ] || ! command -v "$buildah" >/dev/null; then
	step "image: skipped (no buildah; install it, or set BUILDAH)"
else
	# Storage of its own: nothing is left in the machine's container storage.
	b=("$buildah" --root "$work/containers" --runroot "$work/containers-run" --storage-driver vfs)
	for arch in amd64 arm64; do
		step "image linux/$arch"
		name=jupyter-mcp-sidecar-$version-linux-$arch
		ctr=$("${b[@]}" from --arch "$arch" --os linux scratch)
		"${b[@]}" copy --chmod 0755 "$ctr" "$work/$name/jupyter-mcp-sidecar" /jupyter-mcp-sidecar >/dev/null
		"${b[@]}" copy --chmod 0644 "$ctr" /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt >/dev/null
		"${b[@]}" config --arch "$arch" --os linux --user 65532:65532 --port 4040/tcp \
			--entrypoint '["/jupyter-mcp-sidecar", "serve"]' --cmd '' \
			--label org.opencontainers.image.title=jupyter-mcp-sidecar \
			--label org.opencontainers.image.version="$version" \
			--label org.opencontainers.image.revision="$commit" \
			--label org.opencontainers.image.licenses=BSD-3-Clause "$ctr"
		"${b[@]}" commit --quiet "$ctr" "localhost/jupyter-mcp-sidecar:$version-$arch" >/dev/null
		"${b[@]}" push --quiet "localhost/jupyter-mcp-sidecar:$version-$arch" \
			"oci-archive:$out/$name.oci.tar:jupyter-mcp-sidecar:$version"
		"${b[@]}" rm "$ctr" >/dev/null
	done
	"${b[@]}" rmi --all --force >/dev/null 2>&1 || true # vfs layers are owned by root: removed here, not by rm -rf
fi

step "SHA256SUMS"
(cd "$out" && rm -f SHA256SUMS && sha256sum -- * >"$work/SHA256SUMS" && mv "$work/SHA256SUMS" SHA256SUMS && sha256sum --quiet -c SHA256SUMS)
cat "$out/SHA256SUMS"

step "built $out; not published. To publish:"
cat <<EOF
  git tag -s $version $commit && git push origin $version
  gh release create $version --notes-file <(awk '/^## /{n++} n==1' CHANGELOG.md) dist/$version/*
  python -m twine upload dist/$version/jupyter_mcp_sidecar_feed-*   # the feed package
  for a in amd64 arm64; do skopeo copy oci-archive:dist/$version/jupyter-mcp-sidecar-$version-linux-\$a.oci.tar docker://REGISTRY/jupyter-mcp-sidecar:$version-\$a; done
  buildah manifest create jupyter-mcp-sidecar:$version REGISTRY/jupyter-mcp-sidecar:$version-amd64 REGISTRY/jupyter-mcp-sidecar:$version-arm64
  buildah manifest push --all jupyter-mcp-sidecar:$version docker://REGISTRY/jupyter-mcp-sidecar:$version
EOF
