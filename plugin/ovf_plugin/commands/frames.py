"""List the last frames in the reference's report format.

The last N forward frames (default: the runtime's max_frames_to_save) with
"abs min  abs max  metadata" columns, as DebugUnderflowOverflow prints them,
from a live process or a core file. Filters keep the N newest frames that
match them all.
"""

import fnmatch
import json
import math

from .. import layout
from ..frames import walk_back
from ..report import format_listing
from . import types

NAME = "frames"


def add_arguments(p):
    p.add_argument(
        "count",
        nargs="?",
        type=types.count,
        default=None,
        metavar="N",
        help="how many frames (default: the runtime's max_frames_to_save)",
    )
    p.add_argument(
        "--batch", type=types.batch_number, default=None, metavar="B", help="only batch B"
    )
    p.add_argument("--module", default=None, metavar="GLOB", help="only modules whose path matches")
    p.add_argument("--nonfinite", action="store_true", help="only frames with a NaN or Inf")
    p.add_argument("--json", action="store_true", help="one JSON object: frames with raw stats")
    p.add_argument(
        "--ops",
        action="store_true",
        help="also the op observer's records (ovf break-on-nan --ops), where the ops ran",
    )
    p.add_argument(
        "--all-ops",
        action="store_true",
        help=(
            "with --ops: also the ops that only set memory up (zero_, fill_, zeros, ...), "
            "which are left out unless one of them is non-finite"
        ),
    )
    p.add_argument(
        "--headroom",
        action="store_true",
        help=(
            "each line's headroom (ovf watch --headroom): abs max as a share of the dtype's "
            "largest value, values below its smallest normal"
        ),
    )


def run(session, args):
    ring = session.ring()
    count = args.count or ring.header.max_frames_to_save or 21
    keep = _filter(ring, args)
    walk = walk_back(ring, count, keep=keep)
    if args.json:
        return json.dumps(_as_json(ring, walk, args.ops), indent=1) + "\n"
    notes = list(ring.notes)
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
        args.ops,
        args.headroom,
        ring.module,
        walk.trailing_ops,
        args.all_ops,
    )


def _filter(ring, args):
    tests = []
    if args.batch is not None:
        tests.append(lambda f: f.batch == args.batch)
    if args.module is not None:
        tests.append(lambda f: fnmatch.fnmatchcase(ring.text(f.header.name_id), args.module))
    if args.nonfinite:
        tests.append(lambda f: f.nonfinite)
    if not tests:
        return None
    return lambda frame: all(test(frame) for test in tests)


def _number(x):
    """JSON has no inf/nan: those become the strings "inf", "-inf", "nan"."""
    return x if math.isfinite(x) else ("nan" if math.isnan(x) else ("inf" if x > 0 else "-inf"))


def _line(ring, r):
    out = {"seq": r.seq, "kind": layout.KIND_NAMES[r.kind], "label": ring.text(r.label_id)}
    if r.flags & layout.FLAG_HAS_STATS:
        out.update(
            dtype=layout.DTYPE_NAMES[r.dtype] if r.dtype < len(layout.DTYPE_NAMES) else "unknown",
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
    elif r.flags & layout.FLAG_NO_DATA:
        out["no_data"] = True
    if r.kind in (layout.KIND_OP_OUTPUT, layout.KIND_BUFFER):
        role = (
            "producer"
            if r.flags & layout.FLAG_PRODUCER
            else (
                "carrier"
                if r.flags & layout.FLAG_CARRIER
                else "constant" if r.flags & layout.FLAG_CONSTANT else None
            )
        )
        out.update(
            op=ring.text(r.name_id),
            module=ring.module(r.context_id, None),
            batch=r.batch,
            backward=bool(r.flags & layout.FLAG_BACKWARD),
            role=role,
        )
    return out


def _as_json(ring, walk, with_ops=False):
    h = ring.header
    frames = [
        {
            "seq": f.seq,
            "batch": f.batch,
            "module": ring.text(f.header.name_id),
            "class": ring.text(f.header.label_id),
            "nonfinite": f.nonfinite,
            "root": bool(f.header.flags & layout.FLAG_ROOT),
            "truncated": bool(f.header.flags & layout.FLAG_TRUNCATED),
            "batch_starts": [m.batch for m in f.markers],
            "lines": [_line(ring, r) for r in f.lines],
            **({"ops": [_line(ring, r) for r in f.ops]} if with_ops else {}),
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
        "notes": ring.notes + ([walk.stopped_by.describe()] if walk.stopped_by else []),
        "frames": frames,
        **({"trailing_ops": [_line(ring, r) for r in walk.trailing_ops]} if with_ops else {}),
    }
