"""The picture `ovf plot` draws, as plain data read from the ring: log10 of each
module's output abs max (rows: modules in the order their forwards finished, as
the report lists frames) over frames or batches (columns), which cells hold a
NaN/Inf, where the first non-finite value and the latest event are. With a cast
target (--cast), a cell is instead the share of the outputs' values that a cast
to it would lose (overflow, flush to zero or turn subnormal; layout 6's counts).

Reading only (no matplotlib): the drawing is ovf_plugin.plot's, in the
debugger's or the post-mortem process, or in a child of the training process
(`DebugUnderflowOverflow.plot()` collects here and renders there).
"""

import fnmatch
import json
import math
from dataclasses import asdict, dataclass, field

from . import layout, snapshot
from .errors import OvfError
from .event import describe_seq
from .identity import device_text, rank_text
from .ring import BadSlot

MAX_COLUMNS = 1000  # columns drawn without --last: the newest frames or batches


@dataclass
class Options:
    module: str = None  # a glob on module paths
    batches: bool = False  # columns are batches (else frames)
    ops: bool = False  # rows are the op observer's records (module, op)
    last: int = None  # the newest N columns
    cast: str = None  # a layout.CAST_TARGETS name: cells are shares a cast would lose
    loss: str = "overflow"  # ... to this one of layout.CAST_LOSSES

    @classmethod
    def from_args(cls, args):
        """The options `ovf plot` and `python3 -m ovf.postmortem --plot` parsed."""
        return cls(
            module=args.module,
            batches=args.batches,
            ops=args.ops,
            last=args.last,
            cast=args.cast,
            loss=args.loss,
        )


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
    shares: bool = False  # cells are shares of values (--cast), not abs maxima

    def to_json(self):
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text):
        return cls(**json.loads(text))


# ---------------------------------------------------------------- reading


def _abs_max(record):
    bad = record.nan_count + record.pos_inf_count + record.neg_inf_count
    if bad >= record.numel or not math.isfinite(record.abs_max):
        return None  # no finite element: its abs max says nothing
    return record.abs_max


def _cast_share(target, loss):
    """A record's share of values a cast to `target` loses to `loss`; None where
    the counts were not kept."""
    target_index, loss_index = layout.CAST_TARGETS.index(target), layout.CAST_LOSSES.index(loss)

    def share(record):
        if not record.flags & layout.FLAG_CAST:
            return None
        return layout.cast_losses(record, target_index)[loss_index] / record.numel

    return share


class _Cell:
    __slots__ = ("value", "nonfinite", "measure")

    def __init__(self, measure=_abs_max):
        self.value = None
        self.nonfinite = False
        self.measure = measure

    def add(self, record):
        if not record.flags & layout.FLAG_HAS_STATS or record.numel == 0:
            return
        if record.nan_count + record.pos_inf_count + record.neg_inf_count:
            self.nonfinite = True
        value = self.measure(record)
        if value is not None and (self.value is None or value > self.value):
            self.value = value


def collect(ring, options=None, program=""):
    """The Picture of `ring` under `options` (an Options); `program` names the
    run in the title ("" : the script the event snapshot names, if any)."""
    options = options or Options()
    by_batch = options.batches
    measure = _abs_max if options.cast is None else _cast_share(options.cast, options.loss)
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
            found = cells[(row, column)] = _Cell(measure)
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
        if r.kind == layout.KIND_SCALER and not options.ops:
            # A loss scaler's row: its scale after each skip or change; a skip is non-finite.
            row = ("scaler", r.name_id)
            scale = cell(row, f"{ring.text(r.name_id)} loss scale", column, r.batch, seq)
            scale.value = r.scale_after if r.scale_after > 0 else scale.value
            scale.nonfinite = scale.nonfinite or bool(r.skips_in_row)
            located[seq] = (row, column)
        elif r.kind == layout.KIND_WARNING and r.cause_seq in located:
            # An early warning of a module's growth: marked at that module's cell.
            located[seq] = located[r.cause_seq]
        elif r.kind == layout.KIND_CHECKPOINT and not options.ops:
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
    # A marked op whose module's forward has not returned (a stop at the op): its
    # module's row, in the column of what runs after the newest frame.
    for module_id, seqs in waiting.items():
        if not wanted(ring.module(module_id)):
            continue
        row = next((k for k in rows if k[0] == "module" and k[1] == module_id), None)
        if row is None:
            row = ("module", module_id, layout.NO_ID)
        for marked_seq in seqs:
            r = ring.record(marked_seq)
            column = r.batch if by_batch else ring.end_seq
            label = rows.get(row) or ring.module(module_id)
            cell(row, label, column, r.batch, marked_seq).add(r)
            located[marked_seq] = (row, column)
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
        value_is=_value_is(options),
        shares=options.cast is not None,
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


def _value_is(options):
    if options.cast is None:
        whose = "each op's output" if options.ops else "each module's outputs"
        return f"log10 of the abs max of {whose}"
    verb = {"overflow": "overflow", "flush": "flush to zero", "subnormal": "make subnormal"}
    # short: the colour bar's label (render.py also tells op records by "op's output")
    whose = "op's output" if options.ops else "output"
    return f"log10 share of the {whose} a cast to {options.cast} would {verb[options.loss]}"


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
                f"record {seq}, batch {r.batch}, {_frame_name(ring, frame)} {ring.text(r.label_id)}"
            )
    return describe_seq(ring, seq)


def _frame_name(ring, r):
    # Every root module is path "": a frame's own class tells a model from the
    # loss module called beside it (both would read "<root Model>").
    if ring.text(r.name_id) == "" and r.label_id != layout.NO_ID:
        return f"<root {ring.text(r.label_id)}>"
    return f"{ring.module(r.name_id)} ({ring.text(r.label_id)})"


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
