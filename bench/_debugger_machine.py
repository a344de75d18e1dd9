"""What bench/debugger_overhead.py prints about where it ran (the CPU, the inferior's torch
and threads, gdb's and LLDB's versions, the build measured, the load) and the medians and
spreads of its tables."""

import os
import platform
import shutil
import statistics
import subprocess

from _debugger_runs import BUILD, LLDB_EXE, PYTHON, base_env


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            fields = {}
            for line in f:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
        return (
            f"{fields.get('model name', '?')} (family {fields.get('cpu family', '?')}, model"
            f" {fields.get('model', '?')})"
        )
    except OSError:
        return platform.processor() or "unknown CPU"


def inferior_threads():
    out = subprocess.run(
        [
            PYTHON,
            "-c",
            (
                "import torch; print(torch.__version__, torch.get_num_threads(), "
                "torch.get_num_interop_threads())"
            ),
        ],
        capture_output=True,
        text=True,
        env=base_env(),
        timeout=120,
    )
    return out.stdout.strip() or out.stderr.strip()[-200:]


def gdb_version():
    out = subprocess.run(["gdb", "--version"], capture_output=True, text=True, timeout=60)
    return out.stdout.splitlines()[0] if out.stdout else "?"


def lldb_version():
    if shutil.which(LLDB_EXE) is None:
        return None
    out = subprocess.run([LLDB_EXE, "--version"], capture_output=True, text=True, timeout=60)
    return out.stdout.splitlines()[0] if out.stdout else "?"


def build_description():
    """Which build is measured, and the commit of the sources it sits in."""
    tree = os.path.dirname(os.path.abspath(BUILD))
    git = subprocess.run(
        ["git", "-C", tree, "describe", "--always", "--dirty=+uncommitted changes"],
        capture_output=True,
        text=True,
    )
    return f"{BUILD} (source tree {tree} at {git.stdout.strip() or 'an unknown commit'})"


def load_average():
    a, b, c = os.getloadavg()
    return f"{a:.2f} {b:.2f} {c:.2f} (1/5/15 min)"


def median(values):
    return statistics.median(values) if values else float("nan")


def spread(values):
    return f"min {min(values):.3f}, max {max(values):.3f}" if values else ""
