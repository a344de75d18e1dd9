#!/usr/bin/env bash
# The flagship demo: an unmodified training script (examples/diverge_lr.py, a
# T5-style model whose learning rate is too high) runs under gdb with
# `ovf break-on-nan`; gdb stops at the first non-finite forward, shows the
# report, the Python stack and the frames that led there.
set -euo pipefail
cd "$(dirname "$0")/.."
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
commands=(-ex 'ovf break-on-nan' -ex run -ex 'ovf py-bt' -ex 'ovf frames 6' -ex 'ovf status' -ex kill)
printf '$ gdb/ovf-gdb -batch'; printf " %q" "${commands[@]}"; echo ' --args .venv/bin/python examples/diverge_lr.py'
timeout 300 gdb/ovf-gdb -batch "${commands[@]}" --args .venv/bin/python examples/diverge_lr.py
