#!/usr/bin/env bash
# The flagship demo: an unmodified training script goes non-finite and ovf
# names the first module, batch and tensor, with the frames that led there.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/build/python" OPENBLAS_NUM_THREADS=1
echo '$ python3 -m ovf examples/diverge_lr.py'
/usr/bin/python3 -m ovf examples/diverge_lr.py
status=$?
# The script is expected to stop with ovf's NonFiniteError (exit status 1).
[ "$status" = 1 ] && exit 0 || exit "$status"
