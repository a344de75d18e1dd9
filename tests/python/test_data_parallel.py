"""Data parallelism as users run it: DistributedDataParallel and FSDP2 (fully_shard, DTensor
parameters) on two Gloo CPU ranks started by torch's launcher, fed by a shuffled
DistributedSampler whose shard on one rank holds the sample that overflows
(tests/e2e/scripts/sharded_loader.py). The oracle, run for each rank on that rank's shard
(dispatch_oracle.py, which shares no code with ovf), names the rank and op that make
the inf from finite values, and none on the other rank; python3 -m ovf.ranks over the
ranks' event summaries must name the same rank, batch, op or module, the bad sample's row
and dataset index, and the other rank as a receiver. Healthy runs never stop."""

import functools
import importlib.util
import json
import os
import re

import pytest
import torch
from build_paths import PYTHON
from ranks_harness import TOP, env, free_port, rank_stdout, run, torchrun

SCRIPT = os.path.join(TOP, "tests", "e2e", "scripts", "sharded_loader.py")
BAD = 37
# FSDP2 on CPU ranks: torch 2.6's fully_shard records an event on the all-gather stream,
# which CPU streams cannot (AttributeError: 'Stream' object has no attribute 'record_event')
FSDP2_ON_CPU = hasattr(torch.cpu.current_stream(), "record_event")
NEEDS_FSDP2_ON_CPU = pytest.mark.skipif(
    not FSDP2_ON_CPU,
    reason=f"torch {torch.__version__}'s FSDP2 cannot run on CPU (its streams record no"
    " events): the main leg's torch runs it",
)
WRAPS = ["ddp", pytest.param("fsdp2", marks=NEEDS_FSDP2_ON_CPU)]
CASES = [
    *(pytest.param("ddp", level) for level in ("module", "ops", "backward")),
    *(
        pytest.param("fsdp2", level, marks=NEEDS_FSDP2_ON_CPU)
        for level in ("module", "ops", "backward")
    ),
]


@functools.cache  # a rank's shard and its verdict are the same for every wrap and level
def oracle(rank):
    out = run([PYTHON, SCRIPT, "--oracle-rank", str(rank), "--bad", str(BAD)], env=env())
    assert out.returncode == 0, out.stdout
    return out.stdout.splitlines()[-1].removeprefix(f"oracle rank {rank}: ")


def bad_batch(stdout):
    """(rank, batch, [indices]) of the batch that held the bad sample."""
    # (not anchored to lines: Accelerate's launcher interleaves its ranks' output)
    for rank, batch, listed in re.findall(r"rank (\d) batch (\d+) indices (\[[\d, ]*\])", stdout):
        if BAD in json.loads(listed):
            return int(rank), int(batch), json.loads(listed)
    raise AssertionError(stdout)


def job_verdict(events, oracle_says, level, loop, rank, batch, indices):
    """python3 -m ovf.ranks over the job's summaries names as the first producer the rank,
    batch and op (with its line, from the oracle's answer) or, in module mode, the
    module's output at the line of the loop's function `loop`, and the bad sample's row;
    returns the verdict's lines."""
    line = oracle_says.rsplit(", ", 1)[1]  # sharded_loader.py:57, Square.forward's
    place = (
        re.escape(f"aten::mul in 1 at {line} in forward")
        if level != "module"
        else rf"the output of 1 at sharded_loader\.py:\d+ in {loop}"
    )
    verdict = run([PYTHON, "-m", "ovf.ranks", str(events)], env=env())
    assert verdict.returncode == 0, verdict.stdout
    lines = verdict.stdout.splitlines()
    assert re.fullmatch(rf"first producer: rank {rank}, batch {batch}, {place}", lines[0]), lines
    assert (
        f"  the first non-finite value (batch {batch}) is in row {indices.index(BAD)} of 4 along"
        f" its first dimension: dataset index {BAD} (Squares)"
    ) in lines, lines
    return lines


