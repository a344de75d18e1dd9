"""A debugger killed while it waits at `continue` never kills the training (issue 23
item 2): gdb (or LLDB) attaches to `python3 -m ovf --on-nan warn`, arms `ovf
break-on-nan`, continues, and is SIGKILLed. Its breakpoint's trap instruction stays in
ovf_stop_event's code; the runtime, seeing no tracer (TracerPid 0), never reaches it,
and the NaN that follows is answered by the process's own mode: the warn report, then
the rest of the run, exit status 0."""

import os
import re
import signal
import subprocess
import time

from build_paths import PACKAGE_PARENT, WENT_ON
from harness import GDB_SCRIPT, LLDB_SCRIPT, PYTHON, TOP, clean_env

LOG_NAN = os.path.join(TOP, "tests", "python", "scripts", "log_nan.py")


def _argv(name, pid):
    if name == "gdb":
        return [
            "gdb",
            "-batch",
            "-nx",
            "-iex",
            "set debuginfod enabled off",
            "-x",
            GDB_SCRIPT,
            "-ex",
            "ovf break-on-nan",
            "-ex",
            "continue",
            "-p",
            str(pid),
        ]
    return ["lldb-19", "--no-lldbinit", "-b", "-O", f"command script import {LLDB_SCRIPT}",
            "-o", "ovf break-on-nan", "-o", "continue", "-p", str(pid)]  # fmt: skip


def _tracer(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("TracerPid:"))


def _state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _wait_for(predicate, timeout=60):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_a_killed_debugger_leaves_the_process_its_own_mode(debugger, tmp_path):
    go = tmp_path / "go"
    train = subprocess.Popen(
        [PYTHON, "-m", "ovf", "--on-nan", "warn", LOG_NAN, "--wait-for", str(go)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(PYTHONPATH=PACKAGE_PARENT),
    )
    log = tmp_path / "debugger.log"
    try:
        assert train.stdout.readline() == "ready\n"
        with open(log, "w") as out:
            attached = subprocess.Popen(
                _argv(debugger.name, train.pid),
                stdout=out,
                stderr=subprocess.STDOUT,
                env=clean_env(),
                start_new_session=True,
            )
        _wait_for(lambda: f"ovf: the running process (pid {train.pid}) is armed" in log.read_text())
        _wait_for(lambda: _state(train.pid) != "t")  # `continue` ran: no longer in a trace stop
        tracer = _tracer(train.pid)
        assert tracer != 0
        os.killpg(attached.pid, signal.SIGKILL)  # the debugger and what it started
        attached.wait(timeout=30)
        _wait_for(lambda: _tracer(train.pid) == 0)
        go.touch()
        stdout, stderr = train.communicate(timeout=120)
    finally:
        train.kill()
    # the process's own warn reported the NaN and went on: exit status 1, said on stderr
    assert (train.returncode, stderr.splitlines()[-1]) == (1, WENT_ON), (
        train.returncode,
        stderr[-2000:],
        log.read_text(),
    )
    lines = stdout.splitlines()
    assert "Detected inf/nan during batch_number=" in stdout
    assert lines[-1] == "training finished"


KILL_INFERIOR = {  # SIGKILL from outside while the debugger holds the process stopped
    "gdb": "python import gdb, os, time; os.kill(gdb.selected_inferior().pid, 9); time.sleep(0.5)",
    "lldb": "script import lldb, os, time; os.kill(lldb.process.GetProcessID(), 9); "
    "time.sleep(0.5)",
}


def test_a_process_killed_at_a_stop_is_said_to_have_ended(debugger, tmp_path):
    """Issue 23 item 9: gdb said 'no ovf runtime in this process' about a process that
    had one and was SIGKILLed at the stop. LLDB still answers from what it read."""
    go = tmp_path / "go"
    go.touch()
    out = debugger.run(
        ["ovf break-on-nan", "run", KILL_INFERIOR[debugger.name], "ovf frames", "ovf status"],
        program=[PYTHON, LOG_NAN, "--wait-for", str(go)],
    )
    assert "no ovf runtime" not in out
    ended = re.findall(
        r"ovf: process \d+ has ended \(killed while stopped, or exited\): its memory and the "
        r"ring in it are gone; `run` starts it again, and a core file of it, if one was "
        r"written, still holds the ring",
        out,
    )
    if debugger.name == "gdb":
        assert len(ended) == 2, out
    else:
        assert len(ended) in (0, 2), out
