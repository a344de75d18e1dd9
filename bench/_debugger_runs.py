"""The runs bench/debugger_overhead.py times: its settings (where ovf, the workload, gdb and
LLDB are; the pinned threads and the ovf environment), one process read line by line with
its first sightings timed (Run), and the modes a to l of its docstring, each a function
from a number of steps to its times."""

import os
import re
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("OVF_BUILD_DIR", os.path.join(REPO, "build"))
PACKAGE = os.path.join(BUILD, "python", "ovf")
PYTHON = os.environ.get("OVF_PYTHON", sys.executable)  # the interpreter with torch (the venv's)
SCRIPT = os.path.join(REPO, "tests", "e2e", "scripts", "diverge.py")
GDB_SCRIPT = os.path.join(REPO, "gdb", "ovf-gdb.py")
GDB = ["gdb", "-batch", "-nx", "-iex", "set debuginfod enabled off", "-x", GDB_SCRIPT]
PINNED = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
OVF_ENV = {
    "PYTHONPATH": os.path.join(PACKAGE, "_bootstrap"),
    "OVF_ENABLE": "1",
    "OVF_ON_NAN": "continue",
    "OVF_STOP": "nan,inf",
}
NO_SEQ = 0xFFFFFFFFFFFFFFFF
FIRST_NONFINITE = 48  # ovf_state_t.first_nonfinite_seq (docs/ring-layout.md)
FRAMES_WRITTEN = 136  # ovf_state_t.frames_written
# The pybind11 forward hook the inferior's torch calls (runtime/python/py_hooks.cpp).
NAIVE_FUNCTION = "'ovf::forward_hook'"
NAIVE_CONDITION = f"*(unsigned long long *)((char *)&ovf_state + {FIRST_NONFINITE}) != {NO_SEQ:#x}"
STAMP = (
    "python import time; print('OVF_BENCH_T', time.clock_gettime(time.CLOCK_MONOTONIC), flush=True)"
)
FRAMES = (
    "python print('OVF_BENCH_FRAMES', int(gdb.parse_and_eval('*(unsigned long long *)((char"
    f" *)&ovf_state + {FRAMES_WRITTEN})')), flush=True)"
)
# At the stop: seconds from the event record's timestamp (CLOCK_REALTIME, written by the runtime
# just before it called ovf_stop_event) to now, i.e. to gdb's prompt after ovf's summary. The
# record size is the header's (offset 16): a constant 128 read layout 1's records after layout 2
# made them 192 bytes, and printed a latency of 1.8e9 s.
LATENCY = (
    "python import struct, time; i = gdb.selected_inferior(); "
    "a = int(gdb.parse_and_eval('(unsigned long)&ovf_state')); h = i.read_memory(a, 64).tobytes(); "
    "size, cap = struct.unpack_from('<II', h, 16); rec, = struct.unpack_from('<Q', h, 24); "
    "seq, = struct.unpack_from('<Q', h, 56); "
    "ts, = struct.unpack('<Q', i.read_memory(rec + (seq & (cap - 1)) * size + 24, 8).tobytes()); "
    "print('OVF_BENCH_LATENCY', time.time() - ts / 1e9, flush=True)"
)
LLDB_EXE = os.environ.get("OVF_LLDB", "lldb-19")
LLDB_SCRIPT = os.path.join(REPO, "lldb", "ovf_lldb.py")
# /proc/$$/fd/1 is lldb's own stdout once sh has exec'ed it: the program writes there directly.
LLDB_SHELL = (
    'exec "$0" --no-lldbinit -b -O "settings set target.input-path /dev/null" -O "settings set'
    ' target.output-path /proc/$$/fd/1" -O "settings set target.error-path /proc/$$/fd/1" -O'
    f' "command script import {LLDB_SCRIPT}" "$@"'
)
LLDB_STAMP = (
    "script import time; print('OVF_BENCH_T', time.clock_gettime(time.CLOCK_MONOTONIC), flush=True)"
)
TIMEOUT = 600


def now():
    return time.clock_gettime(time.CLOCK_MONOTONIC)  # system-wide: comparable with gdb's stamps


def base_env(ovf=False):
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "OVF_PACKAGE_DIR": PACKAGE,
        **PINNED,
    }
    if ovf:
        env.update(OVF_ENV)
    return env


class Run:
    """One process, its output read line by line as it comes, first sightings timed."""

    def __init__(self, argv, env, watch=(), cwd=None, timeout=TIMEOUT):
        self.seen = {}
        lines = []
        start = now()
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, 9))
        timer.start()
        try:
            for raw in proc.stdout:
                t = now()
                line = raw.decode("utf-8", "replace")
                lines.append(line)
                for prefix in watch:
                    if prefix not in self.seen and line.startswith(prefix):
                        self.seen[prefix] = t - start
                if line.startswith("OVF_BENCH_T "):
                    self.seen.setdefault("stamp", float(line.split()[1]) - start)
            proc.wait()
        finally:
            timer.cancel()
        self.total = now() - start
        self.returncode = proc.returncode
        self.text = "".join(lines)

    def check(self, ok, what):
        if not ok:
            raise SystemExit(f"debugger_overhead: {what}; the output was:\n{self.text[-4000:]}")


def diverge_args(steps):
    return [SCRIPT, "--steps", str(steps), "--inf-at", f"blocks.1.amp:{steps - 1}"]


