"""The frames listing (`ovf frames`, `python3 -m ovf.postmortem`): the newest
frames that pass a filter, as the reference's report text or as JSON data."""

import fnmatch
import math
from dataclasses import dataclass

from . import compiled, early, layout, scaler
from .frames import walk_back
from .report import format_listing, is_bookkeeping

SCALER_UPDATES_SHOWN = 5  # a loss scaler's newest skips and changes of scale, noted first


@dataclass
class Selection:
    """Which frames a listing shows: the `count` newest (None: the runtime's
    max_frames_to_save) that match every filter given."""

    count: int = None
    batch: int = None
    module: str = None  # a glob on the module path
    nonfinite: bool = False
    ops: bool = False  # also the op records, where the ops ran
    all_ops: bool = False  # with ops: also the bookkeeping ops (zero_, fill_, ...)
    headroom: bool = False  # each line's headroom columns


def _ops_as_frames(ring):
    """A ring with op records and no module frame at all (a LibTorch C++
    program: no nn.Module hooks) lists its op records as its frames."""
    return ring.header.frames_written == 0


def _op_frames_note(ring, walk):
    if not (_ops_as_frames(ring) and walk.frames):
        return []
    return [
        "ovf: no module frames in this ring (a program without nn.Module hooks, such as a "
        "LibTorch C++ one): its op records are listed as frames, by module scope and op"
    ]


def _compiled_note(walk):
    line = compiled.note(walk.frames)
    return [line] if line else []


def _walk(ring, sel):
    count = sel.count or ring.header.max_frames_to_save or 21
    return count, walk_back(
        ring, count, keep=_filter(ring, sel), ops_as_frames=_ops_as_frames(ring)
    )


def text(ring, sel):
    """The listing as `ovf frames` prints it, notes about the ring first."""
    count, walk = _walk(ring, sel)
    notes = list(ring.notes) + _op_frames_note(ring, walk) + _compiled_note(walk)
    notes += [
        f"ovf: batch {r.batch}: {scaler.update_text(ring, r)}"
        for r in scaler.updates(ring, newest=SCALER_UPDATES_SHOWN)
    ]
    warned = early.warning(ring)
    if warned is not None:
        notes.append(early.line(ring, warned))
    if walk.stopped_by is not None:
        notes.append(f"ovf: {walk.stopped_by.describe()}; older frames are not shown")
    elif len(walk.frames) < count and ring.floor_seq > 0:
        notes.append(
            f"ovf: the ring keeps the last {ring.capacity} records; older frames were overwritten"
        )
    if walk.inconsistent:
        notes.append(
            f"ovf: {len(walk.inconsistent)} records do not belong to the frame they follow "
            f"(first: record {walk.inconsistent[0]}); the ring may be corrupt"
        )
    return "".join(n + "\n" for n in notes) + format_listing(
        walk.frames,
        ring.text,
        sel.ops,
        sel.headroom,
        ring.module,
        walk.trailing_ops,
        sel.all_ops,
    )


def data(ring, sel):
    """The listing as one JSON-able dict: the process, notes, frames with raw stats."""
    _, walk = _walk(ring, sel)
    h = ring.header
    frames = [
        {
            "seq": f.seq,
            "batch": f.batch,
            "module": _frame_module(ring, f),
            "class": None if f.is_op else ring.text(f.header.label_id),
            **({"op": ring.text(f.header.name_id)} if f.is_op else {}),
            "nonfinite": f.nonfinite,
            "root": bool(f.header.flags & layout.FLAG_ROOT),
            "truncated": bool(f.header.flags & layout.FLAG_TRUNCATED),
            "compiled": compiled.is_compiled(f),
            "batch_starts": [m.batch for m in f.markers],
            "lines": [_line(ring, r) for r in ([f.header] if f.is_op else f.lines)],
            **({"ops": [_line(ring, r) for r in f.ops]} if sel.ops else {}),
        }
        for f in walk.frames
    ]
    return {
        "pid": h.pid,
        "rank": h.rank,
        "local_rank": h.local_rank,
        "world_size": h.world_size,
        "batch": h.batch,
        "write_seq": h.write_seq,
        "notes": ring.notes
        + _op_frames_note(ring, walk)
        + _compiled_note(walk)
        + ([walk.stopped_by.describe()] if walk.stopped_by else []),
        "frames": frames,
        **({"trailing_ops": [_line(ring, r) for r in walk.trailing_ops]} if sel.ops else {}),
    }


def _filter(ring, sel):
    tests = []
    if sel.batch is not None:
        tests.append(lambda f: f.batch == sel.batch)
    if sel.module is not None:
        tests.append(lambda f: fnmatch.fnmatchcase(_frame_module(ring, f) or "", sel.module))
    if sel.nonfinite:
        tests.append(lambda f: f.nonfinite)
    if _ops_as_frames(ring) and not sel.all_ops:
        tests.append(lambda f: not is_bookkeeping(f.header, ring.text))
    if not tests:
        return None
    return lambda frame: all(test(frame) for test in tests)


def _frame_module(ring, frame):
    """A frame's module path: an op frame's is the module scope the op ran in."""
    if frame.is_op:
        return ring.module(frame.header.context_id, None)
    return ring.text(frame.header.name_id)


def _number(x):
    """JSON has no inf/nan: those become the strings "inf", "-inf", "nan"."""
    return x if math.isfinite(x) else ("nan" if math.isnan(x) else ("inf" if x > 0 else "-inf"))


def _role(flags):
    for bit, name in (
        (layout.FLAG_PRODUCER, "producer"),
        (layout.FLAG_CARRIER, "carrier"),
        (layout.FLAG_CONSTANT, "constant"),
    ):
        if flags & bit:
            return name
    return None


def _line(ring, r):
    out = {"seq": r.seq, "kind": layout.KIND_NAMES[r.kind], "label": ring.text(r.label_id)}
    if r.flags & layout.FLAG_HAS_STATS:
        out.update(
            dtype=layout.dtype_name(r.dtype),
            numel=r.numel,
            nan=r.nan_count,
            pos_inf=r.pos_inf_count,
            neg_inf=r.neg_inf_count,
            zero=r.zero_count,
            subnormal=r.subnormal_count,
            abs_min=_number(r.abs_min),
            abs_max=_number(r.abs_max),
            abs_min_nonzero=_number(r.abs_min_nonzero),
        )
        if r.flags & layout.FLAG_CAST:  # counts, as recorded: {"fp16": {"overflow": 0, ...}}
            out["cast"] = {
                name: dict(zip(layout.CAST_LOSSES, layout.cast_losses(r, t), strict=True))
                for t, name in enumerate(layout.CAST_TARGETS)
            }
    elif r.flags & layout.FLAG_PENDING:
        out["pending"] = True
    elif r.flags & layout.FLAG_NO_DATA:
        out["no_data"] = True
    if r.kind in (layout.KIND_OP_OUTPUT, layout.KIND_BUFFER):
        out.update(
            op=ring.text(r.name_id),
            module=ring.module(r.context_id, None),
            batch=r.batch,
            backward=bool(r.flags & layout.FLAG_BACKWARD),
            role=_role(r.flags),
        )
    return out
