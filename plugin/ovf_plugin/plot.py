"""`ovf plot`: one picture of where a run's values blow up.

A heat map of log10 of each module's output abs max (rows: modules in the order
their forwards finished, as the report lists frames) over frames or batches
(columns), non-finite cells in a colour of their own, the first non-finite
value and the latest event framed and labelled; under it, the abs max of the
modules that came closest to the limits, batch by batch, with the fp16 and bf16
limits drawn as reference lines.

Two steps, so that the drawing never runs in the training process:
  collect(ring, options) -> Picture   reads the ring (plain Python, no matplotlib);
                                       a Picture is plain data (to_json/from_json)
  render(picture, path)  -> dict      draws it with matplotlib (Agg, imported here,
                                       lazily) and returns the matrix it drew
The debuggers and `python3 -m ovf.postmortem --plot` do both in their own
process; `DebugUnderflowOverflow.plot()` collects in the training process and
renders in a child: `python3 -m ovf_plugin.plot PICTURE.json FILE`.
"""

import fnmatch
import json
import math
import os
import re
import sys
from dataclasses import asdict, dataclass, field

from ovf_ring import layout, snapshot
from ovf_ring.errors import OvfError
from ovf_ring.event import describe_seq
from ovf_ring.identity import device_text, rank_text
from ovf_ring.ring import BadSlot


MAX_COLUMNS = 1000  # columns drawn without --last: the newest frames or batches
MAX_ROWS = 80  # above this, repeated blocks (layers.0 .. layers.11) fold into one row
TOP_SERIES = 5  # modules in the lower panel
FP16_MAX = layout.HEADROOM_DTYPES["fp16"][1]
FP16_MIN_NORMAL = layout.HEADROOM_DTYPES["fp16"][2]
BF16_MAX = layout.HEADROOM_DTYPES["bf16"][1]
FORMATS = ("png", "svg", "pdf")
NONFINITE = "#ff2d55"  # a colour viridis does not have
NO_RECORD = "#e6e6e6"
MARK_STYLES = {"first": ("black", "-"), "event": ("#c800c8", "--")}
LIMITS = (  # the lower panel's reference lines: (value, colour, dash, label)
    (BF16_MAX, "#d62728", "--", f"bf16 max {BF16_MAX:.2e}"),
    (FP16_MAX, "#ff7f0e", "--", f"fp16 max {FP16_MAX:g}"),
    (FP16_MIN_NORMAL, "#ff7f0e", ":", f"fp16 smallest normal {FP16_MIN_NORMAL:.2e}"),
)

_INDEX = re.compile(r"^\d+$")


@dataclass
class Options:
    module: str = None  # a glob on module paths
    batches: bool = False  # columns are batches (else frames)
    ops: bool = False  # rows are the op observer's records (module, op)
    last: int = None  # the newest N columns


@dataclass
class Picture:
    """What one plot shows, as plain data. cells: [row, column, abs max or None
    (no finite value), non-finite]; marks: {"row", "column", "kind", "text"}
    for the first non-finite value ("first") and the latest event ("event"),
    row and column None where the record is not in the picture."""

    title: str
    subtitle: str
    columns_are: str  # "frame" or "batch"
    value_is: str  # what a cell's number is, for the colour bar
    rows: list
    columns: list  # {"label": str, "batch": int}
    cells: list
    marks: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def to_json(self):
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text):
        return cls(**json.loads(text))


# ---------------------------------------------------------------- reading


class _Cell:
    __slots__ = ("value", "nonfinite")

    def __init__(self):
        self.value = None
        self.nonfinite = False

    def add(self, record):
        if not record.flags & layout.FLAG_HAS_STATS or record.numel == 0:
            return
        bad = record.nan_count + record.pos_inf_count + record.neg_inf_count
        if bad:
            self.nonfinite = True
        if bad >= record.numel or not math.isfinite(record.abs_max):
            return  # no finite element: its abs max says nothing
        if self.value is None or record.abs_max > self.value:
            self.value = record.abs_max


