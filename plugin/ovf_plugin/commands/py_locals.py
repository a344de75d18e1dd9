"""Show the locals of the program's frame where the latest event's value was made.

Each tensor with its abs min / abs max (the report's columns), dtype, shape,
device and NaN / Inf counts, non-finite ones marked; other values by type
(their repr is never run). Names select locals. Read from the runtime's
snapshot, live or from a core, in gdb and LLDB alike.
"""

import math

from .. import layout, snapshot
from ..errors import OvfError
from ..report import COLUMN_HEADER, format_8_2e
from ..ring import BadSlot

NAME = "py-locals"


def add_arguments(p):
    p.add_argument("names", nargs="*", metavar="NAME", help="only these locals")


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
    text = f"{local.name}: {local.type} {snapshot.dtype_name(local.dtype)}[{shape}] {device}"
    bad = local.nan_count + local.pos_inf_count + local.neg_inf_count
    if local.flags & snapshot.LOCAL_HAS_STATS and bad:
        text += (
            f"  nan {local.nan_count}, +inf {local.pos_inf_count}, -inf {local.neg_inf_count}"
            f" of {local.numel}    <- non-finite"
        )
    return text


def run(session, args):
    ring = session.ring()
    snap = snapshot.read(ring)
    user = next((f for f in snap.frames if f.user), None)
    if user is None:
        raise OvfError(
            "ovf py-locals: the snapshot holds no frame of the program's own code "
            "(the value was made outside Python, or on a thread without Python)"
        )
    chosen = [v for v in snap.locals if not args.names or v.name in args.names]
    missing = [n for n in args.names if n not in {v.name for v in snap.locals}]
    out = [snapshot.stale_note(ring, snap).rstrip("\n")] if snapshot.stale_note(ring, snap) else []
    out.append(f'ovf: locals of {user.function} ("{user.file}", line {user.line}):')
    out.append(COLUMN_HEADER)
    out += [f"{_values(v)} {_describe(v)}" for v in chosen]
    if missing:
        out.append(f"ovf: no local named {', '.join(missing)} in that frame")
    event = ring.record(snap.event_seq)
    if not isinstance(event, BadSlot) and event.diagnosis_id != layout.NO_ID:
        out.append(f"ovf: why: {ring.text(event.diagnosis_id)}")
    return "\n".join(out) + "\n"
