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
set -euo pipefail
cd "$(dirname "$0")/.."
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
build=${OVF_BUILD_DIR:-build}
python=${OVF_PYTHON:-$(readlink -f .venv)/bin/python}  # the interpreter the build was made for
source tools/ccache-env.sh
PATH="$(dirname "$python"):$PATH" bash tools/lint.sh  # the venv's ruff, where it has one
ctest --test-dir "$build" --output-on-failure --timeout 300
# Every test that starts a process bounds it with its own timeout. Each suite's temporary
# files (core files: several GB an e2e run) go to a directory of the build that pytest
# empties when it starts, not to /tmp/pytest-of-*, which keeps three runs' worth and
# filled the disk (the trixie root's /tmp lives on between runs).
# A passed test's temporary directory (its core files) goes when it ends: one e2e run left
# about 40 GB of them, more than a CI machine's free disk with both legs' runs.
pytest_args=(-q -rs -p no:cacheprovider -o tmp_path_retention_policy=failed)
mkdir -p "$build/pytest-tmp"  # pytest makes the --basetemp directory, not its parents
"$python" -m pytest "${pytest_args[@]}" --basetemp="$build/pytest-tmp/python" tests/python
if [ "${OVF_TEST_WHEEL:-1}" = 1 ]; then
  installed=$(bash tools/wheel-venv.sh "$python" "$build/wheel-venv")
  echo "== end-to-end tests against the pip-installed ovf ($installed)"
  OVF_TEST_INSTALLED=1 "$installed" -m pytest "${pytest_args[@]}" \
    --basetemp="$build/pytest-tmp/e2e" tests/e2e
else
  "$python" -m pytest "${pytest_args[@]}" --basetemp="$build/pytest-tmp/e2e" tests/e2e
fi
echo "== benchmarks, --quick"
for bench in bench/*.py; do
  case "$bench" in bench/_*) continue ;; esac
  echo "-- $bench --quick"
  PYTHONPATH="$build/python" timeout 900 "$python" "$bench" --quick > "$build/$(basename "$bench" .py).quick.txt" 2>&1 ||
    { cat "$build/$(basename "$bench" .py).quick.txt"; echo "ovf test: $bench --quick failed"; exit 1; }
  tail -n 3 "$build/$(basename "$bench" .py).quick.txt"
done