def collect(ring, options=None, program=""):
    """The Picture of `ring` under `options` (an Options); `program` names the
    run in the title ("" : the script the event snapshot names, if any)."""
    options = options or Options()
    by_batch = options.batches
    rows = {}  # row key -> label
    cells = {}  # (row key, column key) -> _Cell
    column_batch = {}  # column key -> batch
    located = {}  # seq -> (row key, column key): where a record shows
    frame_home = {}  # FRAME / STEP seq -> (row key, column key) of its cell, or None
    pending = []  # frames by frame: op records waiting for the frame they ran before
    unreadable = 0
    # The rows' order: where in its batch a row first shows (the forward's order),
    # counted in batches whose start the ring still holds; else by record.
    started = set()  # batches whose BATCH_START marker was read
    shown = {}  # batch -> records placed in it so far
    order = {}  # row key -> (0, place in its batch) or (1, seq)
    # Without --ops, a marked op or buffer record shows in the cell of the module
    # it ran in: that module's frame, written when its forward returns.
    marked = {ring.header.first_nonfinite_seq, ring.header.last_event_seq}
    waiting = {}  # module name id -> [seqs of marked records]

    def wanted(text):
        return options.module is None or fnmatch.fnmatchcase(text, options.module)

    def cell(row, label, column, batch, seq):
        rows.setdefault(row, label)
        column_batch.setdefault(column, batch)
        place = shown[batch] = shown.get(batch, -1) + 1
        key = (0, place) if batch in started else (1, seq)
        order[row] = min(order.get(row, key), key)
        found = cells.get((row, column))
        if found is None:
            found = cells[(row, column)] = _Cell()
        return found

    for seq in range(ring.floor_seq, ring.end_seq):
        r = ring.record(seq)
        if isinstance(r, BadSlot):
            unreadable += 1
            continue
        column = r.batch if by_batch else seq
        if r.kind == layout.KIND_BATCH_START:
            started.add(r.batch)
        elif r.kind in (layout.KIND_FRAME, layout.KIND_STEP):
            home = None
            if not options.ops and wanted(ring.module(r.name_id)):
                row = ("module", r.name_id, r.label_id)
                cell(row, _frame_name(ring, r), column, r.batch, seq)
                home = located[seq] = (row, column)
                for marked_seq in waiting.pop(r.name_id, ()):
                    located[marked_seq] = home
            frame_home[seq] = home
            for op_seq, op_row, op_label, op in pending:
                cell(op_row, op_label, column, r.batch, op_seq).add(op)
                located[op_seq] = (op_row, column)
            pending = []
        elif r.kind in layout.LINE_KINDS and r.frame_seq in frame_home:
            home = frame_home[r.frame_seq]
            if home is not None and r.kind in (layout.KIND_OUTPUT, layout.KIND_STEP_PARAM):
                cells[home].add(r)
            if home is not None and r.kind != layout.KIND_OP_OUTPUT:
                located[seq] = home
                continue
        if r.kind == layout.KIND_CHECKPOINT and not options.ops:
            name = ring.text(r.name_id)
            if wanted(name):
                row = ("checkpoint", r.name_id)
                cell(row, f"detect_overflow {name!r}", column, r.batch, seq).add(r)
                located[seq] = (row, column)
        elif (
            r.kind in (layout.KIND_OP_OUTPUT, layout.KIND_BUFFER)
            and seq in marked
            and not options.ops
            and not r.flags & layout.FLAG_BACKWARD
        ):
            waiting.setdefault(r.context_id, []).append(seq)
        elif r.kind == layout.KIND_OP_OUTPUT and options.ops:
            module = ring.module(r.context_id, "(no module)")
            if wanted(module):
                backward = bool(r.flags & layout.FLAG_BACKWARD)
                row = ("op", r.context_id, r.name_id, backward)
                label = f"{module}: {ring.text(r.name_id)}" + (" (backward)" if backward else "")
                if by_batch:
                    cell(row, label, column, r.batch, seq).add(r)
                    located[seq] = (row, column)
                else:
                    pending.append((seq, row, label, r))
    if pending:  # ops after the newest frame: a forward still running, the loss, backward
        column = ring.end_seq
        for op_seq, op_row, op_label, op in pending:
            cell(op_row, op_label, column, op.batch, op_seq).add(op)
            located[op_seq] = (op_row, column)

    notes = list(ring.notes)
    if unreadable:
        notes.append(f"ovf plot: {unreadable} records could not be read (torn or overwritten)")
    keys = sorted(column_batch)
    limit = options.last or MAX_COLUMNS
    if len(keys) > limit:
        if options.last is None:
            unit = "batches" if by_batch else "frames"
            notes.append(
                f"ovf plot: showing the newest {limit} of {len(keys)} {unit} (--last N"
                + ("" if by_batch else ", or --batches")
                + ")"
            )
        keys = keys[-limit:]
    column_index = {key: i for i, key in enumerate(keys)}
    kept = {k: c for k, c in cells.items() if k[1] in column_index}
    row_keys = sorted({row for row, _ in kept}, key=order.get)
    row_index = {key: i for i, key in enumerate(row_keys)}

    h = ring.header
    picture = Picture(
        title=_title(ring, program),
        subtitle=_subtitle(h),
        columns_are="batch" if by_batch else "frame",
        value_is=(
            "log10 of the abs max of each op's output"
            if options.ops
            else "log10 of the abs max of each module's outputs"
        ),
        rows=[rows[k] for k in row_keys],
        columns=[
            {
                "label": _column_label(key, column_batch[key], by_batch, ring),
                "batch": column_batch[key],
            }
            for key in keys
        ],
        cells=sorted(
            [row_index[row], column_index[column], c.value, c.nonfinite]
            for (row, column), c in kept.items()
        ),
        notes=notes,
    )
    for kind, seq, prefix in (
        ("first", h.first_nonfinite_seq, "first non-finite"),
        ("event", h.last_event_seq, "event"),
    ):
        if seq == layout.NO_SEQ:
            continue
        if kind == "event":
            bits = [name for name, bit in layout.STOP_NAMES if h.last_event_kind & bit]
            prefix += f" ({', '.join(bits) or 'none'})"
        text = f"{prefix}: {_describe(ring, seq)}"
        where = located.get(seq)
        if where is not None and where[0] in row_index and where[1] in column_index:
            picture.marks.append(
                {
                    "row": row_index[where[0]],
                    "column": column_index[where[1]],
                    "kind": kind,
                    "text": text,
                }
            )
        else:
            picture.marks.append({"row": None, "column": None, "kind": kind, "text": text})
    if len(picture.marks) == 2:
        first, event = picture.marks
        same = h.first_nonfinite_seq == h.last_event_seq
        where = (first["row"], first["column"])
        if same or (first["row"] is not None and where == (event["row"], event["column"])):
            # One cell, one frame: the event's words join the first value's label.
            first["text"] += "; " + (
                "the latest event too" if same else event["text"].split(":", 1)[0] + " here"
            )
            del picture.marks[1]
    return picture


