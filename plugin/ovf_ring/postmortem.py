"""Core files read without a debugger (python3 -m ovf.postmortem CORE...):
one summary per core, its frames as `ovf frames` lists them, and, given one
core per rank, which rank went non-finite first.

A torchrun job that dies leaves a core for each rank that aborted. The rank
whose NaN/Inf came first is the one to look at: the others usually inherited
it through a collective. Every record carries the CLOCK_REALTIME of its frame
(ring.h), so each ring's first non-finite line orders the ranks; across hosts
the order is as good as the agreement of their clocks.
"""

import datetime
from dataclasses import dataclass, field

from . import compiled, device, early, layout, listing, samples, scaler
from .core_target import CoreTarget
from .errors import OvfError
from .event import describe_seq, replay_lines, verdict_lines
from .identity import process_text
from .python_stack import backtrace, local_values
from .ring import BadSlot, locate


@dataclass
class Core:
    path: str
    error: str = ""  # one line: why the core cannot be read (ring None), or read only in part
    target: CoreTarget = None
    ring: object = None  # ring.Ring
    first: layout.Record = None  # the first non-finite line, while still in the ring
    notes: list = field(default_factory=list)

    @property
    def rank(self):
        return self.ring.header.rank

    def who(self):
        """ "rank 1" (or "pid 1234" outside torch.distributed) and the file."""
        h = self.ring.header
        return (f"rank {h.rank}" if h.rank >= 0 else f"pid {h.pid}") + f" ({self.path})"

    def close(self):
        if self.target is not None:
            self.target.close()


def open_core(path):
    """A Core; its `error` says why, if the file holds no readable ring."""
    core = Core(path)
    try:
        target = CoreTarget(path)
    except OvfError as e:
        core.error = str(e)  # names the file already
        return core
    core.target = target
    try:
        core.ring = locate(target)
    except OvfError as e:
        why = str(e).removeprefix("ovf: ")
        cut = (
            f" is cut short ({target.size} of {target.expected_size} bytes)"
            if target.size < target.expected_size
            else ""
        )
        core.error = f"ovf: {path}{cut}: {why}"
        core.close()
        return core
    # What is there is still shown, but a partial core is an error all the same.
    core.error = target.cut_short()
    seq = core.ring.header.first_nonfinite_seq
    if seq != layout.NO_SEQ:
        record = core.ring.record(seq)
        if isinstance(record, BadSlot):
            core.notes.append(
                f"ovf: the first non-finite {describe_seq(core.ring, seq)}; "
                "this core cannot be ordered against the others"
            )
        else:
            core.first = record
    return core


def _clock(ns):
    return (
        datetime.datetime.fromtimestamp(ns / 1e9).strftime("%Y-%m-%d %H:%M:%S.")
        + f"{ns % 10**9:09d}"
    )


def summary(core, ring_notes=False):
    """Whose core it is and its first non-finite value, then what is amiss with
    it; `ring_notes`: also how the ring was found and what compiled code hid
    (`ovf frames` says both too)."""
    h = core.ring.header
    first = describe_seq(core.ring, h.first_nonfinite_seq)
    if core.first is not None:
        first += f", at {_clock(core.first.timestamp_ns)}"
    scaled = scaler.history(core.ring)
    warned = early.warning(core.ring)
    event = core.ring.record(h.last_event_seq) if h.last_event_kind & layout.STOP_SCALER else None
    gave_up = (
        [] if event is None or isinstance(event, BadSlot) else scaler.stop_lines(core.ring, event)
    )
    lines = [
        f"{core.path}: {process_text(h)}, batch {h.batch}, {h.frames_written} frames",
        f"first non-finite: {first}",
        *verdict_lines(core.ring, h.first_nonfinite_seq, prefix="  "),
        *replay_lines(core.ring, h.first_nonfinite_seq, prefix="  "),
        *(f"  {line}" for line in samples.first_lines(core.ring, core.first)),
        *([f"loss scaler: {scaled}"] if scaled else []),
        *([early.line(core.ring, warned, prefix="")] if warned is not None else []),
        *(f"{'  ' if i else 'loss scaler gave up: '}{line}" for i, line in enumerate(gave_up)),
        *device.status_lines(h),
        *core.notes,
        *(core.ring.notes if ring_notes else ()),
    ]
    unseen = compiled.status_line(core.ring) if ring_notes else None
    if unseen:
        lines.append(unseen)
    return "\n".join(lines) + "\n"


