"""`ovf watch`, `ovf trace-batches`, attaching to a waiting process, core files."""

import os
import re
import signal
import subprocess
import time

import pytest

from gdb_harness import BUILD, CUT, between, PYTHON, SCRIPT, TIMEOUT, clean_env, requires_gdb, run_gdb, run_python, stop_summary

pytestmark = requires_gdb

DIVERGE = ["--inf-at", "blocks.1.amp:2"]


def test_watch_above_stops_where_the_threshold_is_crossed():
    out = run_gdb(["ovf watch 'blocks.*.amp' --above 1e4", "run", "kill"],
                  ["--args", PYTHON, SCRIPT, "--gain", "blocks.1.amp:2:1e5", "--steps", "3"])
    title, batch, module, _ = stop_summary(out)
    assert (title, batch, module) == ("abs max above 1.00e+04", 2, "blocks.1.amp")
    assert re.search(r"^     blocks.1.amp \(Amplifier\): output abs max 8.47e\+04", out, re.M)
    assert out.count("hit Breakpoint 1, ") == 1


def test_trace_batches_prints_what_the_reference_traces():
    # The reference (python3 -m ovf, warn mode to go past the NaN) traces batch 3 itself.
    ref = run_python(["-m", "ovf", "--on-nan", "warn", "--trace-batches", "3", SCRIPT, *DIVERGE, "--steps", "4"])
    start = ref.stdout.index("\n\n                  *** Starting batch number=3 ***")
    reference_trace = ref.stdout[start : ref.stdout.index("step 3 loss")]
    # Under gdb: stop at the NaN, then trace batch 3 and stop again only from batch 4 on.
    out = run_gdb(["ovf break-on-nan", "run", "ovf trace-batches 3", "ovf break-on-nan --after-batch 4", "continue",
                   "kill"], ["--args", PYTHON, SCRIPT, *DIVERGE, "--steps", "5"])
    trace = out[out.index("\n\n                  *** Starting batch number=3 ***") : out.index("step 3 loss")]
    assert trace == reference_trace
    assert [s[1] for s in re.findall(r"^ovf: (.*) at batch (\d+)", out, re.M)] == ["2", "4"]


def test_attach_to_a_process_waiting_in_wait_mode(tmp_path):
    log = open(tmp_path / "out.txt", "w")
    proc = subprocess.Popen([PYTHON, "-u", "-m", "ovf", "--on-nan", "wait", SCRIPT, *DIVERGE, "--nan-after"],
                            stdout=log, stderr=subprocess.STDOUT,
                            env=clean_env(PYTHONPATH=os.path.join(BUILD, "python")))
    try:
        deadline = time.time() + TIMEOUT
        while "waiting for a debugger" not in (tmp_path / "out.txt").read_text():
            assert proc.poll() is None and time.time() < deadline, (tmp_path / "out.txt").read_text()
            time.sleep(0.2)
        waiting = (tmp_path / "out.txt").read_text()
        assert f"gdb -p {proc.pid} -ex 'ovf frames'" in waiting
        out = run_gdb(["ovf frames", CUT, "ovf break-on-nan", "ovf release", "continue", "py-bt", "kill"],
                      ["-p", str(proc.pid)])
        listing = between(out, "Last 21 forward frames:")
        assert listing in waiting  # the frames the runtime printed before waiting
        assert "ovf: the running process (pid %d) is armed" % proc.pid in out
        assert "ovf: released: a process waiting in wait mode goes on at `continue`" in out
        assert stop_summary(out)[:3] == ("non-finite value (nan and inf)", 2, "blocks.1.center")
        assert "return self.center(h)  # ovf-e2e: center call" in out
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)


def test_kernel_core_from_abort_mode(tmp_path):
    env = clean_env(PYTHONPATH=os.path.join(BUILD, "python"))
    with open("/proc/sys/kernel/core_pattern") as f:
        if f.read().strip() not in ("core", "core.%p"):
            pytest.skip("kernel cores do not go to the working directory here (core_pattern)")
    out = subprocess.run(["sh", "-c", f"ulimit -c unlimited && exec {PYTHON} -m ovf --on-nan abort "
                          f"{SCRIPT} {' '.join(DIVERGE)}"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=TIMEOUT)
    assert out.returncode in (-signal.SIGABRT, 128 + signal.SIGABRT), out.stderr
    cores = [p for p in os.listdir(tmp_path) if p.startswith("core")]
    if not cores:
        pytest.skip("no core file was written (core dumps disabled?)")
    report = out.stdout[out.stdout.index("Last 21 forward frames:") :]
    gdb = run_gdb(["ovf status", "ovf frames", CUT], [PYTHON, str(tmp_path / cores[0])])
    assert "detection: non-finite seen; batch 2;" in gdb and "on event: abort" in gdb
    assert report.startswith(between(gdb, "Last 21 forward frames:"))


def test_gcore_file_and_a_truncated_copy(tmp_path):
    core = tmp_path / "gcore"
    live = run_gdb(["ovf break-on-nan", "run", "ovf frames", CUT, f"gcore {core}", "kill"],
                   ["--args", PYTHON, SCRIPT, *DIVERGE])
    post = run_gdb(["ovf frames", CUT], [PYTHON, str(core)])
    assert between(post, "Last 21 forward frames:") == between(live, "Last 21 forward frames:")
    # Cut short (a disk that filled up): gdb loads what is there, ovf says what it cannot read.
    for size in (os.path.getsize(core) // 2, 4096):
        truncated = tmp_path / f"truncated-{size}"
        with open(core, "rb") as src, open(truncated, "wb") as dst:
            dst.write(src.read(size))
        out = run_gdb(["ovf frames", CUT], [PYTHON, str(truncated)])
        assert re.search(r"^(ovf: (no ovf ring in this core file|cannot read ovf_state|no process)|"
                         r"Last \d+ forward frames:)", out, re.M), out