def _describe(ring, seq):
    """describe_seq, with the watched model as "<root Class>" and an optimizer
    step by its name and class."""
    r = ring.record(seq)
    if isinstance(r, BadSlot):
        return describe_seq(ring, seq)
    if r.kind in (layout.KIND_FRAME, layout.KIND_STEP):
        return f"record {seq}, batch {r.batch}, {_frame_name(ring, r)}"
    if r.kind in (layout.KIND_OP_OUTPUT, layout.KIND_BUFFER, layout.KIND_GRAD):
        module = ring.module(r.context_id, "(no module)")
        what = {
            layout.KIND_OP_OUTPUT: f"{ring.text(r.name_id)} in {module}",
            layout.KIND_BUFFER: f"{module} buffer {ring.text(r.label_id)}",
            layout.KIND_GRAD: f"{module} {ring.text(r.label_id)}",
        }[r.kind]
        backward = " (backward)" if r.flags & layout.FLAG_BACKWARD else ""
        return f"record {seq}, batch {r.batch}, {what}{backward}"
    if r.kind in layout.LINE_KINDS:
        frame = ring.record(r.frame_seq)
        if not isinstance(frame, BadSlot) and frame.kind in (layout.KIND_FRAME, layout.KIND_STEP):
            return (
                f"record {seq}, batch {r.batch}, {_frame_name(ring, frame)} "
                f"{ring.text(r.label_id)}"
            )
    return describe_seq(ring, seq)


def _frame_name(ring, r):
    path = ring.module(r.name_id)
    return path if path.startswith("<root ") else f"{path} ({ring.text(r.label_id)})"


def _column_label(key, batch, by_batch, ring):
    if by_batch:
        return str(batch)
    return f"record {key}" if key < ring.end_seq else "after the newest frame"


