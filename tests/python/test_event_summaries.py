"""Event summaries and python3 -m ovf.ranks DIR: a real two-rank Gloo job in which rank 1
goes non-finite leaves one summary a rank and the verdict names rank 1 as the producer and
rank 0 as a carrier; a simulated job of 1,024 ranks is judged from its summaries alone;
bad directories and files are one line each."""

import json
import os
import re
import time

from build_paths import run_ovf_child
from ranks_harness import RANKS_SCRIPT, assert_amp_replay, env, run, torchrun

T0 = 1_795_000_000_000_000_000


def ranks_verdict(directory, *args):
    return run_ovf_child(["-m", "ovf.ranks", str(directory), *args])


def summary(rank, world, time_ns, role, **fields):
    out = {
        "ovf_event_summary": 1,
        "rank": rank,
        "local_rank": rank % 8,
        "world_size": world,
        "host": f"node{rank // 8}",
        "pid": 1000 + rank,
        "batch": 18,
        "seq": 400,
        "time_ns": time_ns,
        "events": "nan",
        "kind": "optimizer step",
        "role": role,
        "op": None,
        "module": "blocks.0.fc.weight",
        "line": "train.py:60 in main",
        "what": "the first non-finite value was written by optimizer.step (SGD) into "
        "blocks.0.fc.weight (after batch 18) from its gradient",
        "why": None,
    }
    out.update(fields)
    return out


def write(directory, data, name=None):
    name = name or f"ovf-event-rank{data['rank']:05d}-{data['host']}-{data['pid']}.json"
    with open(os.path.join(directory, name), "w") as f:
        json.dump(data, f)


PRODUCER = {
    "batch": 17,
    "kind": "op",
    "op": "aten::exp",
    "module": "model.block.3",
    "line": "model.py:88 in forward",
    "what": "the first non-finite value was produced by aten::exp in model.block.3 at "
    "model.py:88 in forward (batch 17)",
    "why": "aten::exp of 2 values above 88.7 (float32 overflow)",
}


def test_a_job_of_1024_ranks_is_judged_from_its_summaries_alone(tmp_path):
    missing = {5, 900, 1023}
    for rank in range(1024):
        if rank in missing:
            continue
        if rank == 617:
            write(tmp_path, summary(rank, 1024, T0, "producer", **PRODUCER))
        else:  # the all-reduced gradient reached the others later, through their optimizer
            write(tmp_path, summary(rank, 1024, T0 + (rank + 1) * 1_000_000, "carrier"))
    started = time.perf_counter()
    out = ranks_verdict(tmp_path)
    took = time.perf_counter() - started
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert out.stdout.splitlines() == [
        "first producer: rank 617, batch 17, aten::exp in model.block.3 at model.py:88 in forward",
        "  the first non-finite value was produced by aten::exp in model.block.3 at model.py:88 "
        "in forward (batch 17)",
        "  why: aten::exp of 2 values above 88.7 (float32 overflow)",
        "ranks 0-4,6-616,618-899,901-1022 received it later (+0.001 s to +1.023 s), as carriers",
        "no summary from 3 of 1024 ranks: 5,900,1023 (no event there, or it died before its first)",
        "ovf: the ranks ran on several hosts: the order is as good as their clocks",
    ]
    # The whole command, a fresh interpreter included (it does not import torch).
    print(f"verdict of 1,021 summaries: {took:.2f} s")
    assert took < 10, took
    document = json.loads(ranks_verdict(tmp_path, "--json").stdout)
    assert document["first"]["rank"] == 617 and document["first_is_producer"] is True
    assert len(document["later"]) == 1020 and document["missing_ranks"] == [5, 900, 1023]


