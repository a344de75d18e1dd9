"""`ovf plot`: one picture of where a run's values blow up.

A heat map of log10 of each module's output abs max over frames or batches,
non-finite cells in a colour of their own, the first non-finite value and the
latest event framed and labelled; under it, the abs max of the modules that came
closest to the limits, batch by batch, with the fp16 and bf16 limits drawn.

Two steps, so that the drawing never runs in the training process:
  collect(ring, options) -> Picture   ovf_ring.picture: reads the ring (plain Python);
                                       a Picture is plain data (to_json/from_json)
  render(picture, path)  -> dict      render.py: draws it with matplotlib and
                                       returns the matrix it drew
The debuggers and `python3 -m ovf.postmortem --plot` do both in their own
process; `DebugUnderflowOverflow.plot()` collects in the training process and
renders in a child: `python3 -m ovf_plugin.plot PICTURE.json FILE`.
"""

from ovf_ring.picture import MAX_COLUMNS, Options, Picture, collect, command_line, script_of

from .folding import MAX_ROWS, fold
from .render import render, series

__all__ = [
    "MAX_COLUMNS",
    "MAX_ROWS",
    "Options",
    "Picture",
    "collect",
    "command_line",
    "fold",
    "plot",
    "render",
    "script_of",
    "series",
    "summary",
]


def plot(ring, path, options=None, program="", inputs=()):
    """collect + render: the matrix drawn and one line that says what was written.
    `inputs`: the cores the ring is read from, never written over."""
    picture = collect(ring, options, program)
    drawn = render(picture, path, inputs=inputs)
    return drawn, summary(picture, drawn, path)


def summary(picture, drawn, path):
    unit = {"frame": "frames", "batch": "batches"}[picture.columns_are]
    what = f"{len(drawn['rows'])} rows x {len(drawn['columns'])} {unit}"
    if len(drawn["rows"]) != len(picture.rows):
        what += f" ({len(picture.rows)} before folding repeated blocks)"
    bad = sum(row.count(True) for row in drawn["nonfinite"])
    cells = "1 non-finite cell" if bad == 1 else f"{bad} non-finite cells"
    out = [*picture.notes, f"ovf: wrote {path}: {what}, {cells}"]
    out += [f"     {m['text']}" for m in picture.marks]
    return "\n".join(out) + "\n"
