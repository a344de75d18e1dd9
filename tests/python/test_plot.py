"""The picture (ovf plot): DebugUnderflowOverflow.plot() in a training process and
`python3 -m ovf.postmortem CORE --plot` on a kernel core draw what the ring holds.
Each drawn matrix is compared, value for value, with the frames the ring reader
lists (`ovf frames --json`); the files must decode, at the size the plot says;
matplotlib never loads in the training process; 300 modules fold into rows a
person can read."""

import dataclasses
import fnmatch
import json
import math
import os
import resource
import subprocess
import xml.etree.ElementTree as ElementTree

import pytest
from build_paths import WENT_ON
from matplotlib import image
from ovf_plugin import plot
from ovf_plugin.plot import folding
from ovf_ring.errors import OvfError
from ranks_harness import PYTHON, TOP, env, kernel_cores_here

DIVERGE = os.path.join(TOP, "tests", "e2e", "scripts", "diverge.py")

# A training script that keeps the DebugUnderflowOverflow: blocks.0.amp's gain grows
# tenfold each batch, blocks.1.amp's output is inf from batch 2 on (on_nan="warn": the
# run goes on). Then it draws, and prints what it drew and the ring's own listing.
CHILD = r"""
import json, os, sys
sys.path.insert(0, os.path.dirname(DIVERGE))
import torch, ovf
from ovf import _ovf
import diverge
from ovf_ring import listing
from ovf_ring.proc_target import ProcTarget
from ovf_ring.ring import locate

torch.manual_seed(0)
model = diverge.Net()
debug = ovf.DebugUnderflowOverflow(model, on_nan="warn", ops=OPS)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
data = torch.randn(4, 8)
for step in range(4):
    model.get_submodule("blocks.0.amp").gain = 10.0 ** step
    model.get_submodule("blocks.1.amp").gain = 1e39 if step >= 2 else 1.0
    optimizer.zero_grad()
    model(data).pow(2).mean().backward()
    optimizer.step()
drawn = {name: debug.plot(os.path.join(OUT, name), **options) for name, options in PLOTS}
ring = locate(ProcTarget(os.getpid(), {"ovf_state": _ovf.state_address()}))
print(json.dumps({
    "drawn": drawn,
    "listing": listing.data(ring, listing.Selection(count=1 << 20, ops=OPS)),
    "first": ring.header.first_nonfinite_seq,
    "matplotlib": "matplotlib" in sys.modules,
}))
"""


