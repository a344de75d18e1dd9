"""A value that arrives through a collective: two Gloo ranks (scripts/collective_carry.py),
rank 0's own multiplication overflows and the all-reduce (a reduce-scatter, an all-gather)
hands the inf to rank 1. With ops watched, rank 1's first non-finite value is a carrier
whose why-line names the collective, python3 -m ovf.ranks names rank 0 the producer and
rank 1 a receiver through that collective; the collective's own output is never read
(Gloo writes it later), and a healthy job says nothing."""

import json
import os
import re

import pytest
from build_paths import PYTHON
from ranks_harness import TOP, env, rank_stdout, run, torchrun

SCRIPT = os.path.join(TOP, "tests", "e2e", "scripts", "collective_carry.py")
RECEIVED = (
    "it arrived through c10d::allreduce_, a collective: another rank sent it (python3 -m"
    " ovf.ranks names the rank that made it)"
)


def job(tmp_path, *script_args):
    events = tmp_path / "events"
    events.mkdir(parents=True)
    out = run(
        torchrun(
            2, tmp_path / "logs", "-m", "ovf", "--ops", "--on-nan", "warn",
            "--event-dir", str(events), SCRIPT, *script_args,
        ),
        env=env(),
    )  # fmt: skip
    # warn: the ranks train on; one that reported a NaN still exits 1
    assert out.returncode == (0 if "--healthy" in script_args else 1), out.stdout
    return events


def test_the_receiving_rank_names_the_all_reduce_and_the_verdict_groups_it_by_it(tmp_path):
    events = job(tmp_path)
    (received,) = events.glob("ovf-event-rank00001-*.json")
    summary = json.loads(received.read_text())
    line = summary["line"]
    assert re.fullmatch(r"collective_carry\.py:\d+ in main", line), summary
    assert (summary["role"], summary["op"], summary["what"], summary["why"]) == (
        "carrier",
        "aten::add",
        f"the first non-finite value was carried into aten::add in no module at {line} (batch 0)",
        RECEIVED,
    )
    printed = rank_stdout(tmp_path / "logs", 1)
    assert (
        f"ovf: the first non-finite value was carried into aten::add in no module at {line}"
        f" (batch 0)\novf: why: {RECEIVED}\n"
    ) in printed, printed
    verdict = run([PYTHON, "-m", "ovf.ranks", str(events)], env=env())
    assert verdict.returncode == 0, verdict.stdout
    lines = verdict.stdout.splitlines()
    assert re.fullmatch(
        r"first producer: rank 0, batch 0, aten::mul in no module at collective_carry\.py:\d+"
        r" in main",
        lines[0],
    ), lines
    assert re.fullmatch(
        r"rank 1 received it later \(\+\d+\.\d+ s\) through c10d::allreduce_, as a carrier",
        lines[-1],
    ), lines
    # the collective is no op of the ring's: what Gloo writes is not read at its end
    assert "c10d::" not in rank_stdout(tmp_path / "logs", 0).replace(RECEIVED, "")


@pytest.mark.parametrize(
    "flag, collective, carrier",
    [
        ("--reduce-scatter", "c10d::_reduce_scatter_base_", "aten::copy_"),
        ("--all-gather", "c10d::_allgather_base_", "aten::add"),
    ],
)
def test_a_reduce_scatter_and_an_all_gather_name_themselves(tmp_path, flag, collective, carrier):
    """Gloo leaves a reduce-scatter's result in a buffer of its own and copies it into the
    output inside work.wait(), after the collective's end: that aten::copy_ overwrites a
    storage the collective was to fill, so the value it carries in is the collective's.
    An all-gather's output is read by the add after it."""
    events = job(tmp_path, flag)
    (received,) = events.glob("ovf-event-rank00001-*.json")
    summary = json.loads(received.read_text())
    line = summary["line"]
    assert re.fullmatch(r"collective_carry\.py:\d+ in main", line), summary
    assert (summary["role"], summary["what"], summary["why"]) == (
        "carrier",
        f"the first non-finite value was carried into {carrier} in no module at {line} (batch 0)",
        RECEIVED.replace("c10d::allreduce_", collective),
    ), summary
    verdict = run([PYTHON, "-m", "ovf.ranks", str(events)], env=env())
    assert re.fullmatch(
        rf"rank 1 received it later \(\+\d+\.\d+ s\) through {collective}, as a carrier",
        verdict.stdout.splitlines()[-1],
    ), verdict.stdout


def test_a_healthy_job_with_collectives_says_nothing(tmp_path):
    events = job(tmp_path, "--healthy")
    assert os.listdir(events) == []
    events = job(tmp_path / "scattered", "--healthy", "--reduce-scatter")
    assert os.listdir(events) == []
    for rank in (0, 1):
        out = rank_stdout(tmp_path / "logs", rank)
        assert out == f"rank {rank} finite True\n", out