def test_a_later_producer_and_a_carrier_before_the_first_producer_are_told(tmp_path):
    write(tmp_path, summary(0, 4, T0 + 2_000_000, "producer", **PRODUCER))
    write(tmp_path, summary(1, 4, T0 + 1_000_000, "carrier", kind="module input"))
    write(tmp_path, summary(2, 4, T0 + 3_000_000, "carrier"))
    write(tmp_path, summary(3, 4, T0 + 5_000_000, "producer", **{**PRODUCER, "batch": 19}))
    out = ranks_verdict(tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == (
        "first producer: rank 0, batch 17, aten::exp in model.block.3 at model.py:88 in forward"
    )
    assert out.stdout.splitlines()[3:] == [
        "rank 1 went non-finite before it (-0.001 s), as a carrier: what it received came from "
        "outside what ovf watched",
        "rank 2 received it later (+0.001 s), as a carrier",
        "rank 3 also made one of its own after (+0.003 s): batch 19, aten::exp in model.block.3 "
        "at model.py:88 in forward",
    ]


def test_unreadable_files_are_named_and_the_others_judged(tmp_path):
    write(tmp_path, summary(0, 2, T0, "producer", **PRODUCER))
    (tmp_path / "ovf-event-rank00001-x-1.json").write_text('{"ovf_event_summary": 1, "ra')
    (tmp_path / "ovf-event-rank00002-x-2.json").write_text('{"ovf_event_summary": 2}')
    (tmp_path / "unrelated.json").write_text("not ours")
    out = ranks_verdict(tmp_path)
    assert out.returncode == 2
    errors = out.stderr.splitlines()
    assert len(errors) == 2, errors
    assert errors[0].startswith(
        f"ovf: cannot read the event summary {tmp_path}/ovf-event-rank00001-x-1.json: "
    )
    assert errors[1] == (
        f"ovf: {tmp_path}/ovf-event-rank00002-x-2.json is not an ovf event summary of version 1 "
        "(no rank, world_size, batch, time_ns, role, what)"
    )
    assert out.stdout.splitlines()[0].startswith("first producer: rank 0, batch 17,")


def test_a_directory_without_summaries_is_one_line(tmp_path):
    out = ranks_verdict(tmp_path)
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (
        f"ovf: no event summaries (ovf-event-*.json) in {tmp_path}: run the job with "
        "python3 -m ovf --event-dir DIR, or OVF_EVENT_DIR=DIR\n"
    )
    out = ranks_verdict(tmp_path / "nowhere")
    assert (out.returncode, out.stderr) == (
        2,
        (
            f"ovf: '{tmp_path}/nowhere' is not there: give a directory of event summaries or a"
            " core file\n"
        ),
    )


def test_an_event_dir_that_is_not_there_is_refused_before_the_run(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('ran')\n")
    out = run_ovf_child(["-m", "ovf", "--event-dir", str(tmp_path / "none"), str(script)])
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (
        f"ovf: --event-dir '{tmp_path}/none' is not a directory: make it first (every rank "
        "writes its own file there)\n"
    )


def two_rank_job(log_dir, *ovf_options):
    """ranks.py on two ranks under python3 -m ovf --on-nan warn: rank 1's blocks.1.amp
    makes inf in batch 2, rank 0 receives it through the gradients' all-reduce."""
    argv = ["-m", "ovf", "--on-nan", "warn", *ovf_options, RANKS_SCRIPT, "--inf-at", "1:2"]
    out = run(torchrun(2, log_dir, *argv, "--steps", "4"), env=env())
    assert out.returncode == 1, out.stdout  # warn: both ranks trained on, and reported a NaN


def test_a_two_rank_job_leaves_a_summary_a_rank_and_the_verdict_names_rank_1(tmp_path):
    events = tmp_path / "events"
    events.mkdir()
    two_rank_job(tmp_path / "logs", "--event-dir", str(events))
    files = sorted(os.listdir(events))
    assert [f.split("-")[2] for f in files] == ["rank00000", "rank00001"], files
    data = [json.load(open(events / f)) for f in files]
    assert {k: data[1][k] for k in ("rank", "world_size", "batch", "kind", "role", "module")} == {
        "rank": 1,
        "world_size": 2,
        "batch": 2,
        "kind": "module output",
        "role": "producer",
        "module": "blocks.1.amp",
    }
    assert data[1]["line"] == "diverge.py:52 in forward"
    # Rank 0 got rank 1's inf through the gradients' all-reduce; its SGD step wrote it.
    assert {k: data[0][k] for k in ("rank", "batch", "kind", "role", "module")} == {
        "rank": 0,
        "batch": 2,
        "kind": "optimizer step",
        "role": "carrier",
        "module": "blocks.0.fc.weight",
    }
    assert data[0]["time_ns"] > data[1]["time_ns"]
    verdict = ranks_verdict(events)
    assert verdict.returncode == 0, verdict.stderr
    lines = verdict.stdout.splitlines()
    assert lines[:2] == [
        "first producer: rank 1, batch 2, the output of blocks.1.amp at diverge.py:52 in forward",
        "  the first non-finite value was the output of blocks.1.amp (batch 2)",
    ]
    assert_amp_replay(lines[2:6])
    assert data[1]["replay"]["op"] == "aten::to", data
    # rank 0's step read the gradient the all-reduce brought: its replay says why not
    assert data[0]["replay"] == {
        "said": "not replayed: SGD.step() read a non-finite gradient of blocks.0.fc.weight, made"
        " before the step (by the backward pass, or received by it): --backward names the op"
        " that made it, and --capture optimizer replays the backward",
        "op": None,
    }, data
    # later by rank 1's replay and the all-reduce: a fraction of a second, more under load
    assert len(lines) == 7, lines
    assert re.fullmatch(r"rank 0 received it later \(\+0\.\d{3} s\), as a carrier", lines[6]), lines


def test_under_torchrun_the_summaries_go_beside_each_ranks_logs_by_default(tmp_path):
    two_rank_job(tmp_path / "logs")
    (run_dir,) = os.listdir(tmp_path / "logs")
    for rank in (0, 1):
        folder = tmp_path / "logs" / run_dir / "attempt_0" / str(rank)
        (name,) = [f for f in os.listdir(folder) if f.endswith(".json")]
        assert name.startswith(f"ovf-event-rank0000{rank}-"), name
    verdict = ranks_verdict(tmp_path / "logs")
    assert verdict.returncode == 0, verdict.stderr
    assert verdict.stdout.splitlines()[0] == (
        "first producer: rank 1, batch 2, the output of blocks.1.amp at diverge.py:52 in forward"
    )
