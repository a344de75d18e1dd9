"""`ovf samples` and the stop summary's rows: a shuffled DataLoader feeds a model that
overflows on one dataset sample (tests/python/scripts/loader_samples.py); gdb and LLDB
stop there and name the failing batch's dataset indices and the bad sample's row, live
and from the core, as the loop printed them (the dataset hands each sample's index back:
the oracle here); python3 -m ovf.postmortem reads the same from gdb's core."""

import json
import os
import re

from harness import PYTHON, TOP, clean_env, run_python

SCRIPT = os.path.join(TOP, "tests", "python", "scripts", "loader_samples.py")
BAD = 37


def failing_batch(out):
    """(step, [indices]) of the batch the loop printed with the bad sample."""
    for step, listed in re.findall(r"^epoch 0 step (\d+) indices (\[.*\])$", out, re.M):
        if BAD in json.loads(listed):
            return int(step), json.loads(listed)
    raise AssertionError(f"no batch held sample {BAD}:\n{out}")


def test_the_debuggers_name_the_batchs_samples_and_the_bad_row_live_and_from_cores(
    debugger, tmp_path
):
    core = tmp_path / "core"
    out = debugger.run(
        [
            "ovf break-on-nan",
            "run",
            "ovf samples",
            "ovf samples --batch 0",
            debugger.gcore(core),
            "kill",
        ],
        program=[PYTHON, "-m", "ovf", SCRIPT, "--bad", str(BAD), "--workers", "0"],
        env=clean_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"),
        cwd=TOP,
        timeout=300,
    )
    step, indices = failing_batch(out)
    assert step > 0, out  # so that --batch 0 lists another batch
    row = indices.index(BAD)
    rows = (
        f"the first non-finite value (batch {step}) is in row {row} of 8 along its first dimension:"
        f" dataset index {BAD} (Squares)"
    )
    held = f"batch {step} held dataset indices {', '.join(map(str, indices))} (Squares, 8 of 8)"
    assert debugger.hits(out) == 1, out
    assert f"\n     {rows}\n     {held}\n" in out, out  # the stop summary
    listing = f"{held}\n{rows}\n"
    assert listing in out, out  # ovf samples: every batch of the epoch so far, then the rows
    assert re.search(r"\nbatch 0 held dataset indices [\d, ]+ \(Squares, 8 of 8\)\n", out), out
    post = debugger.run(["ovf samples"], core=core, timeout=120)
    assert listing in post, post
    if debugger.name == "gdb":  # an ELF core: python3 -m ovf.postmortem reads it too
        summary = run_python(["-m", "ovf.postmortem", str(core)]).stdout
        assert f"\n  {rows}\n  {held}\n" in summary, summary
        doc = json.loads(run_python(["-m", "ovf.postmortem", "--json", str(core)]).stdout)
        first = doc["cores"][0]["first_nonfinite"]
        assert first["rows"]["dataset_indices"] == [BAD], first
        assert first["samples"] == [{"dataset": "Squares", "total": 8, "indices": indices}]


def test_without_a_dataloader_the_rows_are_named_and_ovf_samples_says_why(debugger):
    out = debugger.run(
        ["ovf break-on-nan", "run", "ovf samples", "kill"],
        program=[PYTHON, "-m", "ovf", os.path.join(TOP, "examples", "div_zero.py")],
        env=clean_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"),
        cwd=TOP,
        timeout=300,
    )
    assert debugger.hits(out) == 1, out
    # the example's own account: sample 3 of batch 2 is all padding, 0 / 0
    assert (
        "\n     the first non-finite value (batch 2) is in row 3 of 8 along its first dimension\n"
        in out
    ), out
    assert (
        "ovf: no dataset indices are kept: ovf names the samples a DataLoader (torch.utils.data)"
        " gave the last 16 batches, in Python mode (python3 -m ovf, ovf.enable)\n" in out
    ), out
