"""`ovf plot` under gdb and LLDB: live at the first non-finite value and on a core saved at
the same stop. The matrix drawn equals the frames `ovf frames --json` lists in the same
stop, value for value; the files decode at the size the command reports."""

import hashlib
import json
import os
import re
import xml.etree.ElementTree as ElementTree

from harness import CUT_MARK, DIVERGE, PYTHON, SCRIPT, abort_core, between
from matplotlib import image


def _json(out, start):
    return json.loads(between(out, start))


def _label(frame):
    if frame["module"] == "":
        return f"<root {frame['class']}>"
    return f"{frame['module']} ({frame['class']})"


def _output(frame):
    """The frame's cell: the largest output abs max, and whether an output is non-finite."""
    value, bad = None, False
    for line in frame["lines"]:
        if line["kind"] != "output" or "abs_max" not in line:
            continue
        nonfinite = line["nan"] + line["pos_inf"] + line["neg_inf"]
        bad = bad or nonfinite > 0
        if nonfinite < line["numel"]:
            value = line["abs_max"] if value is None else max(value, line["abs_max"])
    return value, bad


def test_plot_live_and_on_a_core(debugger, tmp_path):
    core = tmp_path / "saved-core"
    live = debugger.run(
        [
            "ovf break-on-nan",
            "run",
            f"ovf plot {tmp_path / 'live.png'}",
            debugger.cut(),
            f"ovf plot {tmp_path / 'data.png'} --json",
            debugger.cut(),
            "ovf frames 100000 --json",
            debugger.cut(),
            f"ovf plot {tmp_path / 'batches.svg'} --batches --last 2 --module 'blocks.1.*'",
            debugger.cut(),
            f"ovf plot {tmp_path / 'wrong.gif'}",
            debugger.gcore(core),
            "kill",
        ],
        program=[PYTHON, SCRIPT, *DIVERGE],
    )
    drawn = _json(live, '{"rows": ')
    frames = _json(live, '{\n "pid": ')["frames"]
    assert len(frames) == 34  # batches 0 and 1, and batch 2 up to blocks.1.amp
    rows = []
    for frame in frames:
        if _label(frame) not in rows:
            rows.append(_label(frame))
    assert drawn["rows"] == rows and len(rows) == 14
    assert drawn["columns"] == [f"record {f['seq']}" for f in frames]
    values = [[None] * len(frames) for _ in rows]
    nonfinite = [[False] * len(frames) for _ in rows]
    for column, frame in enumerate(frames):
        row = rows.index(_label(frame))
        values[row][column], nonfinite[row][column] = _output(frame)
    assert drawn["values"] == values
    assert drawn["nonfinite"] == nonfinite
    # The first non-finite value, blocks.1.amp's output, framed in the last column.
    first = re.search(r"first non-finite: record (\d+), batch 2, blocks\.1\.amp", live)
    assert int(first.group(1)) in [line["seq"] for line in frames[-1]["lines"]]
    assert drawn["marks"] == [
        {
            "row": 5,
            "column": 33,
            "kind": "first",
            "text": f"first non-finite: record {first.group(1)}, batch 2, blocks.1.amp "
            "(Amplifier) output; event (inf) here",
        }
    ]
    summary = (
        f"ovf: wrote {tmp_path / 'live.png'}: 14 rows x 34 frames, 1 non-finite cell\n"
        f"     first non-finite: record {first.group(1)}, batch 2, blocks.1.amp (Amplifier) "
        "output; event (inf) here\n"
    )
    assert between(live, "ovf: wrote ", CUT_MARK).startswith(summary)
    pixels = image.imread(tmp_path / "live.png")
    assert pixels.shape == (drawn["size"][1], drawn["size"][0], 4)
    assert (tmp_path / "live.png").stat().st_size > 20_000
    assert f"ovf: wrote {tmp_path / 'batches.svg'}: 3 rows x 2 batches, 1 non-finite cell" in live
    svg = ElementTree.parse(tmp_path / "batches.svg").getroot()
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    wrong = f"ovf plot: {tmp_path / 'wrong.gif'}: the file name must end in .png, .svg or .pdf"
    assert wrong in live
    assert not (tmp_path / "wrong.gif").exists()

    # The saved core: the same picture.
    post = debugger.run([f"ovf plot {tmp_path / 'core.png'} --json", debugger.cut()], core=core)
    from_core = _json(post, '{"rows": ')
    assert {k: v for k, v in from_core.items() if k != "marks"} == {
        k: v for k, v in drawn.items() if k != "marks"
    }
    assert from_core["marks"] == drawn["marks"]
    assert image.imread(tmp_path / "core.png").shape == pixels.shape


def test_plot_never_writes_over_the_open_core(debugger, tmp_path):
    """Issue 23 item 1: a hard link or a symlink to the core, or the core itself, named as
    the picture: one line each, the core byte for byte as it was, no scratch file left."""
    core, _ = abort_core(tmp_path)
    os.link(core, tmp_path / "hard.png")
    (tmp_path / "soft.png").symlink_to(core.name)
    with open(core, "rb") as f:
        before = hashlib.sha256(f.read()).hexdigest()
    out = debugger.run(
        [f"ovf plot {tmp_path / name}" for name in ("hard.png", "soft.png", core.name)], core=core
    )
    for name in ("hard.png", "soft.png", core.name):
        assert (
            f"ovf plot: {tmp_path / name} is the core this picture is drawn from ({core}): "
            "not overwritten; choose another file name"
        ) in out
    with open(core, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == before
    assert sorted(os.listdir(tmp_path)) == sorted([core.name, "hard.png", "soft.png"])
