"""Two-rank Gloo jobs on CPU (python3 -m torch.distributed.run) where rank 1 goes
non-finite: only rank 1 reports; in wait mode only rank 1 waits, prints its attach
command, and that very command attaches gdb to it; gcore files of both ranks are
listed and ordered by python3 -m ovf.postmortem."""

import re
import shlex
import shutil
import socket
import subprocess
import time

import pytest
from harness import GDB_LAUNCHER, PACKAGE
from ranks_harness import (
    PYTHON,
    RANKS_SCRIPT,
    TIMEOUT,
    env,
    kill_group,
    rank_pids,
    rank_stdout,
    run,
    torchrun,
    wait_for_rank,
)

requires_gdb = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")
CUT = "----8<----"


def test_only_the_rank_that_goes_non_finite_reports(tmp_path):
    out = run(
        torchrun(2, tmp_path / "logs", "-m", "ovf", RANKS_SCRIPT, "--inf-at", "1:2"), env=env()
    )
    assert out.returncode != 0
    reported = rank_stdout(tmp_path / "logs", 1)
    assert reported.count("Detected inf/nan during batch_number=2\n") == 1, reported
    lines = reported[reported.index("Last 21 forward frames:") :].splitlines()
    replayed = next(i for i, line in enumerate(lines) if line.startswith("ovf: replayed "))
    frames = [line for line in lines[:replayed] if line]
    assert frames[-3:] == [
        "                  blocks.1.amp Amplifier",
        "1.38e-02 8.82e-01 input[0]",
        "     inf      inf output",
    ], frames[-3:]
    # the replay names the op (no collective runs in the model's forward)
    assert lines[replayed + 1] == (
        "ovf: the first non-finite value was produced by aten::to in blocks.1.amp at"
        " diverge.py:29 in forward (batch 2)"
    ), lines
    assert "Detected inf/nan" not in rank_stdout(tmp_path / "logs", 0)


def test_a_replay_sends_no_collective_the_other_ranks_would_not_join(tmp_path):
    # blocks.0 averages its output over the ranks in the forward (a functional
    # collective); rank 1's replay reaches it before blocks.1.amp: sent, it would be
    # paired with rank 0's next all-reduce (a gradient's) and mix the two
    out = run(
        torchrun(
            2, tmp_path / "logs", "-m", "ovf", RANKS_SCRIPT, "--inf-at", "1:2", "--sum-in-forward"
        ),
        env=env(),
    )
    assert out.returncode != 0
    reported = rank_stdout(tmp_path / "logs", 1)
    assert reported.count("Detected inf/nan during batch_number=2\n") == 1, reported
    said = [line for line in reported.splitlines() if "replay" in line]
    assert len(said) == 1 and re.fullmatch(
        r"ovf: the replay of the forward of Net stopped at"
        r" torch\.ops\._c10d_functional\.all_reduce, which the other ranks would not join,"
        r" before any op made a non-finite value \(\d+\.\d\d s\)",
        said[0],
    ), reported
    # rank 0 trained batches 0 and 1 with rank 1 and saw nothing non-finite
    healthy = rank_stdout(tmp_path / "logs", 0)
    assert re.findall(r"^rank 0 step (\d) ", healthy, re.M)[:2] == ["0", "1"], healthy
    assert "Detected inf/nan" not in healthy and "ovf:" not in healthy, healthy


