#!/usr/bin/env bash
# Installs what ovf needs on Debian bookworm (as root, or through sudo) and
# builds it into build/. Safe to run again: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build git
  python3 python3-torch libtorch-dev python3-numpy   # Debian's torch 1.13 (CPU) and its C++ headers
  python3-torchvision                                  # real models (resnet18, vit) in tests and benchmarks
  pybind11-dev python3-pybind11                        # the runtime's Python module
  libopenblas0-pthread                                 # torch's matrix products: ~15x the reference BLAS
  libgtest-dev python3-pytest                          # C++ and Python tests
  gdb python3-dbg                                      # gdb front end; gdb's own py-bt / py-locals
  clang-format                                         # tools/lint.sh: the C++ style (.clang-format)
  lldb-19 python3-lldb-19                              # lldb front end (its Python works out of the box)
  python3-pyelftools                                   # reading core files and ELF symbols without a debugger
  python3-matplotlib                                   # ovf plot: the picture (Agg, never in the training process)
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

cmake -S . -B build -G Ninja -DPython_EXECUTABLE=/usr/bin/python3 >/dev/null
ninja -C build