def _train_and_plot(tmp_path, plots, ops=False):
    code = f"DIVERGE = {DIVERGE!r}\nOUT = {str(tmp_path)!r}\nOPS = {ops!r}\nPLOTS = {plots!r}\n"
    out = subprocess.run(
        [PYTHON, "-c", code + CHILD],
        env=env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (out.returncode, out.stderr.splitlines()[-1]) == (1, WENT_ON), out.stderr  # warn
    return json.loads(out.stdout.splitlines()[-1])


def _label(frame):
    if frame["module"] == "":
        return f"<root {frame['class']}>"
    return f"{frame['module']} ({frame['class']})"


def _cell(lines, kinds):
    """(abs max, non-finite) of the lines of `kinds`: the largest abs max of the
    ones with a finite element, and whether any held NaN or Inf."""
    value, bad = None, False
    for line in lines:
        if line["kind"] not in kinds or "abs_max" not in line or line["numel"] == 0:
            continue
        nonfinite = line["nan"] + line["pos_inf"] + line["neg_inf"]
        bad = bad or nonfinite > 0
        if nonfinite < line["numel"]:
            value = line["abs_max"] if value is None else max(value, line["abs_max"])
    return value, bad


def expected(listing, batches=False, module=None, last=None):
    """(rows, columns, values, non-finite) that a plot of the ring must draw,
    from the frames the ring reader lists, oldest first."""
    frames = [
        f for f in listing["frames"] if module is None or fnmatch.fnmatchcase(f["module"], module)
    ]
    keys = sorted({f["batch"] for f in frames}) if batches else [f["seq"] for f in frames]
    keys = keys[-last:] if last else keys
    column = {key: i for i, key in enumerate(keys)}
    kept = [f for f in frames if (f["batch"] if batches else f["seq"]) in column]
    forward = []  # the forward's order: the first batch's frames
    for f in frames:
        if f["batch"] == frames[0]["batch"] and _label(f) not in forward:
            forward.append(_label(f))
    rows = sorted({_label(f) for f in kept}, key=forward.index)
    values = [[None] * len(keys) for _ in rows]
    nonfinite = [[False] * len(keys) for _ in rows]
    for f in kept:
        r, c = rows.index(_label(f)), column[f["batch"] if batches else f["seq"]]
        value, bad = _cell(f["lines"], ("output",))
        if value is not None and (values[r][c] is None or value > values[r][c]):
            values[r][c] = value
        nonfinite[r][c] = nonfinite[r][c] or bad
    columns = [str(k) if batches else f"record {k}" for k in keys]
    return rows, columns, values, nonfinite


def _first_frame(listing, seq):
    return next(f for f in listing["frames"] if seq in [line["seq"] for line in f["lines"]])


def _check_png(path, drawn):
    assert os.path.getsize(path) > 20_000
    pixels = image.imread(path)
    assert pixels.shape == (drawn["size"][1], drawn["size"][0], 4)
    assert pixels.min() < pixels.max()  # not a blank picture


def test_the_api_draws_the_rings_values_and_never_loads_matplotlib_itself(tmp_path):
    plots = [
        ("frames.png", {}),
        ("batches.png", {"batches": True}),
        ("module.svg", {"module": "blocks.1.*"}),
        ("last.png", {"last": 5}),
    ]
    run = _train_and_plot(tmp_path, plots)
    assert run["matplotlib"] is False
    listing = run["listing"]
    for name, options in plots:
        drawn = run["drawn"][name]
        rows, columns, values, nonfinite = expected(listing, **options)
        assert drawn["rows"] == rows, name
        assert drawn["columns"] == columns, name
        assert drawn["values"] == values, name
        assert drawn["nonfinite"] == nonfinite, name
    frames = run["drawn"]["frames.png"]
    assert frames["rows"] == [
        "blocks.0.fc (Linear)",
        "blocks.0.amp (Amplifier)",
        "blocks.0.center (Center)",
        "blocks.0 (Block)",
        "blocks.1.fc (Linear)",
        "blocks.1.amp (Amplifier)",
        "blocks.1.center (Center)",
        "blocks.1 (Block)",
        "blocks.2.fc (Linear)",
        "blocks.2.amp (Amplifier)",
        "blocks.2.center (Center)",
        "blocks.2 (Block)",
        "head (Linear)",
        "<root Net>",
    ]
    assert len(frames["columns"]) == 4 * 14
    # The gain grows tenfold a batch: so does blocks.0.amp's abs max, until batch 2's
    # backward (through blocks.1.amp's inf) made every weight NaN.
    amp = run["drawn"]["batches.png"]["values"][1]
    fc = run["drawn"]["batches.png"]["values"][0]
    assert all(math.isclose(amp[b], fc[b] * 10.0**b, rel_tol=1e-6) for b in range(3))
    assert fc[3] is None and amp[3] is None
    assert run["drawn"]["batches.png"]["nonfinite"][0] == [False, False, False, True]
    # The first non-finite value: blocks.1.amp's output in batch 2, framed where it is.
    first = _first_frame(listing, run["first"])
    assert (first["module"], first["batch"]) == ("blocks.1.amp", 2)
    assert frames["marks"][0] == {
        "row": 5,
        "column": [f["seq"] for f in listing["frames"]].index(first["seq"]),
        "kind": "first",
        "text": f"first non-finite: record {run['first']}, batch 2, blocks.1.amp (Amplifier) "
        "output",
    }
    assert run["drawn"]["batches.png"]["marks"][0]["row"] == 5
    assert run["drawn"]["batches.png"]["marks"][0]["column"] == 2
    assert run["drawn"]["last.png"]["marks"][0]["row"] is None  # out of the newest 5 frames
    for name in ("frames.png", "batches.png", "last.png"):
        _check_png(tmp_path / name, run["drawn"][name])
    svg = ElementTree.parse(tmp_path / "module.svg").getroot()
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    # The lower panel: blocks.1.amp first (non-finite in batches 2 and 3), one point a batch.
    series = run["drawn"]["batches.png"]["series"]
    assert series[0]["label"] == "blocks.1.amp (Amplifier)"
    assert series[0]["points"] == [
        [b, amp_b, b >= 2] for b, amp_b in enumerate(run["drawn"]["batches.png"]["values"][5])
    ]


def test_op_records_as_rows(tmp_path):
    # one block's ops: fewer rows than folding starts at, on every torch (torch 2.x
    # records more kinds of ops than 1.13)
    run = _train_and_plot(
        tmp_path, [("ops.png", {"ops": True, "batches": True, "module": "blocks.1*"})], ops=True
    )
    drawn, listing = run["drawn"]["ops.png"], run["listing"]
    ops = [
        op
        for op in [op for f in listing["frames"] for op in f["ops"]] + listing["trailing_ops"]
        if fnmatch.fnmatchcase(op["module"] or "", "blocks.1*")
    ]
    assert ops, "the op observer recorded nothing"
    assert len(drawn["rows"]) < 80, drawn["rows"]
    cells = {}
    for op in ops:
        label = f"{op['module'] or '(no module)'}: {op['op']}" + (
            " (backward)" if op["backward"] else ""
        )
        cells.setdefault((label, str(op["batch"])), []).append(op)
    got = {
        (row, column): (value, bad)
        for row, values, flags in zip(
            drawn["rows"], drawn["values"], drawn["nonfinite"], strict=True
        )
        for column, value, bad in zip(drawn["columns"], values, flags, strict=False)
        if (row, column) in cells
    }
    assert got == {key: _cell(lines, ("op",)) for key, lines in cells.items()}
    assert len(drawn["rows"]) == len({label for label, _ in cells})
    assert "blocks.1.amp: aten::mul" in drawn["rows"]
    _check_png(tmp_path / "ops.png", drawn)


@pytest.fixture(scope="module")
def abort_core(tmp_path_factory):
    """A kernel core of diverge.py under `python3 -m ovf --on-nan abort`: inf at batch 2."""
    why = kernel_cores_here()
    if why:
        pytest.skip(why)
    hard = resource.getrlimit(resource.RLIMIT_CORE)[1]  # not 0: kernel_cores_here
    work = tmp_path_factory.mktemp("abort")
    subprocess.run(
        [PYTHON, "-m", "ovf", "--on-nan", "abort", DIVERGE, "--inf-at", "blocks.1.amp:2"],
        cwd=work,
        env=env(),
        capture_output=True,
        timeout=300,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (hard, hard)),
    )
    cores = [name for name in os.listdir(work) if name.startswith("core")]
    if not cores:
        pytest.skip("no core file was written (core dumps disabled?)")
    return os.path.join(work, cores[0])