@pytest.mark.parametrize("wrap, level", CASES)
def test_the_rank_whose_shard_holds_the_bad_sample_is_named_as_the_oracle_names_it(
    tmp_path, wrap, level
):
    verdicts = {rank: oracle(rank) for rank in (0, 1)}
    events = tmp_path / "events"
    events.mkdir()
    ops = {"module": [], "ops": ["--ops"], "backward": ["--ops", "--backward"]}[level]
    job = run(
        torchrun(
            2,
            tmp_path / "logs",
            "-m",
            "ovf",
            *ops,
            "--on-nan",
            "warn",
            "--event-dir",
            str(events),
            SCRIPT,
            "--wrap",
            wrap,
            "--bad",
            str(BAD),
        ),
        env=env(),
    )
    assert job.returncode == 1, job.stdout  # warn mode: both ranks trained on, NaN reported
    printed = rank_stdout(tmp_path / "logs", 0) + rank_stdout(tmp_path / "logs", 1)
    rank, batch, indices = bad_batch(printed)
    other = 1 - rank
    # the oracle: the bad rank's own computation makes it, the other rank's never does
    assert re.fullmatch(rf"aten::mul in 1 at batch {batch}, sharded_loader\.py:\d+", verdicts[rank])
    assert verdicts[other] == "None"
    lines = job_verdict(events, verdicts[rank], level, "main", rank, batch, indices)
    # The other rank's first non-finite value came out of the gradients' collective where
    # an op ovf watched read it: with the backward pass watched, DDP's reducer copying the
    # all-reduced bucket into .grad, and FSDP2's post-backward node copying the
    # reduce-scatter's output (which Gloo's own thread averaged) into the sharded
    # gradient; at op level alone, FSDP2's sharded gradient (a view of that output) read
    # by the optimizer's add_. DDP's .grad is a copy: at op level alone nothing names it.
    with open(SCRIPT) as f:  # main()'s loop: the model's call, the optimizer's step
        source = f.read().splitlines()
    start = source.index("def main():")
    call = 1 + next(n for n in range(start, len(source)) if "model(x).pow(2)" in source[n])
    step = 1 + next(n for n in range(start, len(source)) if "optimizer.step()" in source[n])
    carried = {
        ("ddp", "backward"): ("c10d::allreduce_", "aten::copy_ in the backward pass"),
        ("fsdp2", "backward"): (
            "c10d::_reduce_scatter_base_",
            "aten::copy_ in the backward pass, the gradient of RegisterPostBackwardFunction in 2"
            f" at sharded_loader.py:{call} in main",
        ),
        ("fsdp2", "ops"): (
            "c10d::_reduce_scatter_base_",
            f"aten::add_ in no module at sharded_loader.py:{step} in main",
        ),
    }.get((wrap, level))
    through = f" through {carried[0]}" if carried else ""
    if carried:
        (summary,) = events.glob(f"ovf-event-rank{other:05d}-*.json")
        received = json.loads(summary.read_text())
        assert (received["role"], received["what"], received["why"]) == (
            "carrier",
            f"the first non-finite value was carried into {carried[1]} (batch {batch})",
            f"it arrived through {carried[0]}, a collective: another rank sent it (python3 -m"
            " ovf.ranks names the rank that made it)",
        ), received
    assert re.fullmatch(
        rf"rank {other} received it later \(\+\d+\.\d+ s\){through}, as a carrier", lines[-1]
    ), lines


@pytest.mark.parametrize("wrap", WRAPS)
def test_a_healthy_job_never_stops(tmp_path, wrap):
    events = tmp_path / "events"
    events.mkdir()
    job = run(
        torchrun(
            2, tmp_path / "logs", "-m", "ovf", "--event-dir", str(events), SCRIPT, "--wrap", wrap
        ),
        env=env(),
    )
    assert job.returncode == 0, job.stdout
    for rank in (0, 1):
        out = rank_stdout(tmp_path / "logs", rank)
        assert out.endswith(f"rank {rank} done\n") and "ovf" not in out, out
    assert os.listdir(events) == []


