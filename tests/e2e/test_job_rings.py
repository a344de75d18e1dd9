"""python3 -m ovf.ranks over the rings themselves: a two-rank DDP job (Gloo, CPU) whose
shard on one rank holds the sample that overflows (scripts/sharded_loader.py), and the same
with FSDP2 for the hung job, read live
through /proc (--pid, --live) and from gcore files of both ranks, must give the verdict its
event summaries give: the producing rank, batch, op, line, why, row and dataset index, and
the other rank clean (blocked in the gradients' all-reduce while the first waits) or a
carrier (both trained on). The oracle of these runs is test_data_parallel.py's."""

import os
import re
import shutil
import subprocess

import pytest
import torch
from harness import PYTHON
from ranks_harness import TIMEOUT, env, kill_group, rank_pids, torchrun, wait_for_rank

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts", "sharded_loader.py")
BAD = 37
requires_gdb = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")
# torch 2.6's fully_shard cannot run on CPU ranks (test_data_parallel.py says why)
FSDP2_ON_CPU = hasattr(torch.cpu.current_stream(), "record_event")
NO_FSDP2 = f"torch {torch.__version__}'s FSDP2 cannot run on CPU: the main leg's torch runs it"


def ranks(*args):
    out = subprocess.run(
        [PYTHON, "-m", "ovf.ranks", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env(),
    )
    return out.returncode, out.stdout.splitlines(), out.stderr


def start(tmp_path, *ovf_args, script_args=(), wrap="ddp"):
    events = tmp_path / "events"
    events.mkdir()
    argv = torchrun(
        2, tmp_path / "logs", "-m", "ovf", "--ops", *ovf_args, "--event-dir", str(events),
        SCRIPT, "--wrap", wrap, "--bad", str(BAD), *script_args,
    )  # fmt: skip
    launcher = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env(),
        start_new_session=True,
    )
    return launcher, events


