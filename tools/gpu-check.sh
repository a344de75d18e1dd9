#!/usr/bin/env bash
# The checks that need a GPU, as one script for a lent GPU machine (the device tool's
# `run`). It builds ovf against that machine's own torch and nvcc, then runs: CTest (the
# CUDA kernels on the GPU included), the Python GPU tests and the device engine's tests,
# the debugger sessions of tests/e2e/test_gpu_session.py under cuda-gdb (that machine has
# no gdb: a `gdb` in /usr/bin that runs cuda-gdb, where the harness's PATH looks), the fp16
# example under `python -m ovf`, and both GPU benchmarks in full. Everything it prints goes to $OUT/gpu-check.log too; the benchmarks' result
# files are copied to $OUT.
#   bash tools/gpu-check.sh [--tests-only]   # --tests-only: the build, CTest and the GPU tests
#   GTEST_SRC  a GoogleTest source tree to build when the machine has none (Debian's
#              /usr/src/googletest, copied into the checkout and carried)
set -uo pipefail
cd "$(dirname "$0")/.."
tests_only=0
[ "${1:-}" = --tests-only ] && tests_only=1
out=${OUT:-/tmp/ovf-gpu-check}
mkdir -p "$out"
exec > >(tee "$out/gpu-check.log") 2>&1
python=$(command -v python3)
step() { echo; echo "== $* ($(date +%T))"; }
failed=()
check() {  # check NAME SECONDS COMMAND...: runs it, records a failure, never stops the script
  local name=$1 seconds=$2
  shift 2
  step "$name"
  timeout "$seconds" "$@" || failed+=("$name (rc $?)")
}

finish() {
  step "done"
  if ((${#failed[@]})); then
    printf 'gpu-check: failed: %s\n' "${failed[@]}"
    exit 1
  fi
  echo "gpu-check: every step passed"
  exit 0
}

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
nvcc --version | tail -n 2
"$python" -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))'
nproc
lscpu | grep -m1 'Model name'
# (gdb is not there; cuda-gdb is, a gdb: does it script in Python, as ovf's front end needs?)
cuda-gdb --version 2>/dev/null | head -n 1
timeout 30 cuda-gdb -nx -batch -ex 'python import sys; print("cuda-gdb python", sys.version.split()[0])' 2>&1 | tail -n 1

prefix=()
if [ -n "${GTEST_SRC:-}" ]; then
  step "GoogleTest from $GTEST_SRC"
  cmake -S "$GTEST_SRC" -B /tmp/gtest-build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX=/tmp/gtest >/dev/null && ninja -C /tmp/gtest-build install >/dev/null ||
    { echo "gpu-check: GoogleTest did not build"; exit 1; }
  prefix=(-DCMAKE_PREFIX_PATH=/tmp/gtest)
fi

step "configure (OVF_WITH_CUDA=ON, sm_90)"
cmake -S . -B build-gpu -G Ninja -DPython_EXECUTABLE="$python" -DOVF_WITH_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 "${prefix[@]}" || { echo "gpu-check: configure failed"; exit 1; }
step "build"
ninja -C build-gpu -j "$(nproc)" >"$out/build.log" 2>&1 || { tail -n 60 "$out/build.log"; exit 1; }
tail -n 2 "$out/build.log"

export OVF_BUILD_DIR=$PWD/build-gpu PYTHONPATH=$PWD/build-gpu/python
check ctest 120 ctest --test-dir build-gpu --output-on-failure --timeout 60 -j 8
check "python GPU tests" 480 "$python" -m pytest -q -rs -p no:cacheprovider \
  --basetemp=/tmp/pytest-gpu tests/python/test_gpu.py tests/python/test_device_engine.py \
  tests/python/test_examples.py
if ! command -v gdb >/dev/null && command -v cuda-gdb >/dev/null && [ -w /usr/bin ]; then
  printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v cuda-gdb)" >/usr/bin/gdb && chmod +x /usr/bin/gdb
fi
check "GPU debugger sessions (cuda-gdb as gdb)" 240 "$python" -m pytest -q -rs -p no:cacheprovider \
  --basetemp=/tmp/pytest-gpu-e2e tests/e2e/test_gpu_session.py
((tests_only)) && finish
# The example makes an inf on purpose: ovf raises and the script exits 1 (checked by its
# output: the frame it names), so these two print their status instead of failing.
for mode in exact fast; do
  step "fp16 example under python -m ovf ($mode device mode)"
  OVF_DEVICE_MODE=$mode timeout 180 "$python" -m ovf examples/fp16_autocast_overflow.py
  echo "exit status $?"
done
check "bench/cuda_stats_bandwidth.py" 240 "$python" bench/cuda_stats_bandwidth.py
check "bench/device_step_overhead.py" 300 "$python" bench/device_step_overhead.py
cp bench/results/cuda-*.txt bench/results/gpu-step-*.txt "$out/" 2>/dev/null

finish
