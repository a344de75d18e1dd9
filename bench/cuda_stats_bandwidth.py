"""GB/s of ovf's CUDA statistics kernels against a device-to-device copy of the same bytes.

Runs the native benchmark bench/cuda_stats_bandwidth.cpp (built by CMake with the
CUDA backend as <build>/bench/ovf_cuda_stats_bench; see that file for what it
measures): one contiguous tensor per dtype (float32, float16, bfloat16, float8_e4m3fn,
float64) at 4 MiB, 64 MiB and 1 GiB, the kernels timed alone against cudaMemcpy of
the same bytes; then a frame of 64 tensors through FrameStats and a strided view.
The target is kernel GB/s >= 0.85 x copy GB/s from 64 MiB up. A full run writes its
output to bench/results/cuda-<device>.txt.

Without a GPU it says "no GPU: not run" and exits 0.

    python3 bench/cuda_stats_bandwidth.py [--quick]
"""

import argparse
import glob
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _verdict import exit_status  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join("bench", "ovf_cuda_stats_bench")


def have_gpu():
    """An NVIDIA device node or a working nvidia-smi: the machine has a GPU for the driver."""
    if glob.glob("/dev/nvidia[0-9]*"):
        return True
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    except OSError:
        return False


def find_binary():
    """The benchmark in OVF_BUILD_DIR, in the build tree whose python/ is on PYTHONPATH
    (as the test command sets it), or in any build*/ of the checkout."""
    builds = []
    if os.environ.get("OVF_BUILD_DIR"):
        builds.append(os.environ["OVF_BUILD_DIR"])
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if entry.rstrip("/").endswith("python"):
            builds.append(os.path.dirname(entry.rstrip("/")))
    builds += sorted(glob.glob(os.path.join(REPO, "build*")))
    for build in builds:
        path = os.path.join(build, BINARY)
        if os.access(path, os.X_OK):
            return path
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test: small sizes")
    args = parser.parse_args()
    binary = find_binary()
    if not have_gpu():
        print("no GPU: not run (no NVIDIA device on this machine)")
        return 0
    if binary is None:
        print("not run: no ovf_cuda_stats_bench in any build tree (OVF_WITH_CUDA=ON builds it)")
        return exit_status(True, args.quick)
    result = subprocess.run(
        [binary] + (["--quick"] if args.quick else []), capture_output=True, text=True
    )
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    if result.returncode == 0 and result.stdout.startswith("no GPU"):
        return 0
    if not args.quick and result.returncode in (0, 1):
        match = re.search(r"^device: (.+?) \(", result.stdout, re.M)
        name = match.group(1) if match else "gpu"
        device = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()
        path = os.path.join(REPO, "bench", "results", "cuda-%s.txt" % device)
        with open(path, "w") as f:
            f.write(result.stdout)
        print("written to %s" % os.path.relpath(path, REPO))
    if result.returncode not in (0, 1):
        return result.returncode
    return exit_status(result.returncode == 1, args.quick)


if __name__ == "__main__":
    sys.exit(main())
