"""What the debugger side costs: a diverging run under gdb with `ovf break-on-nan` armed,
against the same run with ovf and no debugger, and against a naive conditional gdb
breakpoint on every module forward; and `ovf frames 1000` on a core whose ring is full.

    /usr/bin/python3 bench/debugger_overhead.py [--reps 3] [--steps 20000] [--naive-steps 300]
                                                [--quick]

The workload is tests/e2e/scripts/diverge.py, an unmodified training loop of a tiny model
(14 module forwards a step, about 0.3 ms a step): `--steps N --inf-at blocks.1.amp:N-1`, so
the first inf comes in the last step and a run to the event is nearly the whole run. Many
small forwards are the worst case for anything that costs per forward. Every mode is a fresh
process; the modes of a repetition run one after the other, their order rotating from one
repetition to the next; the table shows medians. OpenBLAS, OpenMP and MKL are pinned to one
thread through the environment (OMP_NUM_THREADS=1 also gives torch one intra-op thread); the
inferior's torch.get_num_threads() is printed.

Modes (ovf on in all; "ovf env" is what the bootstrap reads: PYTHONPATH=<build>/python/ovf/
_bootstrap, OVF_ENABLE=1, OVF_ON_NAN=continue, OVF_STOP=nan,inf):
  a  no debugger: python3 diverge.py with the ovf env, to its exit
  d  gdb, nothing armed: the same under `gdb -batch -x gdb/ovf-gdb.py -ex run` (gdb's own cost)
  b  gdb, `ovf break-on-nan`, `run`: time to the stop (then kill); and b+ the whole run
     (`delete` the breakpoint at the stop, `continue` to the exit)
  c  gdb, a naive breakpoint on the pybind11 forward hook of ovf (called once per module
     forward) with a gdb condition that is false until the event (the ring's
     first_nonfinite_seq is set); on --naive-steps, with a and d on the same short run
  e  LLDB (lldb-19, or $OVF_LLDB), nothing armed: `lldb -b -O 'command script import
     lldb/ovf_lldb.py' -o run` (LLDB's own cost)
  l  LLDB, `ovf break-on-nan`, `run`: time to the stop (then kill)
  Under LLDB the program writes into lldb's own stdout (target.output-path), not through the
  pseudo-terminal LLDB would copy its output from, so its step lines are timed as they come.
Times: "to exit" is launch to exit; "to event" is launch to the stop (b, c) or to the line
the script prints after the event's step (a, d); "ms/step" is the steady state, from the
script's `step 0` line to its `step N-2` line (start-up and the event excluded).

The core: `gcore` at the stop of a --steps run (its ring has wrapped: 65536 records held),
then `gdb -batch -x gdb/ovf-gdb.py python3 core` timed with and without `-ex 'ovf frames 1000'`,
and inside gdb the command alone, a second call, and ovf_plugin's decoding and formatting
alone (the bytes gdb returned for the first call, served again from memory). plugin/ has no
core-file reader of its own (its ProcTarget reads a live process's /proc/PID/mem), so the
decoder is timed only inside gdb. The same core is then opened with LLDB (`lldb -c core python3`;
LLDB reads gdb's ELF cores), timed the same way (the command alone with `script`).
Targets: b / a and l / a, launch to the event, <= 1.15; `ovf frames 1000` answers in < 1 s
under both debuggers.
Exit status 1 when a target is missed.
"""

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _verdict import exit_status  # noqa: E402

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
# just before it called ovf_stop_event) to now, i.e. to gdb's prompt after ovf's summary.
LATENCY = (
    "python import struct, time; i = gdb.selected_inferior(); "
    "a = int(gdb.parse_and_eval('(unsigned long)&ovf_state')); h = i.read_memory(a, 64).tobytes(); "
    "cap, = struct.unpack_from('<I', h, 20); rec, = struct.unpack_from('<Q', h, 24); "
    "seq, = struct.unpack_from('<Q', h, 56); "
    "ts, = struct.unpack('<Q', i.read_memory(rec + (seq & (cap - 1)) * 128 + 24, 8).tobytes()); "
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

FRAMES_TARGET_S = 1.0
RATIO_TARGET = 1.15


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


# ------------------------------------------------------------------ the core

GDB_SIDE = r'''
# Runs inside gdb (sourced after gdb/ovf-gdb.py): times `ovf frames N` on the loaded core.
import os
import time

import gdb
from ovf_gdb.target import GdbTarget
from ovf_plugin import commands
from ovf_plugin.session import Session

N = os.environ["OVF_BENCH_N"]


class Replay(GdbTarget):
    """Records what gdb returns, then serves it again: ovf_plugin alone on the same bytes."""

    def __init__(self):
        super().__init__()
        self.memory, self.replaying, self.bytes = {}, False, 0

    def kind(self):
        if not self.replaying:
            self._kind = super().kind()
        return self._kind

    def find_data_symbol(self, name):
        if not self.replaying:
            self.memory[name] = super().find_data_symbol(name)
        return self.memory[name]

    def read_memory(self, address, size):
        if not self.replaying:
            self.memory[(address, size)] = super().read_memory(address, size)
            self.bytes += size
        return self.memory[(address, size)]


t = time.perf_counter()
text = gdb.execute(f"ovf frames {N}", to_string=True)
first = time.perf_counter() - t
t = time.perf_counter()
again = gdb.execute(f"ovf frames {N}", to_string=True)
second = time.perf_counter() - t
target = Replay()
session = Session(target)
recorded = commands.execute(session, "frames", [N])
target.replaying = True
t = time.perf_counter()
replayed = commands.execute(session, "frames", [N])
plugin = time.perf_counter() - t
status = commands.execute(session, "status", [])
assert text == again == recorded == replayed, "the listings differ"
headers = sum(
    1 for line in text.splitlines() if line.startswith(" " * 17 + " ") and "***" not in line
)
print(f"OVF_BENCH_CORE first={first:.6f} second={second:.6f} plugin={plugin:.6f} "
      f"bytes={target.bytes} frames={headers} lines={text.count(chr(10))}", flush=True)
print(text.splitlines()[0], flush=True)
print(status, flush=True)
'''


def make_core(steps, directory):
    core = os.path.join(directory, "core")
    r = Run(
        [
            *GDB,
            "-ex",
            "ovf break-on-nan",
            "-ex",
            "run",
            "-ex",
            "ovf status",
            "-ex",
            f"gcore {core}",
            "-ex",
            "kill",
            "--args",
            PYTHON,
            *diverge_args(steps),
        ],
        base_env(),
    )
    _check_stop(r, steps)
    r.check(os.path.isfile(core), "gcore wrote no core file")
    m = re.search(
        r"^detection: .*; (\d+) frames, (\d+) records written; the ring keeps (\d+)$", r.text, re.M
    )
    r.check(m is not None, "ovf status printed no ring")
    frames, written, capacity = map(int, m.groups())
    r.check(
        written >= capacity,
        f"the ring did not wrap ({written} records written, capacity {capacity})",
    )
    return core, {
        "frames written": frames,
        "records written": written,
        "capacity": capacity,
        "core bytes": os.path.getsize(core),
    }


def time_core(core, side, frames):
    env = dict(base_env(), OVF_BENCH_N=str(frames))
    load = Run([*GDB, PYTHON, core], env)
    load.check(load.returncode == 0, "gdb could not load the core")
    cli = Run([*GDB, "-ex", f"ovf frames {frames}", PYTHON, core], env)
    cli.check(f"Last {frames} forward frames:" in cli.text, "ovf frames printed no listing")
    inner = Run([*GDB, "-x", side, PYTHON, core], env)
    m = re.search(
        r"^OVF_BENCH_CORE first=(\S+) second=(\S+) plugin=(\S+) bytes=(\d+) frames=(\d+)",
        inner.text,
        re.M,
    )
    inner.check(m is not None, "the timing inside gdb failed")
    inner.check(int(m.group(5)) == frames, f"the listing does not hold {frames} frames")
    inner.check(
        re.search(r"^detection: .* the ring keeps 65536$", inner.text, re.M) is not None
        and f"Last {frames} forward frames:" in inner.text,
        "the core's ring is not what was written",
    )
    return {
        "gdb load": load.total,
        "gdb + frames": cli.total,
        "command": float(m.group(1)),
        "command again": float(m.group(2)),
        "plugin alone": float(m.group(3)),
        "bytes read": int(m.group(4)),
    }


def lldb_side(frames):
    """One `script` line timing `ovf frames N` twice inside LLDB (no backticks: LLDB would
    evaluate them)."""
    return (
        "script import time; ci = lldb.debugger.GetCommandInterpreter(); r1 ="
        " lldb.SBCommandReturnObject(); r2 = lldb.SBCommandReturnObject(); t ="
        f" time.perf_counter(); ci.HandleCommand('ovf frames {frames}', r1); a ="
        " time.perf_counter() - t; t = time.perf_counter(); ci.HandleCommand('ovf frames"
        f" {frames}', r2); b = time.perf_counter() - t; text = r1.GetOutput() or '';"
        " print('OVF_BENCH_LLDB first=%.6f second=%.6f same=%d frames=%d' % (a, b, text =="
        " r2.GetOutput(), sum(1 for x in text.splitlines() if x.startswith(' ' * 18) and '***' not"
        " in x)), flush=True)"
    )


def time_core_lldb(core, frames):
    env = base_env()
    load = Run(lldb("-c", core, PYTHON), env)
    load.check(load.returncode == 0 and "was loaded" in load.text, "lldb could not load the core")
    cli = Run(lldb("-o", f"ovf frames {frames}", "-c", core, PYTHON), env)
    cli.check(
        f"Last {frames} forward frames:" in cli.text, "ovf frames printed no listing under lldb"
    )
    inner = Run(lldb("-o", lldb_side(frames), "-c", core, PYTHON), env)
    m = re.search(
        r"^OVF_BENCH_LLDB first=(\S+) second=(\S+) same=(\d) frames=(\d+)", inner.text, re.M
    )
    inner.check(m is not None and m.group(3) == "1", "the timing inside lldb failed")
    inner.check(int(m.group(4)) == frames, f"the listing does not hold {frames} frames")
    return {
        "lldb load": load.total,
        "lldb + frames": cli.total,
        "command": float(m.group(1)),
        "command again": float(m.group(2)),
    }


# ------------------------------------------------------------------ output


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


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--reps", type=int, default=3, help="repetitions of every mode (>= 3 for a result)"
    )
    p.add_argument(
        "--steps", type=int, default=60000, help="steps of the main run (the event in the last)"
    )
    p.add_argument(
        "--naive-steps", type=int, default=300, help="steps of the naive breakpoint's shorter run"
    )
    p.add_argument("--frames", type=int, default=1000, help="N of `ovf frames N` on the core")
    p.add_argument("--quick", action="store_true", help="smoke test: 1 repetition, short runs")
    args = p.parse_args()
    if args.quick:
        args.reps, args.steps, args.naive_steps = 1, 2000, 60
    for need in (PYTHON, shutil.which("gdb"), os.path.join(PACKAGE, "libovf_runtime.so")):
        if not need or not os.path.exists(need):
            raise SystemExit(
                f"debugger_overhead: {need or 'gdb'} is missing (build with `ninja -C build`)"
            )

    title = "ovf debugger overhead (bench/debugger_overhead.py)"
    print(title)
    print("=" * len(title))
    print(f"cpu:      {cpu_model()}, {os.cpu_count()} logical cores visible")
    print(
        f"python:   {platform.python_version()} ({PYTHON}); torch, intra-op and inter-op threads in"
        f" the inferior's environment: {inferior_threads()}"
    )
    print(
        f"threads:  {' '.join(f'{k}={v}' for k, v in PINNED.items())} in every process's"
        " environment"
    )
    print(f"gdb:      {gdb_version()}")
    has_lldb = lldb_version() is not None
    print(
        f"lldb:     {lldb_version() if has_lldb else f'{LLDB_EXE} is not installed: no LLDB rows'}"
    )
    print(f"ovf:      {build_description()}")
    print(f"load:     {load_average()} at start")
    print(
        f"workload: {os.path.relpath(SCRIPT, REPO)} --steps {args.steps} --inf-at"
        f" blocks.1.amp:{args.steps - 1} (14 module forwards a step); naive breakpoint on --steps"
        f" {args.naive_steps}"
    )
    print(
        f"method:   {args.reps} repetitions, modes interleaved round-robin (order rotating),"
        " medians; fresh processes"
    )
    print(flush=True)

    modes = [
        ("a", "no debugger", mode_a, args.steps),
        ("d", "gdb, nothing armed", mode_d, args.steps),
        ("b", "gdb, ovf break-on-nan, to the stop", mode_b, args.steps),
        ("b+", "gdb, ovf break-on-nan, stop, delete, continue to exit", mode_b_whole, args.steps),
        ("a'", "no debugger (short run)", mode_a, args.naive_steps),
        ("d'", "gdb, nothing armed (short run)", mode_d, args.naive_steps),
        (
            "c",
            "gdb, naive conditional breakpoint per forward (short run)",
            mode_c,
            args.naive_steps,
        ),
    ]
    if has_lldb:
        modes += [
            ("e", "lldb, nothing armed", mode_e, args.steps),
            ("l", "lldb, ovf break-on-nan, to the stop", mode_l, args.steps),
        ]
    results = {key: [] for key, *_ in modes}
    for rep in range(args.reps):
        order = modes[rep % len(modes) :] + modes[: rep % len(modes)]
        for key, _, fn, steps in order:
            results[key].append(fn(steps))
        print(f"repetition {rep + 1}/{args.reps} done; load {load_average()}", flush=True)
    print()

    def med(key, field):
        return median([r[field] for r in results[key] if field in r])

    def cell(key, field, digits=3):
        values = [r[field] for r in results[key] if field in r]
        if not values:
            return f"{'-':>22}"
        return (
            f"{median(values):8.{digits}f} "
            f"({min(values):5.{digits - 1}f}-{max(values):<5.{digits - 1}f})"
        )

    print(
        f"{'mode':<4} {'what':<60} {'steps':>6} {'to event s (min-max)':>22} "
        f"{'to exit s (min-max)':>22} "
        f"{'ms/step (min-max)':>22}"
    )
    print("-" * 140)
    for key, what, _, steps in modes:
        print(
            f"{key:<4} {what:<60} {steps:>6} {cell(key, 'event')} {cell(key, 'exit')} "
            f"{cell(key, 'ms/step', 4)}"
        )
    print()
    a_exit, a_event, a_step = med("a", "exit"), med("a", "event"), med("a", "ms/step")
    b_event, bw_exit, b_step = med("b", "event"), med("b+", "exit"), med("b", "ms/step")
    d_exit, d_step = med("d", "exit"), med("d", "ms/step")
    fixed = d_exit - a_exit
    hooks = med("c", "hook calls")
    per_hit_ms = (med("c", "event") - med("d'", "event")) / hooks * 1e3
    naive_at_main = med("d", "event") + per_hit_ms / 1e3 * hooks / args.naive_steps * args.steps
    ratio_b = b_event / a_event
    c_ratio = med("c", "event") / med("a'", "exit")
    print("ratios (medians)")
    print(f"  b  to the stop / a to the event          {ratio_b:7.3f}   (target <= {RATIO_TARGET})")
    print(f"  b  to the stop / a to exit               {b_event / a_exit:7.3f}")
    print(f"  b+ whole run   / a whole run             {bw_exit / a_exit:7.3f}")
    print(
        f"  b+ whole run   / d gdb, nothing armed    {bw_exit / d_exit:7.3f}   (what arming ovf"
        " adds under gdb)"
    )
    print(
        f"  d  gdb, nothing armed / a                {d_exit / a_exit:7.3f}   (gdb's own cost:"
        f" +{fixed:.2f} s)"
    )
    print(
        f"  b  stop latency: event to gdb's prompt   {med('b', 'latency'):7.3f} s (ovf's summary"
        " included)"
    )
    print(
        f"  b  ms/step / a ms/step (steady state)    {b_step / a_step:7.3f}   (start-up excluded)"
    )
    print(f"  d  ms/step / a ms/step (steady state)    {d_step / a_step:7.3f}")
    print(
        f"  c  naive, to the stop / a' to exit       {c_ratio:7.3f}   "
        f"({hooks:.0f} breakpoint hits, {per_hit_ms:.3f} ms each over d')"
    )
    print(
        f"  c  naive on the main run, estimated / a  {naive_at_main / a_exit:7.1f}   "
        f"(about {naive_at_main:.0f} s; b's breakpoint is hit once)"
    )
    if has_lldb:
        e_exit, l_event, l_step = med("e", "exit"), med("l", "event"), med("l", "ms/step")
        ratio_l = l_event / a_event
        print(
            f"  l  lldb to the stop / a to the event     {ratio_l:7.3f}   (target <="
            f" {RATIO_TARGET})"
        )
        print(f"  l  lldb to the stop / a to exit          {l_event / a_exit:7.3f}")
        print(
            f"  e  lldb, nothing armed / a               {e_exit / a_exit:7.3f}   "
            f"(LLDB's own cost: +{e_exit - a_exit:.2f} s)"
        )
        print(
            f"  l  ms/step / a ms/step (steady state)    {l_step / a_step:7.3f}   (start-up"
            " excluded)"
        )
    if fixed > 0:
        print(
            f"  gdb's fixed cost of {fixed:.2f} s is paid once a run (start-up, symbols of every"
            f" library the script loads); b/a <= {RATIO_TARGET} from runs of about"
            f" {fixed / (RATIO_TARGET - 1):.0f} s without a debugger"
        )
    if has_lldb and e_exit > a_exit:
        print(
            f"  LLDB's fixed cost of {e_exit - a_exit:.2f} s likewise: l/a <= {RATIO_TARGET} from"
            f" runs of about {(e_exit - a_exit) / (RATIO_TARGET - 1):.0f} s"
        )
    print(flush=True)

    with tempfile.TemporaryDirectory(prefix="ovf-bench-") as tmp:
        core, info = make_core(args.steps, tmp)
        side = os.path.join(tmp, "gdb_side.py")
        with open(side, "w") as f:
            f.write(GDB_SIDE)
        core_runs = [time_core(core, side, args.frames) for _ in range(args.reps)]
        lldb_runs = (
            [time_core_lldb(core, args.frames) for _ in range(args.reps)] if has_lldb else []
        )
    print(
        f"core:     gcore at the stop of the main run: {info['core bytes'] / 2**20:.0f} MiB, "
        f"{info['records written']} records written, ring capacity {info['capacity']} (full), "
        f"{info['frames written']} frames written"
    )
    print(f"`ovf frames {args.frames}` on it ({args.reps} fresh gdb processes, medians)")
    rows = [
        ("gdb -batch python3 core (gdb loads the core, no command)", "gdb load"),
        (f"gdb -batch python3 core -ex 'ovf frames {args.frames}'", "gdb + frames"),
        ("the command alone, inside gdb (first call)", "command"),
        ("the command again, same gdb", "command again"),
        ("ovf_plugin alone: decode + format, same bytes", "plugin alone"),
    ]
    for what, field in rows:
        values = [r[field] for r in core_runs]
        print(f"  {what:<58} {median(values):8.3f} s   ({spread(values)})")
    print(f"  bytes the command read through gdb: {core_runs[0]['bytes read'] / 2**20:.2f} MiB")
    lldb_rows = [
        ("lldb -b -c core python3 (LLDB loads the core, no command)", "lldb load"),
        (f"lldb -b -o 'ovf frames {args.frames}' -c core python3", "lldb + frames"),
        ("the command alone, inside lldb (first call)", "command"),
        ("the command again, same lldb", "command again"),
    ]
    for what, field in lldb_rows if lldb_runs else ():
        values = [r[field] for r in lldb_runs]
        print(f"  {what:<58} {median(values):8.3f} s   ({spread(values)})")
    print(
        "  the Python decoder has no core-file reader of its own in plugin/: timed inside gdb only"
    )
    print(f"load:     {load_average()} at end")
    print()

    command = median([r["command"] for r in core_runs])
    whole = median([r["gdb + frames"] for r in core_runs])
    missed = []
    if ratio_b > RATIO_TARGET:
        missed.append(
            f"b/a = {ratio_b:.3f} > {RATIO_TARGET} (launch to the event, gdb's start-up included)"
        )
    if command >= FRAMES_TARGET_S:
        missed.append(f"`ovf frames {args.frames}` took {command:.3f} s >= {FRAMES_TARGET_S} s")
    if has_lldb:
        lldb_command = median([r["command"] for r in lldb_runs])
        if ratio_l > RATIO_TARGET:
            missed.append(
                f"l/a = {ratio_l:.3f} > {RATIO_TARGET} (launch to the event, LLDB's start-up"
                " included)"
            )
        if lldb_command >= FRAMES_TARGET_S:
            missed.append(
                f"`ovf frames {args.frames}` took {lldb_command:.3f} s >= {FRAMES_TARGET_S} s under"
                " lldb"
            )
    print(
        f"steady state: a step under gdb with ovf break-on-nan armed takes {b_step / a_step:.3f}x"
        " the time it takes without a debugger"
        f" ({'within' if b_step / a_step <= RATIO_TARGET else 'beyond'} {RATIO_TARGET})"
    )
    print(
        f"ovf frames {args.frames}: the command answers in {command:.3f} s "
        f"({'<' if command < FRAMES_TARGET_S else '>='} {FRAMES_TARGET_S} s); "
        f"gdb started on the core with it: {whole:.3f} s"
    )
    if has_lldb:
        print(
            f"ovf frames {args.frames} under lldb: the command answers in {lldb_command:.3f} s;"
            " lldb started on the core with it:"
            f" {median([r['lldb + frames'] for r in lldb_runs]):.3f} s"
        )
    for m in missed:
        print(f"TARGET MISSED: {m}")
    if not missed:
        print("targets met")
    if args.reps < 3:
        print("(fewer than 3 repetitions: a smoke test, not a result)")
    return exit_status(missed, args.quick)


if __name__ == "__main__":
    sys.exit(main())
