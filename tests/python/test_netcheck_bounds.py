"""python3 -m ovf.netcheck --nproc-per-node N as a hostile user drives it (issue 23
item 6): more ranks than this host's memory holds are refused in one line before any
process starts (4096 spawned 311 ranks and 12 GB in a minute on 2 cores), and SIGTERM
or SIGHUP to the front end ends the launcher and every rank with it (they ran on as
orphans), then says so in the verdict."""

import os
import re
import signal
import subprocess
import time

import pytest
from ovf._netcheck_launch import RANK_MIB, process_tree, ranks_that_fit, running
from ranks_harness import PYTHON, env


def test_more_ranks_than_memory_holds_are_refused_before_any_starts():
    started = time.monotonic()
    out = subprocess.run(
        [PYTHON, "-m", "ovf.netcheck", "--nproc-per-node", "4096", "--backend", "gloo"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env(),
    )
    assert (out.returncode, out.stdout) == (2, "")
    said = re.fullmatch(
        rf"ovf netcheck: --nproc-per-node 4096: this host has memory for (\d+) ranks "
        rf"\(each takes about {RANK_MIB} MiB with torch loaded; \d+\.\d GiB available\): "
        rf"give at most (\d+)\n",
        out.stderr,
    )
    assert said and said.group(1) == said.group(2), out.stderr
    # The memory available moves between the child's reading and this one (other
    # processes of the machine): a rank or two either way.
    assert abs(int(said.group(1)) - ranks_that_fit()) <= 2, out.stderr
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_the_front_end_ends_the_launcher_and_every_rank(sig):
    front = subprocess.Popen(
        [PYTHON, "-m", "ovf.netcheck", "--nproc-per-node", "2", "--backend", "gloo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )
    try:
        deadline = time.monotonic() + 60
        started = []
        while len(started) < 3:  # the launcher and its two ranks
            assert time.monotonic() < deadline, "the ranks did not start"
            assert front.poll() is None, front.communicate()
            time.sleep(0.02)
            started = process_tree(front.pid)
        front.send_signal(sig)
        stdout, _ = front.communicate(timeout=60)
        assert front.returncode == 1
        assert stdout.splitlines()[-1] == f"ovf netcheck: FAILED: interrupted by {sig.name}"
        deadline = time.monotonic() + 15
        while [p for p in started if running(p)]:
            left = [p for p in started if running(p)]
            assert time.monotonic() < deadline, f"left running: {left}"
            time.sleep(0.1)
    finally:
        front.kill()
        for pid in process_tree(front.pid):
            os.kill(pid, signal.SIGKILL)
