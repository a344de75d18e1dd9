"""Shared set-up of the benchmarks: pinned threads, where ovf and the examples are,
and the machine description printed at the top of every run.

Import this module before torch: it pins OpenBLAS and OpenMP to one thread through
the environment, which those libraries read when they load.
"""

import argparse
import os
import platform
import sys

THREADS = 1
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(THREADS)

import torch  # noqa: E402
from _verdict import exit_status, print_targets  # noqa: E402,F401 - every benchmark ends the same way

torch.set_num_threads(THREADS)
try:
    torch.set_num_interop_threads(THREADS)
except RuntimeError:  # already set by an earlier parallel region
    pass

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, "examples")


def import_ovf():
    """ovf from PYTHONPATH, else from the build tree (<repo>/build/python)."""
    try:
        import ovf
    except ImportError:
        sys.path.insert(0, os.path.join(REPO, "build", "python"))
        import ovf
    from ovf import _ovf  # noqa: F401 - the runtime itself, not only the lazy package

    return ovf


def import_t5_style():
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    import t5_style

    return t5_style


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def cache_sizes():
    """ "L1d 32K, L2 1024K, L3 32768K" for cpu0, from sysfs (what a working set fits in)."""
    parts = []
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(base)):
            if not entry.startswith("index"):
                continue
            path = os.path.join(base, entry)
            with open(os.path.join(path, "level")) as f:
                level = f.read().strip()
            with open(os.path.join(path, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(path, "size")) as f:
                size = f.read().strip()
            if kind == "Instruction":
                continue
            parts.append(f"L{level}{'d' if kind == 'Data' else ''} {size}")
    except OSError:
        return "unknown"
    return ", ".join(parts) or "unknown"


def blas_library():
    """Which libblas.so.3 the dynamic loader gave this process (OpenBLAS or the reference BLAS)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "blas" in line.lower() and "/" in line}
    except OSError:
        return "unknown"
    return ", ".join(sorted(os.path.realpath(p) for p in paths)) or "none mapped"


def machine_lines(ovf=None):
    lines = [
        f"cpu:      {cpu_model()} ({os.cpu_count()} logical cores visible)",
        f"caches:   {cache_sizes()} (per core for L1/L2 on most CPUs)",
        f"python:   {platform.python_version()} ({sys.executable})",
        (
            f"torch:    {torch.__version__}; threads: torch intra-op {torch.get_num_threads()},"
            f" inter-op {torch.get_num_interop_threads()},"
            f" OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']},"
            f" OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']} (pinned to {THREADS} by"
            " bench/_common.py)"
        ),
        f"blas:     {blas_library()}",
    ]
    if ovf is not None:
        lines.append(f"ovf:      {ovf.__version__} from {os.path.dirname(ovf.__file__)}")
    lines.append(load_line("start"))
    return lines


def load_line(when):
    """The load average: other processes on these cores make the numbers noisy."""
    try:
        load = os.getloadavg()
    except OSError:
        return f"load:     unknown at {when}"
    return f"load:     {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (1/5/15 min) at {when}"


def print_machine(title, ovf=None):
    print(title)
    print("=" * len(title))
    for line in machine_lines(ovf):
        print(line)
    print(flush=True)


def median(values):
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def model_bench_arguments(doc, models, argv=None, modes=None):
    """The arguments of a benchmark of training steps on models: --quick and --models;
    with `modes` (the benchmark's, in order), --modes and --rounds too."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument(
        "--quick", action="store_true", help="small sizes, one step a round (a smoke test)"
    )
    p.add_argument("--models", default=models)
    if modes is not None:
        p.add_argument(
            "--modes",
            default=",".join(modes),
            help="the modes to time, comma-separated (the first is what each is timed against)",
        )
        p.add_argument("--rounds", type=int, default=None, help="rounds of every mode")
    args = p.parse_args(argv)
    if modes is not None:
        chosen = args.modes.split(",")
        unknown = [m for m in chosen if m not in modes]
        if unknown:
            p.error(f"--modes: {', '.join(unknown)} is not one of {', '.join(modes)}")
        if chosen[0] != modes[0]:
            p.error(f"--modes must begin with {modes[0]}")
        args.modes = chosen
    return args