def frames(core, count=None):
    """`ovf frames [count]` of the core, as text (count None: the runtime's
    max_frames_to_save, as `ovf frames` has it)."""
    return listing.text(core.ring, listing.Selection(count=count))


def python_stack(core):
    """`ovf py-bt` and `ovf py-locals` of the core (the event snapshot), or the
    one line that says why there is none."""
    try:
        return backtrace(core.ring) + local_values(core.ring)
    except OvfError as e:
        return f"{e}\n"


def order(cores):
    """The readable cores with a first non-finite value, earliest first."""
    return sorted(
        (c for c in cores if c.first is not None), key=lambda c: (c.first.timestamp_ns, c.path)
    )


def ordering(cores):
    """Which rank went non-finite first, and when the others followed."""
    readable = [c for c in cores if c.ring is not None]
    ranked = order(readable)
    out = []
    ranks = [c.rank for c in readable if c.rank >= 0]
    if len(set(ranks)) != len(ranks):
        out.append("ovf: several cores have the same rank: they may come from different runs")
    if not ranked:
        return out + ["ovf: no core holds a non-finite value"]
    t0 = ranked[0].first.timestamp_ns
    rows = [
        (
            c.who(),
            _clock(t0) if c is ranked[0] else f"+{(c.first.timestamp_ns - t0) / 1e9:.6f} s",
            describe_seq(c.ring, c.first.seq),
        )
        for c in ranked
    ]
    rows += [
        (
            c.who(),
            "-",
            (
                "its first non-finite record was overwritten"
                if c.ring.header.first_nonfinite_seq != layout.NO_SEQ
                else "no non-finite value"
            ),
        )
        for c in readable
        if c.first is None
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    out.append("ovf: first non-finite value of each core, earliest first:")
    out += [f"  {who:<{widths[0]}}  {at:<{widths[1]}}  {what}" for who, at, what in rows]
    tied = [c for c in ranked if c.first.timestamp_ns == t0]
    if len(tied) > 1:
        out.append(
            "ovf: " + " and ".join(c.who() for c in tied) + " went non-finite at the same time"
        )
    else:
        out.append(f"ovf: {ranked[0].who()} went non-finite first")
    return out


def _first_json(core):
    r = core.first
    if r is None:
        return None
    ring = core.ring
    if r.kind == layout.KIND_CHECKPOINT:
        module, cls, label = ring.text(r.name_id), "", ""
    else:
        frame = ring.record(r.frame_seq)
        ok = not isinstance(frame, BadSlot)
        module = ring.text(frame.name_id) if ok else None
        cls = ring.text(frame.label_id) if ok else None
        label = ring.text(r.label_id)
    return {
        "seq": r.seq,
        "batch": r.batch,
        "timestamp_ns": r.timestamp_ns,
        "kind": layout.KIND_NAMES[r.kind],
        "module": module,
        "class": cls,
        "label": label,
        **samples.first_json(ring, r),
    }


def as_json(cores, count=None):
    """One JSON document for all cores: each core's header, first non-finite
    value and frames (`ovf frames --json`; none when count is 0), and the
    order of the ranks."""
    out = []
    for core in cores:
        if core.ring is None:
            out.append({"path": core.path, "error": core.error})
            continue
        h = core.ring.header
        error = {"error": core.error} if core.error else {}
        listed = (
            {"notes": [], "frames": []}
            if count == 0
            else listing.data(core.ring, listing.Selection(count=count))
        )
        out.append(
            {
                "path": core.path,
                "pid": h.pid,
                "rank": h.rank,
                "local_rank": h.local_rank,
                "world_size": h.world_size,
                "device_index": h.device_index,
                "batch": h.batch,
                "first_nonfinite": _first_json(core),
                "notes": core.notes + listed["notes"],
                "frames": listed["frames"],
                **error,
            }
        )
    ranked = order(cores)
    return {
        "cores": out,
        "order": [c.path for c in ranked],
        "first": {"path": ranked[0].path, "rank": ranked[0].rank} if ranked else None,
    }