def test_postmortem_plots_a_core(tmp_path, abort_core):
    from ovf_ring import listing, postmortem

    out = subprocess.run(
        [
            PYTHON,
            "-m",
            "ovf.postmortem",
            abort_core,
            "--frames",
            "0",
            "--plot",
            str(tmp_path / "core.png"),
            "--batches",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env(),
    )
    assert out.returncode == 0, out.stderr
    core = postmortem.open_core(abort_core)
    try:
        first = core.ring.header.first_nonfinite_seq
        lines = out.stdout.splitlines()
        # lines 2-5: what the replay at the event found (test_postmortem checks them)
        assert lines[2].startswith("  replay: replayed the forward of Net "), lines
        assert lines[6:] == [
            f"ovf: wrote {tmp_path / 'core.png'}: 14 rows x 3 batches, 1 non-finite cell",
            f"     first non-finite: record {first}, batch 2, blocks.1.amp (Amplifier) output; "
            "event (inf) here",
        ]
        # The same drawing in this process, against the core's listing.
        drawn, _ = plot.plot(core.ring, str(tmp_path / "again.png"), plot.Options(batches=True))
        picture_title = plot.collect(core.ring).title
        frames = listing.data(core.ring, listing.Selection(count=1 << 20))
    finally:
        core.close()
    rows, columns, values, nonfinite = expected(frames, batches=True)
    assert (drawn["rows"], drawn["columns"]) == (rows, columns)
    assert (drawn["values"], drawn["nonfinite"]) == (values, nonfinite)
    assert [row.count(True) for row in drawn["nonfinite"]] == [0] * 5 + [1] + [0] * 8
    _check_png(tmp_path / "core.png", drawn)
    with open(tmp_path / "core.png", "rb") as a, open(tmp_path / "again.png", "rb") as b:
        assert a.read() == b.read()  # one drawing, wherever it runs
    # The title names the run: its script (the event snapshot's) and model.
    assert picture_title == f"ovf plot: {DIVERGE} (Net)"


def test_postmortem_plot_errors(tmp_path, abort_core):
    out = subprocess.run(
        [PYTHON, "-m", "ovf.postmortem", abort_core, "--frames", "0", "--plot", "x.gif"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env(),
        cwd=tmp_path,
    )
    assert out.returncode == 2
    assert out.stderr == "ovf: --plot x.gif: the file name must end in .png, .svg or .pdf\n"
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------- the drawing alone


def _big_picture(blocks=12, names=25, with_index=True):
    rows = [
        (f"layers.{b}.part{n} (Linear)" if with_index else f"part_{b}_{n} (Linear)")
        for b in range(blocks)
        for n in range(names)
    ]
    bad = min(7, blocks - 1) * names + min(3, names - 1)  # layers.7.part3 in batch 2
    cells = [
        [i, c, float(10 ** (i % 7) * (c + 1)), i == bad and c == 2]
        for i in range(len(rows))
        for c in range(4)
    ]
    return plot.Picture(
        title="ovf plot: big $model$ (Net)",
        subtitle="pid 1, not distributed, cpu",
        columns_are="batch",
        value_is="log10 of the abs max of each module's outputs",
        rows=rows,
        columns=[{"label": str(c), "batch": c} for c in range(4)],
        cells=cells,
        marks=[{"row": bad, "column": 2, "kind": "first", "text": "first $non$-finite"}],
    )


def test_300_modules_fold_into_one_row_per_repeated_module(tmp_path):
    picture = _big_picture()
    drawn = plot.render(picture, str(tmp_path / "big.png"))
    assert drawn["rows"] == [f"layers.[0-11].part{n} (Linear)  x12" for n in range(25)]
    # A folded cell holds the largest value of its rows, non-finite if any of them is.
    for n in range(25):
        members = [b * 25 + n for b in range(12)]
        assert drawn["values"][n] == [
            max(float(10 ** (i % 7) * (c + 1)) for i in members) for c in range(4)
        ]
    assert [c for c, bad in enumerate(drawn["nonfinite"][3]) if bad] == [2]
    assert sum(map(sum, drawn["nonfinite"])) == 1
    assert drawn["marks"][0]["row"] == 3 and drawn["marks"][0]["column"] == 2
    _check_png(tmp_path / "big.png", drawn)
    width, height = drawn["size"]
    assert width <= 2400 and height <= 1400  # 25 rows: it fits a screen


def test_300_modules_without_repeated_blocks_keep_every_row(tmp_path):
    drawn = plot.render(_big_picture(with_index=False), str(tmp_path / "flat.png"))
    assert len(drawn["rows"]) == 300
    _check_png(tmp_path / "flat.png", drawn)
    assert drawn["size"][1] <= 60 * 100 + 1000  # capped at 60 inches of rows


def test_ranges_and_folded_labels():
    assert folding._ranges([0, 1, 2, 5, 7, 8]) == "[0-2,5,7-8]"
    picture = plot.Picture(
        title="t",
        subtitle="s",
        columns_are="frame",
        value_is="v",
        rows=["enc.0.a (A)", "enc.1.a (A)", "dec.0.a (A)", "enc.3.a (B)"],
        columns=[{"label": "record 1", "batch": 0}],
        cells=[[0, 0, 2.0, False], [1, 0, 3.0, True], [2, 0, 5.0, False], [3, 0, 7.0, False]],
    )
    labels, merged, mapping = plot.fold(picture, max_rows=3)
    assert labels == ["enc.[0-1].a (A)  x2", "dec.0.a (A)", "enc.3.a (B)"]
    assert mapping == [0, 0, 1, 2]
    assert merged == {(0, 0): [3.0, True], (1, 0): [5.0, False], (2, 0): [7.0, False]}
    assert plot.fold(picture, max_rows=4)[0] == picture.rows  # few enough: nothing folds


def test_what_cannot_be_drawn_is_one_error(tmp_path):
    picture = _big_picture(blocks=1, names=2)
    with pytest.raises(OvfError, match=r"^ovf plot: .*x\.jpg: the file name must end in"):
        plot.render(picture, str(tmp_path / "x.jpg"))
    with pytest.raises(OvfError, match=r"^ovf plot: cannot write .*: "):
        plot.render(picture, str(tmp_path / "no" / "such" / "dir.png"))
    empty = plot.Picture(**{**dataclasses.asdict(picture), "rows": [], "cells": [], "marks": []})
    with pytest.raises(OvfError, match="^ovf plot: nothing to draw"):
        plot.render(empty, str(tmp_path / "empty.png"))
    assert os.listdir(tmp_path) == []


def test_a_picture_survives_json(tmp_path):
    picture = _big_picture(blocks=2, names=3)
    again = plot.Picture.from_json(picture.to_json())
    assert again == picture
    a = plot.render(picture, str(tmp_path / "a.png"))
    b = plot.render(again, str(tmp_path / "b.png"))
    assert a == b
    assert math.isclose(a["values"][0][0], 1.0)


MIDWAY = r"""
import json, sys, torch, ovf

class Head(torch.nn.Module):
    def forward(self, x):
        y = torch.log(torch.relu(x) - torch.relu(x))  # zeros: -inf
        # a debugger stopped at that op sees this: the module's frame is not written
        DRAWN.update(debug.plot(PATH))
        return y

model = torch.nn.Sequential(torch.nn.Linear(4, 4), Head())
debug = ovf.DebugUnderflowOverflow(model, on_nan="warn", ops=True)
DRAWN = {}
model(torch.randn(2, 4))
print(json.dumps(DRAWN))
"""


def test_a_plot_while_the_op_s_module_runs_marks_its_value(tmp_path):
    path = str(tmp_path / "midway.png")
    out = subprocess.run(
        [PYTHON, "-c", f"PATH = {path!r}\n" + MIDWAY],
        env=env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (out.returncode, out.stderr.splitlines()[-1]) == (1, WENT_ON), out.stderr  # warn
    drawn = json.loads(out.stdout.splitlines()[-1])
    assert drawn["rows"] == ["0 (Linear)", "1"], drawn
    assert drawn["columns"][-1] == "after the newest frame", drawn
    assert drawn["nonfinite"][1][-1] is True and sum(map(sum, drawn["nonfinite"])) == 1, drawn
