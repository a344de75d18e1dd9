#!/usr/bin/env bash
# Regenerates docs/walkthrough-plot.png, the picture docs/walkthrough.md shows: the demo run
# (examples/diverge_lr.py, unmodified) under gdb, stopped by `ovf break-on-nan` at its first
# non-finite value and drawn there by `ovf plot --batches`. Needs the build (ninja -C build)
# and python3-matplotlib; prints the session's commands and what `ovf plot` said.
set -euo pipefail
cd "$(dirname "$0")/.."
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
out=docs/walkthrough-plot.png
commands=(-ex 'ovf break-on-nan' -ex run -ex "ovf plot $out --batches" -ex kill)
printf '$ gdb/ovf-gdb -batch'; printf " %q" "${commands[@]}"; echo ' --args .venv/bin/python examples/diverge_lr.py'
log=$(timeout 300 gdb/ovf-gdb -batch "${commands[@]}" --args .venv/bin/python examples/diverge_lr.py 2>&1)
grep -A1 '^ovf: wrote ' <<<"$log" || { echo "$log" >&2; echo "walkthrough-plot.sh: no picture was drawn" >&2; exit 1; }
