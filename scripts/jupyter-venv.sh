#!/usr/bin/env bash
# Prints the path of a Python virtual environment holding the real Jupyter stack of
# testdata/jupyter/requirements.txt (or of the pinned requirements file given as the first
# argument, e.g. testdata/jupyter-mcp-server/requirements.txt), creating it first if needed.
#
# The environment lives in a cache directory keyed by the requirements' SHA-256, so a
# second run (or a second CI run on a machine that keeps its cache) reuses it, a changed
# pin builds a new one, and a fresh machine builds it from PyPI (about 3 minutes). It is
# built in a temporary directory next to its final place and renamed into place only once
# complete, so an interrupted build leaves nothing that a later run would trust.
#
# Knobs: JUPYTER_VENV_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/jupyter-mcp-sidecar),
#        PYTHON (default python3).
# Everything but the path goes to stderr. Use it as "$venv/bin/python -m jupyter ...".
set -euo pipefail
cd "$(dirname "$0")/.."

req=${1:-testdata/jupyter/requirements.txt}
python=${PYTHON:-python3}
cache=${JUPYTER_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jupyter-mcp-sidecar}
hash=$(sha256sum "$req" | cut -c1-16)
venv=$cache/venv-$hash

# A complete environment has its marker, written last.
if [ -f "$venv/.complete" ]; then
	echo "$venv"
	exit 0
fi

mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.venv-$hash.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "building $venv from $req" >&2
# Built beside its final place (same file system) and renamed. The scripts in bin/ keep
# the temporary path in their #! line, so use the environment only as
# "$venv/bin/python -m ..." (python finds its pyvenv.cfg next to itself, wherever it is).
"$python" -m venv "$tmp/venv" >&2
"$tmp/venv/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$req" >&2
touch "$tmp/venv/.complete"
if ! mv -T "$tmp/venv" "$venv" 2>/dev/null; then
	# Another run finished first: use its environment.
	[ -f "$venv/.complete" ] || { echo "cannot move the environment to $venv" >&2; exit 1; }
fi
echo "$venv"