def gcore(pid, path):
    out = subprocess.run(
        ["gdb", "-batch", "-nx", "-iex", "set debuginfod enabled off", "-p", str(pid)]
        + ["-ex", f"gcore {path}"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert path.exists(), out.stdout + out.stderr


def producer_lines(line_no):
    return [
        rf"first producer: rank 0, batch 0, aten::mul in 1 at sharded_loader\.py:{line_no} in"
        " forward",
        rf"  the first non-finite value was produced by aten::mul in 1 at sharded_loader\.py:"
        rf"{line_no} in forward \(batch 0\)",
        r"  why: aten::mul overflow: results exceed float32's max 3\.40e\+38 \(largest input abs"
        r" max 4\.78e\+29\)",
        r"  verdict: finite in float64 \(abs max \d\.\d\de\+\d\d\): float32's range or precision"
        r" here",
        rf"  the first non-finite value \(batch 0\) is in row 0 of 4 along its first dimension:"
        rf" dataset index {BAD} \(Squares\)",
        rf"  batch 0 held dataset indices {BAD}, 10, 47, 31 \(Squares, 4 of 4\)",
    ]


def assert_lines(lines, patterns):
    assert len(lines) == len(patterns), lines
    for line, pattern in zip(lines, patterns, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)


@requires_gdb
@pytest.mark.parametrize(
    "wrap",
    ["ddp", pytest.param("fsdp2", marks=pytest.mark.skipif(not FSDP2_ON_CPU, reason=NO_FSDP2))],
)
def test_a_job_hung_on_one_rank_is_judged_live_and_from_cores_as_its_summaries(tmp_path, wrap):
    launcher, events = start(tmp_path, "--on-nan", "wait", wrap=wrap)
    try:
        # Rank 0's shard holds the sample (the sampler is seeded): it waits at its first
        # inf, in the forward; rank 1 waits in the backward's all-reduce for it.
        wait_for_rank(tmp_path / "logs", 0, "is waiting for a debugger", launcher)
        pids = rank_pids(launcher.pid)
        wait_for_rank(tmp_path / "logs", 1, "rank 1 batch 0 indices", launcher)
        from_summaries = ranks(events)
        assert from_summaries[0] == 0, from_summaries
        line_no = re.search(r"sharded_loader\.py:(\d+) in forward", from_summaries[1][0])[1]
        first = producer_lines(line_no)
        assert_lines(
            from_summaries[1],
            first
            + [r"no summary from 1 of 2 ranks: 1 \(no event there, or it died before its first\)"],
        )

        live = ranks("--pid", f"{pids[0]},{pids[1]}")
        assert live[0] == 0 and live[2] == "", live
        assert_lines(live[1], first + [rf"rank 1 of 2 \(pid {pids[1]}\) holds no non-finite value"])
        # --live finds the job's processes itself, unless another job with ovf runs here too
        # (the test suite's other shard): then it names the jobs and reads none.
        code, lines, err = ranks("--live")
        if "torch.distributed jobs on this host" in err:
            assert code == 2 and lines == [] and f"{pids[0]},{pids[1]}" in err, err
        else:
            assert (code, lines, err) == live, (code, lines, err)

        cores = [tmp_path / f"rank{rank}.gcore" for rank in (0, 1)]
        for rank, path in enumerate(cores):
            gcore(pids[rank], path)
        from_cores = ranks(*cores)
        assert from_cores[0] == 0 and from_cores[2] == "", from_cores
        assert_lines(
            from_cores[1],
            first + [rf"rank 1 of 2 \({re.escape(str(cores[1]))}\) holds no non-finite value"],
        )
    finally:
        kill_group(launcher)
        launcher.wait()


def test_a_job_that_trained_on_is_judged_live_with_the_receiving_rank_a_carrier(tmp_path):
    go = tmp_path / "go"
    launcher, events = start(tmp_path, "--on-nan", "warn", script_args=("--hold", str(go)))
    try:
        holds = {
            rank: wait_for_rank(tmp_path / "logs", rank, f"rank {rank} holds pid", launcher)
            for rank in (0, 1)
        }
        pids = [int(re.search(rf"rank {r} holds pid (\d+)", holds[r])[1]) for r in (0, 1)]
        code, from_summaries, err = ranks(events)
        assert code == 0, err
        live = ranks("--pid", f"{pids[1]},{pids[0]}")
        assert live[0] == 0 and live[2] == "", live
        # Both ranks trained on: rank 0's later events replaced the snapshot that held the
        # op's line, so the ring names the op without it; all else is as the summaries say.
        line = re.search(r" at sharded_loader\.py:\d+ in forward", from_summaries[0])[0]
        assert live[1] == [text.replace(line, "") for text in from_summaries], live
        assert re.fullmatch(r"rank 1 received it later \(\+\d+\.\d+ s\), as a carrier", live[1][-1])
        go.touch()
        assert launcher.wait(timeout=TIMEOUT) == 1  # warn: the ranks trained on, NaN reported
    finally:
        kill_group(launcher)
        launcher.wait()


def test_bad_sources_are_one_line_each_and_the_rest_is_judged(tmp_path):
    code, lines, err = ranks("--pid", "999999999")
    assert (code, lines, err) == (2, [], "ovf: there is no process 999999999 on this host\n")
    code, lines, err = ranks("--pid", "1x")
    assert code == 2 and "'1x' is not a list of process ids (1234,1235)" in err
    not_core = tmp_path / "notes.txt"
    not_core.write_text("hello\n")
    code, lines, err = ranks(not_core, "--pid", os.getpid())
    assert (code, lines) == (2, []), lines
    assert err == (
        f"ovf: {not_core} is not a core file (not an ELF file)\n"
        f"ovf: no ovf runtime in this process (no symbol ovf_state): start it under `ovf "
        f"break-on-nan` and `run`, or with `python3 -m ovf` (pid {os.getpid()})\n"
    ), err