@requires_gdb
def test_wait_mode_stops_only_that_rank_and_its_attach_command_works(tmp_path):
    logs = tmp_path / "logs"
    launcher = subprocess.Popen(
        torchrun(2, logs, "-m", "ovf", "--on-nan", "wait", RANKS_SCRIPT, "--inf-at", "1:2"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env(),
        start_new_session=True,
    )
    try:
        waiting = wait_for_rank(logs, 1, "is waiting for a debugger", launcher)
        ranks = rank_pids(launcher.pid)
        commands = re.findall(
            rf"^    ({re.escape(GDB_LAUNCHER)} -p (\d+) -ex 'ovf frames')$", waiting, re.M
        )
        assert [int(pid) for _, pid in commands] == [ranks[1]], waiting
        host = socket.gethostname()
        assert (
            f"ovf: rank 1 of 2 (process {ranks[1]} on {host}) is waiting for a debugger. "
            f"Attach on {host} with one of:" in waiting
        )
        command = commands[0][0]
        # Rank 0 does not wait for a debugger: it waits in the all_reduce of batch 2, for rank 1.
        rank0 = wait_for_rank(logs, 0, "rank 0 step 1 loss", launcher)
        time.sleep(1)
        assert "waiting for a debugger" not in rank0 and "rank 0 step 2 " not in rank_stdout(
            logs, 0
        )
        assert launcher.poll() is None

        # The command is run as printed, by a user whose gdb knows nothing of ovf.
        home = tmp_path / "home"
        home.mkdir()
        (home / ".gdbinit").write_text("set debuginfod enabled off\n")
        gdb_env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "OVF_PACKAGE_DIR": PACKAGE,
        }
        rank1_core, rank0_core = tmp_path / "rank1.gcore", tmp_path / "rank0.gcore"
        # Rank 0 is blocked in the all_reduce while rank 1 waits: a gcore of it has no
        # non-finite value. (Taken first: once rank 1 is released and killed, rank 0's
        # all_reduce fails and it exits, sooner or later; on the trixie leg it had gone.)
        core0 = subprocess.run(
            [
                "gdb",
                "-batch",
                "-nx",
                "-iex",
                "set debuginfod enabled off",
                "-p",
                str(ranks[0]),
                "-ex",
                f"gcore {rank0_core}",
            ],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=gdb_env,
        )
        assert rank0_core.exists(), core0.stdout + core0.stderr
        gdb = subprocess.run(
            shlex.split(command)
            + [
                "-batch",
                "-ex",
                f"echo {CUT}\\n",
                "-ex",
                "ovf status",
                "-ex",
                f"gcore {rank1_core}",
                "-ex",
                "ovf break-on-nan --carriers",
                "-ex",
                "ovf release",
                "-ex",
                "continue",
                "-ex",
                "kill",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=TIMEOUT,
            env=gdb_env,
        ).stdout
        assert "Traceback" not in gdb and "Python Exception" not in gdb, gdb
        listing = gdb[gdb.index("Last 21 forward frames:") : gdb.index(CUT)]
        assert listing in waiting  # what rank 1 printed before it waited
        assert f"process {ranks[1]} (rank 1 of 2, cpu), started" in gdb
        assert re.search(
            r"^ovf: rank 1 of 2: non-finite value \(nan and inf\) at batch 2, frame \d+\n"
            r"     blocks\.1\.center \(Center\): output abs max nan",
            gdb,
            re.M,
        ), gdb

        post = subprocess.run(
            [PYTHON, "-m", "ovf.postmortem", str(rank0_core), str(rank1_core), "--frames", "1"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=env(),
        )
        assert post.returncode == 0 and post.stderr == "", post.stderr
        assert re.search(
            rf"^{re.escape(str(rank0_core))}: process {ranks[0]} \(rank 0 of 2, cpu\), batch \d+,",
            post.stdout,
            re.M,
        ), post.stdout
        assert f"{rank1_core}: process {ranks[1]} (rank 1 of 2, cpu), batch 2," in post.stdout
        tail = post.stdout.splitlines()[-4:]
        assert re.fullmatch(
            rf"  rank 1 \({re.escape(str(rank1_core))}\)  \S+ \S+  record \d+, batch 2, "
            r"blocks\.1\.amp \(Amplifier\) output",
            tail[1],
        ), tail
        assert re.fullmatch(
            rf"  rank 0 \({re.escape(str(rank0_core))}\)  - +  no non-finite value", tail[2]
        ), tail
        assert tail[3] == f"ovf: rank 1 ({rank1_core}) went non-finite first"
    finally:
        kill_group(launcher)
        launcher.wait(timeout=30)
