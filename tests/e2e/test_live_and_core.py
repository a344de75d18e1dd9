"""`ovf watch`, `ovf trace-batches`, attaching to a waiting process, core files; under gdb
and LLDB."""

import os
import re
import signal
import subprocess
import time

from build_paths import WENT_ON
from harness import (
    DIVERGE,
    PACKAGE_PARENT,
    PYTHON,
    SCRIPT,
    TIMEOUT,
    abort_core,
    between,
    clean_env,
    run_python,
    stop_summary,
)


def test_watch_above_stops_where_the_threshold_is_crossed(debugger):
    out = debugger.run(
        ["ovf watch 'blocks.*.amp' --above 1e4", "run", "kill"],
        program=[PYTHON, SCRIPT, "--gain", "blocks.1.amp:2:1e5", "--steps", "3"],
    )
    title, batch, module, _ = stop_summary(out)
    assert (title, batch, module) == ("abs max above 1.00e+04", 2, "blocks.1.amp")
    assert re.search(r"^     blocks.1.amp \(Amplifier\): output abs max 8.47e\+04", out, re.M)
    assert debugger.hits(out) == 1


def test_trace_batches_prints_what_the_reference_traces(debugger):
    # The reference (python3 -m ovf, warn mode to go past the NaN) traces batch 3 itself.
    ref = run_python(
        ["-m", "ovf", "--on-nan", "warn", "--trace-batches", "3", SCRIPT, *DIVERGE, "--steps", "4"]
    )
    start = ref.stdout.index("\n\n                  *** Starting batch number=3 ***")
    reference_trace = ref.stdout[start : ref.stdout.index("step 3 loss")]
    # Under the debugger: stop at the NaN, then trace batch 3 and stop again only from batch 4 on.
    out = debugger.run(
        [
            "ovf break-on-nan",
            "run",
            "ovf trace-batches 3",
            "ovf break-on-nan --after-batch 4 --carriers",
            "continue",
            "kill",
        ],
        program=[PYTHON, SCRIPT, *DIVERGE, "--steps", "5"],
    )
    trace = out[
        out.index("\n\n                  *** Starting batch number=3 ***") : out.index(
            "step 3 loss"
        )
    ]
    assert trace == reference_trace
    assert [s[1] for s in re.findall(r"^ovf: (.*) at batch (\d+)", out, re.M)] == ["2", "4"]


def test_attach_to_a_process_waiting_in_wait_mode(debugger, tmp_path):
    log = open(tmp_path / "out.txt", "w")
    proc = subprocess.Popen(
        [PYTHON, "-u", "-m", "ovf", "--on-nan", "wait", SCRIPT, *DIVERGE, "--nan-after"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=clean_env(PYTHONPATH=PACKAGE_PARENT),
    )
    try:
        deadline = time.time() + TIMEOUT
        while "waiting for a debugger" not in (tmp_path / "out.txt").read_text():
            assert proc.poll() is None and time.time() < deadline, (
                tmp_path / "out.txt"
            ).read_text()
            time.sleep(0.2)
        waiting = (tmp_path / "out.txt").read_text()
        assert (
            debugger.attach.replace("PID", str(proc.pid)) + " " in waiting
        )  # the command it prints
        out = debugger.run(
            [
                "ovf frames",
                debugger.cut(),
                "ovf break-on-nan --carriers",
                "ovf release",
                "continue",
                *debugger.py_bt,
                "kill",
            ],
            pid=proc.pid,
        )
        listing = between(out, "Last 21 forward frames:")
        assert listing in waiting  # the frames the runtime printed before waiting
        assert "ovf: the running process (pid %d) is armed" % proc.pid in out
        assert "ovf: released: a process waiting in wait mode goes on at `continue`" in out
        assert stop_summary(out)[:3] == ("non-finite value (nan and inf)", 2, "blocks.1.center")
        assert debugger.python_line(
            out, "forward", "return self.center(h)  # ovf-e2e: center call"
        ), out
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)


def test_kernel_core_from_abort_mode(debugger, tmp_path):
    core, stdout = abort_core(tmp_path)
    report = stdout[stdout.index("Last 21 forward frames:") :]
    post = debugger.run(["ovf status", "ovf frames", debugger.cut()], core=core)
    assert "detection: non-finite seen; batch 2;" in post and "on event: abort" in post
    assert "torch.compile" not in post  # an eager run: nothing hidden by compiled code
    assert report.startswith(between(post, "Last 21 forward frames:"))
    # Cut short (a disk that filled up): the debugger loads what is there, ovf says what it
    # cannot read.
    for size in (os.path.getsize(core) // 2, 4096):
        truncated = tmp_path / f"truncated-{size}"
        with open(core, "rb") as src, open(truncated, "wb") as dst:
            dst.write(src.read(size))
        out = debugger.run(["ovf frames", debugger.cut()], core=truncated)
        assert re.search(
            r"^(error: )?(ovf: (no ovf ring in this core file|cannot read ovf_state|no process)|"
            r"Last \d+ forward frames:)",
            out,
            re.M,
        ) or debugger.refuses_core(out), out


def test_gcore_file(debugger, tmp_path):
    # gdb's gcore writes an ELF core; LLDB's process save-core a minidump.
    core = tmp_path / "gcore"
    live = debugger.run(
        ["ovf break-on-nan", "run", "ovf frames", debugger.cut(), debugger.gcore(core), "kill"],
        program=[PYTHON, SCRIPT, *DIVERGE],
    )
    post = debugger.run(["ovf frames", debugger.cut()], core=core)
    assert between(post, "Last 21 forward frames:") == between(live, "Last 21 forward frames:")


SLOW_WARN = """
import sys, time, torch
from torch import nn
import ovf
model = nn.Sequential(nn.Linear(2, 2))
ovf.DebugUnderflowOverflow(model, on_nan="warn")
print("ready", flush=True)
while not open(sys.argv[1]).read().startswith("go"):  # the test says when the debugger is gone
    model(torch.ones(1, 2))
    time.sleep(0.05)
model(torch.tensor([[float("nan"), 1.0]]))
print("went on", flush=True)
"""


def test_a_detached_debugger_hands_events_back_to_the_process(debugger, tmp_path):
    # `ovf break-on-nan` on an attached warn-mode process writes on_event=continue; after
    # `detach` nobody would report the NaN. The runtime sees no tracer at the event and
    # acts as the process itself chose: the warn report.
    flag = tmp_path / "flag"
    flag.write_text("wait")
    log = open(tmp_path / "out.txt", "w")
    proc = subprocess.Popen(
        [PYTHON, "-u", "-c", SLOW_WARN, str(flag)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=clean_env(PYTHONPATH=PACKAGE_PARENT),
    )
    try:
        deadline = time.time() + TIMEOUT
        while "ready" not in (tmp_path / "out.txt").read_text():
            assert proc.poll() is None and time.time() < deadline
            time.sleep(0.1)
        out = debugger.run(["ovf break-on-nan", "ovf status", "detach"], pid=proc.pid)
        assert "ovf: the running process (pid %d) is armed" % proc.pid in out, out
        assert "on event: continue" in out
        flag.write_text("go")
        proc.wait(timeout=TIMEOUT)
        text = (tmp_path / "out.txt").read_text()
        assert "Detected inf/nan during batch_number=" in text and "went on" in text, text
        assert (proc.returncode, text.splitlines()[-1]) == (1, WENT_ON), text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
