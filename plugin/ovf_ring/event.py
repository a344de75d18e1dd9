"""The event the runtime stopped for: which frame, which lines, which fields."""

from dataclasses import dataclass, field

from . import cast, early, layout, scaler
from .frames import frame_at
from .ring import BadSlot


@dataclass
class Event:
    bits: int  # enum ovf_stop_bits
    seq: int  # the FRAME (or CHECKPOINT, or OP_OUTPUT) record
    frame: object = None  # frames.Frame, for module events
    checkpoint: object = None  # layout.Record, for detect_overflow events
    op: object = None  # layout.Record, for op events (the op observer)
    scaler: object = None  # layout.Record, for a loss scaler that gave up (SCALER)
    warning: object = None  # layout.Record, for an early warning (WARNING)
    offending: list = field(default_factory=list)  # [(bit, line)] that caused it

    @property
    def record(self):
        if self.frame is not None:
            return self.frame.header
        if self.scaler is not None:
            return self.scaler
        if self.warning is not None:
            return self.warning
        return self.checkpoint if self.checkpoint is not None else self.op

    def module_id(self):
        """The module the event happened in: an op's enclosing module, else the record's."""
        return self.op.context_id if self.op is not None else self.record.name_id

    @property
    def batch(self):
        return self.record.batch


def last_event(ring):
    """The runtime's latest stop event (header.last_event_seq), or None."""
    h = ring.header
    if h.last_event_seq == layout.NO_SEQ:
        return None
    return event_at(ring, h.last_event_seq, h.last_event_kind)


def event_at(ring, seq, bits):
    """The event of stop `bits` whose record is `seq`, or None where it cannot be read."""
    r = ring.record(seq)
    if isinstance(r, BadSlot):
        return None
    event = Event(bits=bits, seq=r.seq)
    if r.kind == layout.KIND_CHECKPOINT:
        event.checkpoint = r
        lines = [r]
    elif r.kind == layout.KIND_SCALER:
        event.scaler = r
        lines = []
    elif r.kind == layout.KIND_WARNING:
        event.warning = r
        lines = []
    elif r.kind in (layout.KIND_OP_OUTPUT, layout.KIND_GRAD, layout.KIND_BUFFER):
        event.op = r  # a gradient record names its module the way an op record does
        lines = [r]
    else:
        event.frame = frame_at(ring, r.seq)
        if event.frame is None:
            return None
        lines = event.frame.lines
    event.offending = offending_lines(lines, event.bits, ring.control)
    return event


def offending_lines(lines, bits, control):
    """[(bit, line)]: the lines that fire each of `bits`, by the runtime's rules."""
    found = []
    for line in lines:
        if not line.flags & layout.FLAG_HAS_STATS or line.numel == 0:
            continue
        if bits & layout.STOP_BACKWARD and line.flags & layout.FLAG_NONFINITE:
            found.append((layout.STOP_BACKWARD, line))
        if bits & layout.STOP_NAN and line.nan_count:
            found.append((layout.STOP_NAN, line))
        if bits & layout.STOP_INF and line.pos_inf_count + line.neg_inf_count:
            found.append((layout.STOP_INF, line))
        if line.dtype in layout.FLOAT_DTYPES:
            if bits & layout.STOP_ABOVE and line.abs_max > control.above:
                found.append((layout.STOP_ABOVE, line))
            if bits & layout.STOP_BELOW and line.abs_min_nonzero < control.below:
                found.append((layout.STOP_BELOW, line))
            if bits & layout.STOP_CAST and cast.over_limit(line, control) is not None:
                found.append((layout.STOP_CAST, line))
    return found


def bit_name(bit):
    return next(name for name, value in layout.STOP_NAMES if value == bit)


def condition_holds(condition, ring, event, bits):
    """Whether `condition` (an --if Condition) holds for one line that fires one of
    `bits` in `event`. OvfError: the expression could not be evaluated."""
    return any(
        condition(line_fields(ring, event, bit, line))
        for bit, line in event.offending
        if bit & bits
    )


