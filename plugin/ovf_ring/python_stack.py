"""The Python stack and the producing frame's locals at the latest event, as
text, from the runtime's snapshot (snapshot.py): `ovf py-bt`, `ovf py-locals`
and `python3 -m ovf.postmortem --python` print these."""

import linecache
import math

from . import layout, snapshot
from .errors import OvfError
from .report import COLUMN_HEADER, escape_text, format_8_2e
from .ring import BadSlot


def backtrace(ring):
    """Innermost frame first, each with its source line as this machine has it."""
    snap = snapshot.read(ring)
    out = [snapshot.stale_note(ring, snap) + "Traceback (most recent call first):"]
    for f in snap.frames:
        out.append(
            f'  File "{f.file}", line {f.line}, in {f.function}'
            + ("    <- the program's code (ovf py-locals)" if f.user else "")
        )
        source = source_line(f.file, f.line)
        if source:
            out.append(f"    {source}")
    if len(snap.frames) == snapshot.MAX_FRAMES:
        out.append(f"  ... (the snapshot keeps the innermost {snapshot.MAX_FRAMES} frames)")
    return "\n".join(out) + "\n"


def local_values(ring, names=()):
    """The program's innermost frame's locals (only `names`, if given), tensors
    with their statistics, then the event's diagnosis."""
    snap = snapshot.read(ring)
    user = next((f for f in snap.frames if f.user), None)
    if user is None:
        raise OvfError(
            "ovf py-locals: the snapshot holds no frame of the program's own code "
            "(the value was made outside Python, or on a thread without Python)"
        )
    chosen = [v for v in snap.locals if not names or v.name in names]
    missing = [n for n in names if n not in {v.name for v in snap.locals}]
    stale = snapshot.stale_note(ring, snap)
    out = [stale.rstrip("\n")] if stale else []
    out.append(f'ovf: locals of {user.function} ("{user.file}", line {user.line}):')
    out.append(COLUMN_HEADER)
    out += [f"{_values(v)} {_describe(v)}" for v in chosen]
    out += _cut_notes(snap, names, missing)
    event = ring.record(snap.event_seq)
    if not isinstance(event, BadSlot) and event.diagnosis_id != layout.NO_ID:
        out.append(f"ovf: why: {ring.text(event.diagnosis_id)}")
    return "\n".join(out) + "\n"


def _cut_notes(snap, names, missing):
    """What the listing lacks: a frame with more locals than the snapshot keeps is
    listed in part, and a name it did not keep may still be the frame's."""
    kept, total = len(snap.locals), snap.frame_locals
    # A version-1 snapshot did not count them: a full one may have been cut.
    cut = total > kept if total is not None else kept >= snap.kept
    if not cut:
        return [f"ovf: no local named {', '.join(missing)} in that frame"] if missing else []
    keeps = f"keeps the first {snap.kept} locals of a frame"
    if not names:
        more = "maybe more locals" if total is None else f"{total - kept} more locals not kept"
        return [f"ovf: ... and {more}: the snapshot {keeps}"]
    if not missing:
        return []
    verb = "is" if len(missing) == 1 else "are"
    has = "" if total is None else f"; this one has {total}"
    return [f"ovf: {', '.join(missing)} {verb} not in the snapshot (it {keeps}{has})"]


def source_line(path, line):
    """The line's text as the file on this machine has it now ("" if unreadable),
    escaped: a source file is as untrusted as the names in the ring."""
    try:
        text = linecache.getline(path, line).strip()
    except (OSError, UnicodeDecodeError, ValueError):
        return ""
    return escape_text(text.encode("utf-8", "surrogateescape"))


def _values(local):
    if not local.flags & snapshot.LOCAL_HAS_STATS:
        return f"{'no data' if local.flags & snapshot.LOCAL_TENSOR else '':>17}"
    if local.numel == 0:
        return f"{'empty':>17}"
    infs = local.pos_inf_count + local.neg_inf_count
    finite = local.numel - local.nan_count - infs
    lo = math.nan if local.nan_count else (local.abs_min if finite else math.inf)
    hi = math.nan if local.nan_count else (math.inf if infs else local.abs_max)
    return f"{format_8_2e(lo)} {format_8_2e(hi)}"


def _describe(local):
    if local.flags & snapshot.LOCAL_VALUE:
        return f"{local.name}: {local.type} = {local.value}"
    if not local.flags & snapshot.LOCAL_TENSOR:
        return f"{local.name}: {local.type}"
    shape = ", ".join(map(str, local.shape)) + (
        ", ..." if local.flags & snapshot.LOCAL_SHAPE_TRUNCATED else ""
    )
    device = (
        "cpu"
        if local.device_type == 0
        else (f"cuda:{local.device_index}" if local.device_type == 1 else "other device")
    )
    text = f"{local.name}: {local.type} {layout.dtype_name(local.dtype)}[{shape}] {device}"
    bad = local.nan_count + local.pos_inf_count + local.neg_inf_count
    if local.flags & snapshot.LOCAL_HAS_STATS and bad:
        text += (
            f"  nan {local.nan_count}, +inf {local.pos_inf_count}, -inf {local.neg_inf_count}"
            f" of {local.numel}    <- non-finite"
        )
    return text
