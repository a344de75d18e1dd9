#!/usr/bin/env bash
# The whole test suite: style checks, C++ unit tests (CTest), Python and
# end-to-end tests (pytest), then every benchmark in its --quick form (a smoke
# test: a benchmark that no longer runs fails here; timings are judged on full
# runs, see bench/README.md). Tests that need a GPU skip without one and say so.
set -euo pipefail
cd "$(dirname "$0")/.."
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
build=${OVF_BUILD_DIR:-build}
bash tools/lint.sh
ctest --test-dir "$build" --output-on-failure --timeout 300
suites=(tests/python)
[ -d tests/e2e ] && suites+=(tests/e2e)
# Every test that starts a process bounds it with its own timeout.
/usr/bin/python3 -m pytest -q -rs -p no:cacheprovider "${suites[@]}"
echo "== benchmarks, --quick"
for bench in bench/*.py; do
  case "$bench" in bench/_*) continue ;; esac
  echo "-- $bench --quick"
  PYTHONPATH="$build/python" timeout 900 /usr/bin/python3 "$bench" --quick > "$build/$(basename "$bench" .py).quick.txt" 2>&1 ||
    { cat "$build/$(basename "$bench" .py).quick.txt"; echo "ovf test: $bench --quick failed"; exit 1; }
  tail -n 3 "$build/$(basename "$bench" .py).quick.txt"
done
