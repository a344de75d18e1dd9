#!/usr/bin/env bash
# wheel-venv.sh PYTHON DIR: a fresh venv DIR on PYTHON's base interpreter that sees
# PYTHON's site-packages (torch and the rest of the stack, through a .pth file: no second
# 5 GB copy) and has this checkout installed as users install it:
# `pip install --no-build-isolation .` (pyproject.toml: scikit-build-core drives CMake,
# incremental in build/wheel). Prints DIR's python.
set -euo pipefail
cd "$(dirname "$0")/.."
python=$1 venv=$2
base=$("$python" -c 'import sys; print(sys._base_executable)')
rm -rf "$venv"
"$base" -m venv "$venv"
stack=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$stack" > "$site/ovf-test-stack.pth"
source tools/ccache-env.sh
log=$venv.pip.log
# The compilers the test build uses (CMake's defaults; the build backend would take the
# interpreter's own, g++ for c++): the compiler cache tells them apart by name.
compilers=(-Ccmake.define.CMAKE_CXX_COMPILER=/usr/bin/c++ -Ccmake.define.CMAKE_C_COMPILER=/usr/bin/cc)
if ! "$venv/bin/python" -m pip install --no-build-isolation "${compilers[@]}" . > "$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "ovf test: pip install . into $venv failed (whole log: $log)" >&2
  exit 1
fi
echo "$venv/bin/python"