def _title(ring, program):
    program = program or script_of(ring)
    root = ring.header.root_class_id
    model = f" ({ring.text(root)})" if root != layout.NO_ID else ""
    return f"ovf plot: {program or 'pid %d' % ring.header.pid}{model}"


def _subtitle(h):
    return (
        f"pid {h.pid}, {rank_text(h) or 'not distributed'}, {device_text(h)}; "
        f"batch {h.batch}, {h.frames_written} frames written"
    )


def script_of(ring):
    """The program's script as the event snapshot names it (its outermost
    frame of the program's own code), or ""."""
    try:
        snap = snapshot.read(ring)
    except OvfError:
        return ""
    user = [f for f in snap.frames if f.user]
    return (user or snap.frames or [None])[-1].file if snap.frames else ""


def command_line(pid=None, core=None):
    """The program's command line: of a local process from /proc/PID/cmdline,
    of a core file from its NT_PRPSINFO note (80 bytes at most); "" when
    unreadable. Only a name for the title: never trusted beyond that."""
    raw = b""
    try:
        if core is not None:
            from elftools.elf.elffile import ELFFile

            with open(core, "rb") as f:
                for segment in ELFFile(f).iter_segments():
                    if segment.header.p_type != "PT_NOTE":
                        continue
                    for note in segment.iter_notes():
                        if note["n_type"] == "NT_PRPSINFO":
                            raw = note["n_desc"]["pr_psargs"]
                            break
        elif pid is not None:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                raw = f.read(4096).replace(b"\0", b" ")
    except Exception:  # noqa: BLE001 - a title without the command line is still a title
        return ""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
    text = raw.split(b"\0", 1)[0].decode("utf-8", "replace").strip()
    return "".join(c if c.isprintable() else "?" for c in text)[:120]


# ---------------------------------------------------------------- folding


def _parts(label):
    """(path components, the rest of the label): "blocks.0.fc (Linear)" ->
    (["blocks", "0", "fc"], " (Linear)"); "blocks.1: aten::add" -> (["blocks",
    "1"], ": aten::add")."""
    end = min((i for i in (label.find(" "), label.find(": ")) if i >= 0), default=len(label))
    return label[:end].split("."), label[end:]


def fold(picture, max_rows=MAX_ROWS):
    """Rows folded while there are more than `max_rows`: the first numbered path
    component (layers.0 .. layers.11) becomes one row "layers.[0-11]", then the
    next, and so on. A folded cell holds the largest value of its rows and is
    non-finite when any of them is. Returns (row labels, {(row, column): [value,
    non-finite]}, old row -> new row)."""
    labels = list(picture.rows)
    mapping = list(range(len(labels)))
    level = 0
    while len(set(mapping)) > max_rows:
        level += 1
        keys, changed = [], False
        for label in picture.rows:
            parts, rest = _parts(label)
            numbered = [i for i, p in enumerate(parts) if _INDEX.match(p)]
            parts = list(parts)
            for i in numbered[:level]:
                parts[i] = "*"
            changed |= bool(numbered[:level])
            keys.append((tuple(parts), rest))
        if not changed or level > 8:
            break
        order = {}
        for key in keys:
            order.setdefault(key, len(order))
        if len(order) == len(set(mapping)):
            continue  # this level folds nothing more: try the next
        mapping = [order[key] for key in keys]
        labels = [_folded_label(picture.rows, mapping, new) for new in range(len(order))]
    merged = {}
    for r, c, value, nonfinite in picture.cells:
        key = (mapping[r], c)
        old = merged.get(key)
        if old is None:
            merged[key] = [value, nonfinite]
        else:
            if value is not None and (old[0] is None or value > old[0]):
                old[0] = value
            old[1] = old[1] or nonfinite
    return labels, merged, mapping


def _folded_label(labels, mapping, new):
    members = [labels[i] for i, m in enumerate(mapping) if m == new]
    if len(members) == 1:
        return members[0]
    split = [_parts(label) for label in members]
    first, rest = split[0]
    out = []
    for i, part in enumerate(first):
        values = {parts[i] if i < len(parts) else "" for parts, _ in split}
        if len(values) == 1:
            out.append(part)
        elif all(_INDEX.match(v) for v in values):
            out.append(_ranges(sorted(int(v) for v in values)))
        else:
            out.append("*")
    rests = {r for _, r in split}
    return ".".join(out) + (rest if len(rests) == 1 else "") + f"  x{len(members)}"


