"""Which samples: a shuffled DataLoader (with and without worker processes) feeds a model
that overflows on one dataset sample; the report of python3 -m ovf and the event summary
name the failing batch's dataset indices exactly as the loader returned them (the dataset
hands each sample's index back, the oracle here), and a healthy run neither stops nor
names any."""

import json
import os
import re

import pytest
from build_paths import REPO, run_ovf_child

SCRIPT = os.path.join(REPO, "tests", "python", "scripts", "loader_samples.py")
BAD = 37


def batches(stdout):
    """[(epoch, step, [indices])] as the loop printed them."""
    return [
        (int(e), int(s), json.loads(i))
        for e, s, i in re.findall(r"^epoch (\d+) step (\d+) indices (\[.*\])$", stdout, re.M)
    ]


@pytest.mark.parametrize("workers", [0, 2])
def test_the_report_and_the_summary_name_the_failing_batchs_dataset_indices(tmp_path, workers):
    out = run_ovf_child(
        [
            "-m",
            "ovf",
            "--event-dir",
            str(tmp_path),
            SCRIPT,
            "--bad",
            str(BAD),
            "--workers",
            str(workers),
        ],
        timeout=180,
    )
    assert out.returncode == 1, out.stderr
    seen = batches(out.stdout)
    (step, indices) = next((s, i) for e, s, i in seen if BAD in i)
    assert seen[-1] == (0, step, indices)  # it stopped in that batch
    text = out.stdout + out.stderr
    assert f"Detected inf/nan during batch_number={step}\n" in text
    listed = ", ".join(map(str, indices))
    # Square's output is the first non-finite value: its row of the bad sample alone
    row = indices.index(BAD)
    rows = (
        f"the first non-finite value (batch {step}) is in row {row} of 8 along its first dimension:"
        f" dataset index {BAD} (Squares)"
    )
    assert (
        f"\novf: {rows}\novf: batch {step} held dataset indices {listed} (Squares, 8 of 8)\n"
        in text
    )
    (name,) = os.listdir(tmp_path)
    with open(tmp_path / name) as f:
        summary = json.load(f)
    assert summary["batch"] == step
    assert summary["samples"] == [{"dataset": "Squares", "total": 8, "indices": indices}]
    assert summary["rows"] == {
        "text": rows,
        "extent": 8,
        "count": 1,
        "first": [row],
        "mixed_by": None,
        "dataset_indices": [BAD],
    }
    verdict = run_ovf_child(["-m", "ovf.ranks", str(tmp_path)])
    assert verdict.returncode == 0, verdict.stderr
    assert (
        f"  {rows}\n  batch {step} held dataset indices {listed} (Squares, 8 of 8)\n"
        in verdict.stdout
    )


def test_at_op_level_the_producing_ops_rows_name_the_sample():
    out = run_ovf_child(["-m", "ovf", "--ops", SCRIPT, "--bad", str(BAD), "--workers", "0"])
    assert out.returncode == 1, out.stderr
    (step, indices) = next((s, i) for e, s, i in batches(out.stdout) if BAD in i)
    text = out.stdout + out.stderr
    assert (
        "ovf: the first non-finite value was produced by aten::mul in 1 at loader_samples.py:"
        in text
    ), text
    assert (
        f"\novf: the first non-finite value (batch {step}) is in row {indices.index(BAD)} of 8"
        f" along its first dimension: dataset index {BAD} (Squares)\n" in text
    ), text


def test_a_healthy_run_names_no_samples(tmp_path):
    out = run_ovf_child(["-m", "ovf", "--event-dir", str(tmp_path), SCRIPT], timeout=180)
    assert out.returncode == 0, out.stderr
    assert out.stdout.endswith("done\n")
    assert len(batches(out.stdout)) == 16  # two epochs of 8 batches: the loader is unchanged
    assert "held dataset indices" not in out.stdout + out.stderr
    assert os.listdir(tmp_path) == []


def test_a_loader_that_fetches_ahead_of_the_model_names_no_samples_rather_than_wrong_ones(
    tmp_path,
):
    out = run_ovf_child(["-m", "ovf", SCRIPT, "--bad", str(BAD), "--ahead"], timeout=180)
    assert out.returncode == 1, out.stderr
    step = next(s for e, s, i in batches(out.stdout) if BAD in i)
    assert f"Detected inf/nan during batch_number={step}\n" in out.stdout + out.stderr
    assert "held dataset indices" not in out.stdout + out.stderr


def test_a_loader_out_of_order_is_not_followed_and_holds_no_more_than_its_prefetch():
    # Indices are queued as the workers are asked for batches and taken as batches come:
    # a loader made with in_order=False must not make the queue grow batch after batch.
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "from torch.utils.data import DataLoader\n"
        "from loader_samples import Squares\n"
        "from ovf import _auto\n"
        "_auto.enable()\n"
        "it = iter(DataLoader(Squares(-1), batch_size=2, num_workers=2, in_order=False))\n"
        "for _ in range(20): next(it)\n"
        "print(len(it.__dict__['_ovf_indices']))\n"
    ) % os.path.dirname(SCRIPT)
    out = run_ovf_child(["-c", code], timeout=180)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "4\n"  # two workers, two batches prefetched each