def steady(run, steps):
    """ms per step between the script's step 0 and step N-2 lines."""
    a, b = run.seen.get("step 0 loss"), run.seen.get(f"step {steps - 2} loss")
    run.check(a is not None and b is not None, "the script's step lines are missing")
    return (b - a) / (steps - 2) * 1e3


def mode_a(steps):
    r = Run(
        [PYTHON, *diverge_args(steps)],
        base_env(ovf=True),
        ["step 0 loss", f"step {steps - 2} loss", f"step {steps - 1} loss"],
    )
    r.check(
        r.returncode == 0 and f"step {steps - 1} loss nan" in r.text,
        "the run without a debugger failed",
    )
    return {"exit": r.total, "event": r.seen[f"step {steps - 1} loss"], "ms/step": steady(r, steps)}


def mode_d(steps):
    r = Run(
        [*GDB, "-ex", "run", "--args", PYTHON, *diverge_args(steps)],
        base_env(ovf=True),
        ["step 0 loss", f"step {steps - 2} loss", f"step {steps - 1} loss"],
    )
    r.check(
        "exited normally" in r.text and "hit Breakpoint" not in r.text, "the run under gdb failed"
    )
    return {"exit": r.total, "event": r.seen[f"step {steps - 1} loss"], "ms/step": steady(r, steps)}


def _check_stop(r, steps, hit="Breakpoint 1, ovf_stop_event"):
    m = re.search(
        r"^ovf: first non-finite value \(inf\) at batch (\d+), frame \d+\n     (\S+) ", r.text, re.M
    )
    r.check(
        m is not None and (int(m.group(1)), m.group(2)) == (steps - 1, "blocks.1.amp"),
        f"ovf break-on-nan did not stop at batch {steps - 1}, blocks.1.amp",
    )
    r.check(r.text.count(hit) == 1, "more than one stop")


LLDB_HIT = "stop reason = breakpoint 1.1"


def lldb(*args):
    """argv of a batch-mode LLDB with ovf loaded."""
    return ["sh", "-c", LLDB_SHELL, LLDB_EXE, *args]


def mode_e(steps):
    r = Run(
        lldb("-o", "run", "--", PYTHON, *diverge_args(steps)),
        base_env(ovf=True),
        ["step 0 loss", f"step {steps - 2} loss", f"step {steps - 1} loss"],
    )
    r.check(
        re.search(r"^Process \d+ exited with status = 0 ", r.text, re.M) is not None
        and LLDB_HIT not in r.text,
        "the run under lldb failed",
    )
    return {"exit": r.total, "event": r.seen[f"step {steps - 1} loss"], "ms/step": steady(r, steps)}


def mode_l(steps):
    r = Run(
        lldb(
            "-o",
            "ovf break-on-nan",
            "-o",
            "run",
            "-o",
            LLDB_STAMP,
            "-o",
            "kill",
            "--",
            PYTHON,
            *diverge_args(steps),
        ),
        base_env(),
        ["step 0 loss", f"step {steps - 2} loss"],
    )
    _check_stop(r, steps, LLDB_HIT)
    return {"exit": r.total, "event": r.seen["stamp"], "ms/step": steady(r, steps)}


def mode_b(steps):
    r = Run(
        [
            *GDB,
            "-ex",
            "ovf break-on-nan",
            "-ex",
            "run",
            "-ex",
            STAMP,
            "-ex",
            LATENCY,
            "-ex",
            "kill",
            "--args",
            PYTHON,
            *diverge_args(steps),
        ],
        base_env(),
        ["step 0 loss", f"step {steps - 2} loss"],
    )
    _check_stop(r, steps)
    latency = float(re.search(r"^OVF_BENCH_LATENCY (\S+)", r.text, re.M).group(1))
    return {
        "exit": r.total,
        "event": r.seen["stamp"],
        "ms/step": steady(r, steps),
        "latency": latency,
    }


def mode_b_whole(steps):
    r = Run(
        [
            *GDB,
            "-ex",
            "ovf break-on-nan",
            "-ex",
            "run",
            "-ex",
            "delete",
            "-ex",
            "continue",
            "--args",
            PYTHON,
            *diverge_args(steps),
        ],
        base_env(),
        ["step 0 loss", f"step {steps - 2} loss"],
    )
    _check_stop(r, steps)
    r.check("exited normally" in r.text, "the run did not go on to its end after the stop")
    return {"exit": r.total, "ms/step": steady(r, steps)}


def mode_c(steps):
    r = Run(
        [
            *GDB,
            "-ex",
            "set breakpoint pending on",
            "-ex",
            f"break {NAIVE_FUNCTION} if {NAIVE_CONDITION}",
            "-ex",
            "run",
            "-ex",
            STAMP,
            "-ex",
            FRAMES,
            "-ex",
            "kill",
            "--args",
            PYTHON,
            *diverge_args(steps),
        ],
        base_env(ovf=True),
        ["step 0 loss", f"step {steps - 2} loss"],
    )
    r.check(
        # gdb 13: "Breakpoint 1, ovf::..."; gdb 16: 'Thread 1 "python3" hit Breakpoint 1, ovf::...'
        re.search(r"Breakpoint 1, ovf::forward_hook", r.text) is not None
        and "stamp" in r.seen,
        "the naive breakpoint did not stop",
    )
    frames = int(re.search(r"^OVF_BENCH_FRAMES (\d+)", r.text, re.M).group(1))
    return {
        "exit": r.total,
        "event": r.seen["stamp"],
        "ms/step": steady(r, steps),
        "hook calls": frames,
    }