def _ranges(numbers):
    """[0, 1, 2, 5] -> "[0-2,5]"."""
    spans = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return "[" + ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans) + "]"


# ---------------------------------------------------------------- drawing


def _escape(text):
    """matplotlib reads "$...$" as math: a module name must print as it is."""
    return text.replace("$", r"\$")


def series(labels, merged, columns, count=TOP_SERIES):
    """The lower panel's lines: the `count` rows with the most non-finite
    cells, then the largest abs max, leaving out a row whose line would lie on
    one already chosen (a block and its last layer carry one tensor); points
    [batch, abs max or None, non-finite], one per batch (its largest cell)."""
    per_row = {}
    for (row, column), (value, nonfinite) in merged.items():
        batch = columns[column]["batch"]
        point = per_row.setdefault(row, {}).setdefault(batch, [None, False])
        if value is not None and (point[0] is None or value > point[0]):
            point[0] = value
        point[1] = point[1] or nonfinite

    def rank(row):
        points = per_row[row].values()
        finite = [v for v, _ in points if v is not None]
        return (-sum(nf for _, nf in points), -(max(finite) if finite else -1.0), row)

    lines = []
    for row in sorted(per_row, key=rank):
        points = [[b, v, nf] for b, (v, nf) in sorted(per_row[row].items())]
        if not any(_same_line(line["points"], points) for line in lines):
            lines.append({"label": labels[row], "points": points})
        if len(lines) == count:
            break
    return lines


def _same_line(a, b, decades=0.05):
    """Whether two lines of the lower panel would be drawn on top of each other."""
    if [(x, v is None, nf) for x, v, nf in a] != [(x, v is None, nf) for x, v, nf in b]:
        return False
    return all(
        va == vb or (va > 0 and vb > 0 and abs(math.log10(va) - math.log10(vb)) < decades)
        for (_, va, _), (_, vb, _) in zip(a, b)
        if va is not None
    )