def _rows_sentence(out):
    return [line for line in out.stdout.splitlines() if "along its first dimension" in line]


@pytest.mark.parametrize("ops", [[], ["--ops"]], ids=["modules", "ops"])
@pytest.mark.parametrize("mode", ["exact", "fast"])
def test_a_device_engines_rows_are_read_again_from_the_tensor_at_the_event(ops, mode):
    """A device returns statistics, not rows: the rows of the first non-finite line are
    read again from its tensor once they say non-finite (OVF_TEST_DEFER=0 sends these
    CPU tensors through the device engine; tests/python/test_gpu.py does it on a GPU),
    and the sentence is the host's."""
    out = run_ovf_child(
        ["-m", "ovf", *ops, SCRIPT, "--bad", str(BAD), "--workers", "0"],
        OVF_TEST_DEFER="0",
        OVF_DEVICE_MODE=mode,
    )
    assert out.returncode == 1, out.stderr
    (step, indices) = next((s, i) for e, s, i in batches(out.stdout) if BAD in i)
    assert _rows_sentence(out) == [
        f"ovf: the first non-finite value (batch {step}) is in row {indices.index(BAD)} of 8"
        f" along its first dimension: dataset index {BAD} (Squares)"
    ], out.stdout


REWRITTEN = """
import sys, torch
class Square(torch.nn.Module):
    def forward(self, x):
        return x * x
net = torch.nn.Sequential(torch.nn.Linear(4, 4), Square())
torch.nn.init.eye_(net[0].weight)
torch.nn.init.zeros_(net[0].bias)
for step in range(6):
    x = torch.ones(8, 4)
    if step == 1:
        x[2, 0] = 1e30
    y = net(x)
    if sys.argv[1] == "rewrite":
        y.copy_(y.roll(3, 0))  # in place, before the statistics arrive: row 5 now
"""


@pytest.mark.parametrize("rewrite", ["keep", "rewrite"])
def test_rows_are_not_named_from_a_tensor_written_after_it_was_measured(rewrite, tmp_path):
    """Fast device mode, statistics three polls late: the module's output is read again
    only while it is unchanged (its version counter); rewritten in place in between, its
    rows now would be wrong (row 5), so none are named (the event summary's rows)."""
    script = tmp_path / "rewritten.py"
    script.write_text(REWRITTEN)
    events = tmp_path / "events"
    events.mkdir()
    p = run_ovf_child(
        ["-m", "ovf", "--event-dir", str(events), str(script), rewrite],
        OVF_TEST_DEFER="3",
        OVF_DEVICE_MODE="fast",
    )
    assert p.returncode == 1, p.stderr
    (name,) = os.listdir(events)
    with open(events / name) as f:
        summary = json.load(f)
    assert summary["batch"] == 1 and summary["module"] == "1", summary
    if rewrite == "rewrite":
        assert summary["rows"] is None
    else:
        assert (summary["rows"]["extent"], summary["rows"]["first"]) == (8, [2]), summary


MASKED = """
import sys, torch
from ovf import _ovf
class Attention(torch.nn.Module):
    def forward(self, x):
        mask = torch.full((8, 8), float("-inf")).triu(1)  # deliberate, every batch
        return torch.softmax(x @ x.T + mask, dim=-1)
net = Attention()
try:
    for batch in range(6):
        x = torch.rand(8, 4)
        if batch == 4 and sys.argv[1] == "bad":
            x[2, 0] = 1e30  # x @ x.T overflows in row 2 and column 2
        net(x)
finally:
    print("row reads", _ovf._device_row_reads(), flush=True)
"""


@pytest.mark.parametrize("run", ["healthy", "bad"])
def test_a_device_tensors_rows_are_read_at_the_event_only_never_for_a_mask(run, tmp_path):
    """--ops through the device engine (OVF_TEST_DEFER=0): a mask's deliberate -inf,
    made every batch, is no first value, and its rows are never read again (on a GPU
    each read is a copy to the host); the overflow's are, in the event's op only."""
    script = tmp_path / "masked.py"
    script.write_text(MASKED)
    p = run_ovf_child(["-m", "ovf", "--ops", str(script), run], OVF_TEST_DEFER="0")
    assert p.returncode == (0 if run == "healthy" else 1), p.stderr[-2000:]
    reads = int(re.search(r"^row reads (\d+)$", p.stdout, re.M).group(1))
    assert reads == 0 if run == "healthy" else 1 <= reads <= 2, p.stdout
