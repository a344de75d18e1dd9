#!/usr/bin/env bash
# Makes (once) the venv of the users' stack and points .venv at it: Python 3.11 with
# tools/requirements.txt, cached in ${OVF_CACHE:-/var/cache/ovf}/venv-<key>, where the key
# is a hash of the requirements and the base interpreter's version, so a changed
# requirement makes a new venv and an unchanged one is reused. A venv left half made
# (no .complete) is made again. Prints the venv's python.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${OVF_CACHE:-/var/cache/ovf}

# The machine's Python 3.11 (a pyenv shim is asked for its real interpreter).
base=${OVF_BASE_PYTHON:-}
if [ -z "$base" ]; then
  # pyenv's 3.11 first (this machine kind's Python, whose shim may not be on PATH), then
  # whatever python3.11 PATH has, then Debian's
  for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.11*/bin/python3.11 python3.11 \
                   /usr/bin/python3.11; do
    if real=$("$candidate" -c 'import sys; print(sys.executable)' 2>/dev/null); then
      base=$real
      break
    fi
  done
fi
if [ -z "$base" ]; then
  echo "ovf setup: no Python 3.11 here (torch's wheels on this disk are for 3.11): set OVF_BASE_PYTHON" >&2
  exit 1
fi
version=$("$base" -c 'import sys; print(sys.version.split()[0])')
key=$({ cat tools/requirements.txt; echo "$version"; } | sha256sum | cut -c1-12)
venv=$cache/venv-$key
if [ ! -f "$venv/.complete" ]; then
  echo "ovf setup: making $venv (Python $version, tools/requirements.txt)" >&2
  rm -rf "$venv"
  mkdir -p "$cache"
  "$base" -m venv "$venv"
  "$venv/bin/python" -m pip install -q -r tools/requirements.txt >&2
  touch "$venv/.complete"
fi
ln -sfn "$venv" .venv
# Its own path, not .venv's: builds from every checkout then name the same torch headers
# (the compiler cache hits across checkouts) and bake the same interpreter into hints.
echo "$venv/bin/python"