def line_fields(ring, event, bit, line):
    """The names an `--if` expression sees for one offending line."""
    header = event.record
    return {
        "absmax": line.abs_max,
        "absmin": line.abs_min,
        "nan": line.nan_count,
        "inf": line.pos_inf_count + line.neg_inf_count,
        "numel": line.numel,
        "module": ring.text(event.module_id()),
        "op": ring.text(line.name_id) if event.op is not None else "",
        "producer": bool(line.flags & layout.FLAG_PRODUCER),
        "cls": ring.text(header.label_id) if event.frame is not None else "",
        "batch": header.batch,
        "kind": layout.KIND_NAMES[line.kind],
        "label": ring.text(line.name_id if event.checkpoint is not None else line.label_id),
        "dtype": layout.dtype_name(line.dtype),
        "event": bit_name(bit),
    }


def verdict_lines(ring, seq, prefix=""):
    """["verdict: ..."] for the record `seq` where its producing op was re-run for one
    (layout 8), else []."""
    if seq == layout.NO_SEQ:
        return []
    r = ring.record(seq)
    if isinstance(r, BadSlot) or r.verdict_id == layout.NO_ID:
        return []
    return [f"{prefix}verdict: {ring.text(r.verdict_id)}"]


def replay_lines(ring, seq, prefix=""):
    """What the replay at a module event (an optimizer step's event) found, for the
    module line (the step's parameter) `seq` (layout 8):
    ["replay: replayed the forward of Net with its ops observed (0.01 s)",
    "  aten::log in blocks.0 at train.py:16 in forward", "  why: ...", "  verdict: ..."],
    the replay's line alone where it named no op or did not run, else []."""
    if seq == layout.NO_SEQ:
        return []
    line = ring.record(seq)
    if isinstance(line, BadSlot) or line.kind == layout.KIND_OP_OUTPUT:
        return []
    frame = line if line.kind == layout.KIND_FRAME else ring.record(line.frame_seq)
    if isinstance(frame, BadSlot) or frame.kind not in (layout.KIND_FRAME, layout.KIND_STEP):
        return []
    if frame.verdict_id == layout.NO_ID:
        return []
    out = [f"{prefix}replay: {ring.text(frame.verdict_id)}"]
    op = ring.record(frame.cause_seq) if frame.cause_seq != layout.NO_SEQ else None
    if op is None:
        return out
    if isinstance(op, BadSlot):
        return out + [f"{prefix}  its op's record {frame.cause_seq} is gone: {op.why}"]
    at = f" at {ring.text(op.location_id)}" if op.location_id != layout.NO_ID else ""
    where = f"{ring.module(op.context_id, 'no module')}{at}"
    if op.flags & layout.FLAG_BACKWARD:  # the replay of an optimizer step's backward
        of = ring.text(op.aux_id) if op.aux_id != layout.NO_ID else "an unknown op"
        out.append(
            f"{prefix}  produced in the backward pass by {ring.text(op.name_id)}, the gradient"
            f" of {of} in {where}"
        )
    else:
        out.append(f"{prefix}  produced by {ring.text(op.name_id)} in {where}")
    return out + judged_lines(ring, op, prefix=f"{prefix}  ")


def judged_lines(ring, r, prefix=""):
    """["why: ...", "verdict: ..."]: what an op record says of its value, each where given."""
    out = []
    if r.diagnosis_id != layout.NO_ID:
        out.append(f"{prefix}why: {ring.text(r.diagnosis_id)}")
    if r.verdict_id != layout.NO_ID:
        out.append(f"{prefix}verdict: {ring.text(r.verdict_id)}")
    return out


def describe_seq(ring, seq):
    """ "record 124, batch 2, blocks.1.amp (Amplifier) output" and the like."""
    if seq == layout.NO_SEQ:
        return "none"
    r = ring.record(seq)
    if isinstance(r, BadSlot):
        return f"record {seq} (no longer in the ring: {r.why})"
    if r.kind == layout.KIND_CHECKPOINT:
        return f"record {seq}, batch {r.batch}, detect_overflow '{ring.text(r.name_id)}'"
    if r.kind == layout.KIND_SCALER:
        return f"record {seq}, batch {r.batch}, {scaler.update_text(ring, r)}"
    if r.kind == layout.KIND_WARNING:
        return f"record {seq}, {early.line(ring, r, prefix='')}"
    if r.kind == layout.KIND_FRAME:
        return f"record {seq}, batch {r.batch}, {ring.text(r.name_id)} ({ring.text(r.label_id)})"
    frame = ring.record(r.frame_seq)
    where = (
        ""
        if isinstance(frame, BadSlot)
        else f", {ring.text(frame.name_id)} ({ring.text(frame.label_id)})"
    )
    return f"record {seq}, batch {r.batch}{where} {ring.text(r.label_id)}"