def render(picture, path, dpi=100):
    """Draws `picture` into `path` (.png, .svg or .pdf) and returns what it
    drew: {"rows", "columns", "values" (abs max per row and column, None where
    no record or no finite value), "nonfinite", "marks", "series", "size"
    (width and height in pixels at `dpi`)}."""
    fmt = os.path.splitext(path)[1].lower().lstrip(".")
    if fmt not in FORMATS:
        raise OvfError(f"ovf plot: {path}: the file name must end in .png, .svg or .pdf")
    if not picture.rows:
        raise OvfError(
            "ovf plot: nothing to draw: the ring holds no "
            + ("op records" if picture.value_is.endswith("op's output") else "module frames")
            + " that match"
        )
    try:
        import matplotlib
        import numpy as np
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.colors import ListedColormap
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch, Rectangle
        from matplotlib.transforms import blended_transform_factory
    except ImportError as e:
        raise OvfError(
            f"ovf plot: needs matplotlib ({e}); Debian: apt install python3-matplotlib"
        ) from None

    labels, merged, mapping = fold(picture)
    n_rows, n_cols = len(labels), len(picture.columns)
    values = [[None] * n_cols for _ in range(n_rows)]
    nonfinite = [[False] * n_cols for _ in range(n_rows)]
    for (r, c), (value, bad) in merged.items():
        values[r][c], nonfinite[r][c] = value, bad
    marks = [dict(m, row=None if m["row"] is None else mapping[m["row"]]) for m in picture.marks]
    lines = series(labels, merged, picture.columns)
    footer = [f"{m['text']} (not in this picture)" for m in marks if m["row"] is None]
    footer += picture.notes

    # The layout in inches: labels | heat map | colour bar, the lower panel under
    # it with its legend on the right; the title, subtitle and marks' labels on top.
    label_font = 8 if n_rows <= 60 else 6
    label_in = min(6.0, 0.3 + max(len(t) for t in labels) * label_font * 0.55 / 72)
    heat_w = min(22.0, max(6.0, n_cols * 0.14))
    heat_h = min(60.0, max(2.0, n_rows * (0.17 if n_rows <= 60 else 0.12)))
    legend_chars = max([len(line["label"]) for line in lines] + [32])
    right_in = max(1.4, 0.9 + legend_chars * 7 * 0.55 / 72)
    top_in = 0.85 + 0.2 * len([m for m in marks if m["row"] is not None]) + 0.1
    gap_in, lower_h = 1.0, 2.8
    bottom_in = 0.55 + 0.13 * len(footer)
    width = label_in + heat_w + right_in
    height = top_in + heat_h + gap_in + lower_h + bottom_in
    fig = Figure(figsize=(width, height), dpi=dpi)
    canvas = FigureCanvasAgg(fig)

    def box(x, y, w, h):
        return [x / width, y / height, w / width, h / height]

    heat_y = bottom_in + lower_h + gap_in
    ax = fig.add_axes(box(label_in, heat_y, heat_w, heat_h))
    bar_ax = fig.add_axes(box(label_in + heat_w + 0.15, heat_y, 0.2, heat_h))
    low_ax = fig.add_axes(box(label_in, bottom_in, heat_w, lower_h))
    fig.text(0.1 / width, 1 - 0.1 / height, _escape(picture.title), fontsize=12, va="top")
    fig.text(0.1 / width, 1 - 0.42 / height, _escape(picture.subtitle), fontsize=9, va="top")

    logs = np.full((n_rows, n_cols), np.nan)
    for (r, c), (value, _) in merged.items():
        if value is not None:
            logs[r, c] = math.log10(value) if value > 0 else -np.inf
    finite = logs[np.isfinite(logs)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (-1.0, 1.0)
    if high - low < 0.1:  # one value (or nearly): a decade around it
        low, high = low - 0.5, high + 0.5
    zeros = bool(np.isneginf(logs).any())
    logs[np.isneginf(logs)] = low  # abs max 0: the bottom of the scale
    cmap = matplotlib.colormaps["viridis"].copy()
    cmap.set_bad((0, 0, 0, 0))
    ax.set_facecolor(NO_RECORD)
    image = ax.imshow(
        np.ma.masked_invalid(logs),
        aspect="auto",
        interpolation="nearest",
        cmap=cmap,
        vmin=low,
        vmax=high,
    )
    mask = np.array(nonfinite, dtype=bool).reshape(n_rows, n_cols)
    ax.imshow(
        np.ma.masked_where(~mask, np.ones((n_rows, n_cols))),
        aspect="auto",
        interpolation="nearest",
        cmap=ListedColormap([NONFINITE]),
        vmin=0,
        vmax=1,
    )
    bar = fig.colorbar(image, cax=bar_ax, extend="min" if zeros else "neither")
    bar.set_label(
        _escape(picture.value_is) + (" (abs max 0: the bottom)" if zeros else ""), fontsize=8
    )
    bar.ax.tick_params(labelsize=7)

    row_pt = heat_h * 72 / n_rows
    step = max(1, math.ceil(label_font / row_pt)) if row_pt < label_font else 1
    ax.set_yticks(range(0, n_rows, step))
    ax.set_yticklabels([_escape(t) for t in labels[::step]], fontsize=label_font)
    _column_ticks(ax, picture.columns, picture.columns_are)
    ax.set_xlabel(
        "batch" if picture.columns_are == "batch" else "frames, oldest to newest (ticks: batches)",
        loc="left",
        fontsize=9,
    )
    ax.legend(
        handles=[
            Patch(facecolor=NONFINITE, label="non-finite (nan or inf)"),
            Patch(facecolor=NO_RECORD, edgecolor="#999999", label="no record"),
        ],
        loc="upper right",
        bbox_to_anchor=(1.0, -0.25 / heat_h),
        fontsize=7,
        ncol=2,
        frameon=False,
    )
    cell_pt = min(heat_w * 72 / n_cols, row_pt)
    placed = 0
    for m in marks:
        if m["row"] is None:
            continue
        colour, dash = MARK_STYLES[m["kind"]]
        ax.add_patch(
            Rectangle(
                (m["column"] - 0.5, m["row"] - 0.5),
                1,
                1,
                fill=False,
                edgecolor=colour,
                linestyle=dash,
                linewidth=2,
            )
        )
        if cell_pt < 8:  # too small to see its frame: a square around it
            ax.plot(
                m["column"],
                m["row"],
                marker="s",
                markersize=10,
                markerfacecolor="none",
                markeredgecolor=colour,
                markeredgewidth=1.5,
                linestyle="none",
            )
        ax.annotate(
            _escape(m["text"]),
            xy=(m["column"], m["row"]),
            xytext=(0.0, 1 + (0.12 + 0.2 * placed) / heat_h),
            textcoords="axes fraction",
            fontsize=8,
            color=colour,
            arrowprops={"arrowstyle": "->", "color": colour, "linestyle": dash},
            annotation_clip=False,
        )
        placed += 1
    if footer:
        fig.text(0.1 / width, 0.08 / height, _escape("\n".join(footer)), fontsize=7, va="bottom")

    blend = blended_transform_factory(low_ax.transData, low_ax.transAxes)
    for i, line in enumerate(lines):
        points = [(b, v) for b, v, _ in line["points"] if v is not None and v > 0]
        (drawn,) = low_ax.plot(
            [b for b, _ in points],
            [v for _, v in points],
            marker="o",
            markersize=3,
            label=_escape(line["label"]),
        )
        bad_x = [b for b, _, nf in line["points"] if nf]
        if bad_x:
            low_ax.plot(
                bad_x,
                [0.95 - 0.035 * i] * len(bad_x),
                marker="X",
                markersize=8,
                linestyle="none",
                color=drawn.get_color(),
                transform=blend,
            )
    for value, colour, dash, text in LIMITS:
        low_ax.axhline(value, color=colour, linestyle=dash, linewidth=1, label=text)
    low_ax.set_yscale("log")
    low_ax.set_xlabel("batch", fontsize=9)
    low_ax.set_ylabel("abs max", fontsize=9)
    low_ax.tick_params(labelsize=7)
    low_ax.set_title(
        f"abs max per batch of the {len(lines)} rows with the most non-finite cells, then the "
        "largest values (X: non-finite)",
        fontsize=9,
        loc="left",
    )
    batches = sorted({b for line in lines for b, _, _ in line["points"]})
    if batches:
        low_ax.set_xlim(batches[0] - 0.5, batches[-1] + 0.5)
        if len(batches) <= 30:
            low_ax.set_xticks(batches)
    low_ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    low_ax.grid(True, which="major", axis="y", alpha=0.3)

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a glyph the font lacks is no reason to fail
        try:
            fig.savefig(path, format=fmt, dpi=dpi)
        except OSError as e:
            raise OvfError(f"ovf plot: cannot write {path}: {e.strerror or e}") from None
    return {
        "rows": labels,
        "columns": [c["label"] for c in picture.columns],
        "values": values,
        "nonfinite": nonfinite,
        "marks": marks,
        "series": lines,
        "size": list(canvas.get_width_height()),
    }


def _column_ticks(ax, columns, columns_are):
    if columns_are == "batch":
        step = max(1, math.ceil(len(columns) / 30))
        ticks = list(range(0, len(columns), step))
        ax.set_xticks(ticks)
        ax.set_xticklabels([columns[i]["label"] for i in ticks], fontsize=8)
        return
    starts = [i for i, c in enumerate(columns) if i == 0 or c["batch"] != columns[i - 1]["batch"]]
    step = max(1, math.ceil(len(starts) / 30))
    starts = starts[::step]
    ax.set_xticks(starts)
    ax.set_xticklabels([f"b{columns[i]['batch']}" for i in starts], fontsize=8)


# ---------------------------------------------------------------- one call


def plot(ring, path, options=None, program=""):
    """collect + render: the matrix drawn and one line that says what was written."""
    picture = collect(ring, options, program)
    drawn = render(picture, path)
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


def main(argv=None):
    """python3 -m ovf_plugin.plot PICTURE.json FILE: renders a collected
    Picture (DebugUnderflowOverflow.plot's child process); prints the drawn
    matrix as JSON on stdout."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python3 -m ovf_plugin.plot PICTURE.json FILE", file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        picture = Picture.from_json(f.read())
    try:
        drawn = render(picture, argv[1])
    except OvfError as e:
        print(e, file=sys.stderr)
        return 1
    print(json.dumps({"drawn": drawn, "summary": summary(picture, drawn, argv[1])}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
