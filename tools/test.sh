#!/usr/bin/env bash
# The whole test suite: style checks, C++ unit tests (CTest), the Python tests against
# the build tree, the end-to-end tests (real gdb and LLDB) against ovf as pip installs it
# (the wheel of this checkout, `pip install --no-build-isolation .` into a fresh venv that
# sees the stack venv's torch), then every benchmark in its --quick form (a smoke test:
# a benchmark that no longer runs fails here; timings are judged on full runs, see
# bench/README.md). Tests that need a GPU skip without one and say so.
#   OVF_PYTHON      the interpreter with torch (default .venv/bin/python, tools/setup.sh's)
#   OVF_TEST_WHEEL  0: the end-to-end tests run against the build tree too (the trixie
#                   leg, whose Debian torch has no pip to build a wheel with)
#   OVF_TEST_BENCH  0: no benchmark smoke run (the trixie leg: the main leg's, on the
#                   users' stack, finds a benchmark that no longer runs)
#   OVF_TEST_JOBS   pytest processes per suite, taking its tests from one queue (default:
#                   the machine's cores, at most 4; tests/python/sharding.py)
set -euo pipefail
cd "$(dirname "$0")/.."
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
started=$(date +%s)
phase() { echo "== $1 ($(( $(date +%s) - started )) s into tools/test.sh)"; }
build=${OVF_BUILD_DIR:-build}
python=${OVF_PYTHON:-$(readlink -f .venv)/bin/python}  # the interpreter the build was made for
source tools/ccache-env.sh
phase "style checks"
PATH="$(dirname "$python"):$PATH" bash tools/lint.sh  # the venv's ruff, where it has one
phase "C++ tests"
ctest --test-dir "$build" --output-on-failure --timeout 300
# Every test that starts a process bounds it with its own timeout. Each suite's temporary
# files (core files: several GB an e2e run) go to a directory of the build that pytest
# empties when it starts, not to /tmp/pytest-of-*, which keeps three runs' worth and
# filled the disk (the trixie root's /tmp lives on between runs).
# A passed test's temporary directory (its core files) goes when it ends: one e2e run left
# about 40 GB of them, more than a CI machine's free disk with both legs' runs.
pytest_args=(-q -rs -p no:cacheprovider -o tmp_path_retention_policy=failed --durations=15 --durations-min=20)
mkdir -p "$build/pytest-tmp"  # pytest makes the --basetemp directory, not its parents
# (GNU nproc answers OMP_NUM_THREADS, which is 1 here)
jobs=${OVF_TEST_JOBS:-$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)}
[ "$jobs" -le 4 ] || jobs=4
shards=()
trap '[ ${#shards[@]} = 0 ] || kill "${shards[@]}" 2>/dev/null || true' EXIT
# suite NAME PYTHON-AND-ARGS...: the suite's $jobs shards at once, each into its own log and
# temporary directory; the logs are printed when all have ended; fails if one failed.
suite() {
  local name=$1 k rc=0 t0
  shift
  t0=$(date +%s)
  shards=()
  # The shards take the tests from one queue (tests/python/sharding.py): a fresh one a suite
  local queue="$build/pytest-tmp/$name-queue"
  rm -rf "$queue" && mkdir -p "$queue"
  # A background job of a script starts with SIGINT and SIGQUIT ignored, and so would every
  # Python the tests start (no KeyboardInterrupt: the Ctrl-C tests hung): env gives them back.
  for ((k = 0; k < jobs; k++)); do
    OVF_TEST_SHARD=$k/$jobs OVF_TEST_QUEUE=$queue env --default-signal=INT,QUIT "$@" "${pytest_args[@]}" \
      --basetemp="$build/pytest-tmp/$name-$k" >"$build/pytest-$name-$k.log" 2>&1 &
    shards+=($!)
  done
  for k in "${!shards[@]}"; do
    wait "${shards[$k]}" || rc=1
  done
  shards=()
  for ((k = 0; k < jobs; k++)); do
    echo "-- $name, shard $k of $jobs"
    cat "$build/pytest-$name-$k.log"
  done
  echo "== $name: $(( $(date +%s) - t0 )) s in $jobs shards$([ "$rc" = 0 ] || echo ', FAILED')"
  return "$rc"
}
phase "Python tests against $build"
suite python "$python" -m pytest tests/python
if [ "${OVF_TEST_WHEEL:-1}" = 1 ]; then
  installed=$(bash tools/wheel-venv.sh "$python" "$build/wheel-venv")
  phase "end-to-end tests against the pip-installed ovf ($installed)"
  OVF_TEST_INSTALLED=1 suite e2e "$installed" -m pytest tests/e2e
else
  phase "end-to-end tests against $build"
  suite e2e "$python" -m pytest tests/e2e
fi
[ "${OVF_TEST_BENCH:-1}" = 1 ] || { phase "done (no benchmarks: OVF_TEST_BENCH=0)"; exit 0; }
phase "benchmarks, --quick"
# $jobs at a time, each started as one ends: a smoke run's timings are not judged, and run
# one by one they left a core idle at the end of CI (the trixie leg is over by then). Each
# writes its own file; they are reported in order when all have ended, each with its time,
# and a failure ends the run with its output.
benches=()
for bench in bench/*.py; do
  case "$bench" in bench/_*) ;; *) benches+=("$bench") ;; esac
done
quick_out() { echo "$build/$(basename "$1" .py).quick.txt"; }
for bench in "${benches[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  ( t0=$(date +%s); rc=0
    PYTHONPATH="$build/python" timeout 900 "$python" "$bench" --quick > "$(quick_out "$bench")" 2>&1 || rc=$?
    echo "$rc $(( $(date +%s) - t0 ))" > "$(quick_out "$bench").status" ) &
  shards+=($!)  # (the EXIT trap ends them)
done
wait "${shards[@]}" || true
shards=()
for bench in "${benches[@]}"; do
  read -r rc took < "$(quick_out "$bench").status"
  echo "-- $bench --quick ($took s)"
  [ "$rc" = 0 ] || { cat "$(quick_out "$bench")"; echo "ovf test: $bench --quick failed (exit $rc)"; exit 1; }
  tail -n 3 "$(quick_out "$bench")"
done
phase "done"
