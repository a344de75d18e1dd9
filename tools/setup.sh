#!/usr/bin/env bash
# Installs what ovf needs (as root, or through sudo) and builds it into build/. Safe to
# run again: installs only what is missing, and the build is incremental.
#   Debian's packages: the debuggers (gdb, lldb-19 with its Python), the compilers,
#     CMake, ninja, GoogleTest, clang-format, and the Python packages the debuggers'
#     own interpreters import (pyelftools, matplotlib);
#   the users' stack: a venv of the machine's Python 3.11 with pip's torch 2.14.1,
#     torchvision, transformers, ... (tools/venv.sh: cached outside the checkout, .venv
#     points at it). Everything that imports torch runs with .venv/bin/python.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build git ccache       # ccache: the test build and the wheel share objects
  python3-venv                                       # a venv where the base Python is Debian's
  libgtest-dev                                       # C++ tests
  gdb python3-dbg                                    # gdb front end; gdb's own py-bt for Debian's python3
  clang-format                                       # tools/lint.sh: the C++ style (.clang-format)
  lldb-19 python3-lldb-19                            # LLDB front end (its Python works out of the box)
  python3-pyelftools                                 # core files and ELF symbols, inside the debuggers
  python3-matplotlib                                 # ovf plot inside the debuggers (Agg)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "ovf setup: installing ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

python=$(bash tools/venv.sh)
source tools/ccache-env.sh
cmake -S . -B build -G Ninja -DPython_EXECUTABLE="$python" >/dev/null
ninja -C build