@pytest.mark.parametrize("wrap", WRAPS)
def test_an_optimizer_step_that_overflows_is_named_on_each_ranks_shard(tmp_path, wrap):
    """FSDP2's parameters are DTensors, whose own tensor dispatches to Python: the step
    check reads each rank's local shard (and its gradient's) under the parameter's path."""
    events = tmp_path / "events"
    events.mkdir()
    job = run(
        torchrun(
            2, tmp_path / "logs", "-m", "ovf", "--on-nan", "warn", "--event-dir", str(events),
            SCRIPT, "--wrap", wrap, "--overflowing-step", "--steps", "1",
        ),
        env=env(),
    )  # fmt: skip
    assert job.returncode == 1, job.stdout  # warn
    for rank in (0, 1):
        (path,) = events.glob(f"ovf-event-rank{rank:05d}-*.json")
        summary = json.loads(path.read_text())
        assert (summary["batch"], summary["kind"], summary["role"], summary["what"]) == (
            0,
            "optimizer step",
            "producer",
            "the first non-finite value was written by optimizer.step (SGD) into 0.weight"
            " (after batch 0)",
        ), summary


@pytest.mark.skipif(
    importlib.util.find_spec("accelerate") is None,
    reason="accelerate is not installed (the users' stack venv has it; Debian's root does not)",
)
@pytest.mark.parametrize("level", ["module", "ops"])
def test_accelerate_launch_names_the_rank_the_oracle_names(tmp_path, level):
    """Started as Accelerate's users start a job: `accelerate launch` (its torch elastic
    launch; `--multi_gpu` is its only multi-process mode without MPI, and the script asks
    for CPU ranks), `-m ovf` in each rank, and the model, optimizer and shuffled loader
    prepared by Accelerate (DDP, its own sharding). The oracle runs each rank's batches as
    the job printed them. Accelerate's loader fetches one batch ahead of the one it hands
    out: ovf follows it, and names the bad sample's dataset index as the rank printed it."""
    events = tmp_path / "events"
    events.mkdir()
    launch = [PYTHON, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2"]
    launch += ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    launch += ["--main_process_ip", "127.0.0.1", "--main_process_port", str(free_port())]
    ops = ["--ops"] if level == "ops" else []
    job = run(
        [*launch, "-m", "ovf", *ops, "--on-nan", "warn", "--event-dir", str(events), SCRIPT]
        + ["--wrap", "accelerate", "--bad", str(BAD)],
        env=env(),
    )
    assert job.returncode == 1, job.stdout[-3000:]  # warn: trained on, NaN reported
    rank, batch, indices = bad_batch(job.stdout)
    other = 1 - rank

    def oracle_over(r):
        printed = re.findall(rf"rank {r} batch \d+ indices (\[[\d, ]*\])", job.stdout)
        out = run(
            [PYTHON, SCRIPT, "--oracle-batches", f"[{','.join(printed)}]", "--bad", str(BAD)],
            env=env(),
        )
        assert out.returncode == 0, out.stdout
        return out.stdout.splitlines()[-1].removeprefix("oracle: ")

    says = oracle_over(rank)
    assert re.fullmatch(rf"aten::mul in 1 at batch {batch}, sharded_loader\.py:\d+", says)
    assert oracle_over(other) == "None"
    lines = job_verdict(events, says, level, "accelerate_main", rank, batch, indices)
    listed = ", ".join(map(str, indices))
    assert f"  batch {batch} held dataset indices {listed} (Squares, 4 of 4)" in lines, lines
    assert re.fullmatch(
        rf"rank {other} received it later \(\+\d+\.\d+ s\), as a carrier", lines[-1]
    )
