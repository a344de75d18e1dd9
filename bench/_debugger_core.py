"""The core half of bench/debugger_overhead.py: a gcore at the stop of a run whose ring has
wrapped, then `ovf frames N` on it timed under gdb (from the command line, inside gdb, and
ovf_plugin alone on the bytes gdb returned) and under LLDB."""

import os
import re

from _debugger_runs import GDB, PYTHON, Run, _check_stop, base_env, diverge_args, lldb

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
