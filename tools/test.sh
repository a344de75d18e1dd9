#!/usr/bin/env bash
# The whole test suite: C++ unit tests (CTest) then Python and end-to-end tests
# (pytest). Tests that need a GPU skip without one and say so.
set -euo pipefail
cd "$(dirname "$0")/.."
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
ctest --test-dir build --output-on-failure --timeout 300
suites=(tests/python)
[ -d tests/e2e ] && suites+=(tests/e2e)
# Every test that starts a process bounds it with its own timeout.
/usr/bin/python3 -m pytest -q -rs -p no:cacheprovider "${suites[@]}"
