"""The one-screen text printed when the debugger stops at an event."""

from ovf_ring import cast, compiled, device, early, layout, samples, scaler
from ovf_ring.event import bit_name, judged_lines, replay_lines
from ovf_ring.first_value import carried_from, op_line
from ovf_ring.frames import previous_frame, walk_back
from ovf_ring.identity import rank_text
from ovf_ring.report import COLUMN_HEADER, PREFIX, format_8_2e, format_record, reference_min_max

LINES_PER_FRAME = 8  # one screen: the event's frame and the one before, cut here


def title(ring, event):
    """ "first non-finite value (inf) at batch 2, frame 41" and the like."""
    bits = event.bits
    h = ring.header
    if event.scaler is not None:
        return f"{ring.text(event.scaler.name_id)} gave up at batch {event.batch}"
    if event.warning is not None:
        return f"early warning at batch {event.batch}, before any inf/nan"
    if bits & (layout.STOP_NAN | layout.STOP_INF | layout.STOP_BACKWARD):
        line = event.op or (event.offending[0][1] if event.offending else None)
        kinds = (
            ("nan", bool(line and line.nan_count)),
            ("inf", bool(line and line.pos_inf_count + line.neg_inf_count)),
        )
        if not bits & layout.STOP_BACKWARD:
            kinds = (("nan", bits & layout.STOP_NAN), ("inf", bits & layout.STOP_INF))
        what = " and ".join(n for n, on in kinds if on)
        end = event.frame.end_seq if event.frame is not None else event.seq + 1
        first = "first " if event.seq <= h.first_nonfinite_seq < end else ""
        text = f"{first}non-finite value ({what})" + (
            " in the backward pass" if bits & layout.STOP_BACKWARD else ""
        )
    elif bits & layout.STOP_ABOVE:
        text = f"abs max above {format_8_2e(ring.control.above).strip()}"
        target = layout.HEADROOM_BY_DTYPE.get(ring.control.headroom_dtype)
        if target is not None:
            text += f" ({ring.control.above / target[1]:g} of {target[0]}'s max {target[1]:g})"
    elif bits & layout.STOP_BELOW:
        text = f"non-zero abs min below {format_8_2e(ring.control.below).strip()}"
    elif bits & layout.STOP_CAST:
        text = cast.event_text(ring.control)
    elif bits & layout.STOP_ABORT_AFTER:
        return (
            f"batch {h.batch - 1} finished (abort-after {ring.control.abort_after_batch}); "
            "`continue` raises the reference's ValueError"
        )
    else:
        text = "traced frame"
    if event.checkpoint is not None:
        return f"{text} at batch {event.batch}, detect_overflow checkpoint"
    if event.op is not None and event.op.kind == layout.KIND_GRAD:
        return (
            f"{text} at batch {event.batch}, {ring.text(event.op.label_id)} of"
            f" {ring.text(event.op.name_id)}"
        )
    if event.op is not None and event.op.kind == layout.KIND_BUFFER:
        op = event.op
        module = ring.module(op.context_id, "no module")
        return (
            f"{text} at batch {event.batch}, buffer {ring.text(op.name_id)}, made non-finite"
            f" by the forward of {module}"
        )
    if event.op is not None:
        op = event.op
        role = (
            ", produced here"
            if op.flags & layout.FLAG_PRODUCER
            else ", carried in"
            if op.flags & layout.FLAG_CARRIER
            else ""
        )
        module = ring.module(op.context_id, "no module")
        return f"{text} at batch {event.batch}, op {ring.text(op.name_id)} in {module}{role}"
    newest = walk_back(ring, 1).frames
    number = f", frame {h.frames_written - 1}" if newest and newest[0].seq == event.seq else ""
    return f"{text} at batch {event.batch}{number}"


def _counts(line):
    dtype = layout.dtype_name(line.dtype)
    finite = line.numel - line.nan_count - line.pos_inf_count - line.neg_inf_count
    span = (
        f"finite abs min {format_8_2e(line.abs_min).strip()}, abs max"
        f" {format_8_2e(line.abs_max).strip()}"
        if finite > 0
        else "no finite value"
    )
    return (
        f"{line.numel} {dtype} values: nan {line.nan_count}, +inf {line.pos_inf_count}, "
        f"-inf {line.neg_inf_count}, zero {line.zero_count}; {span}"
    )


def _culprit(ring, event, bit, line):
    """ "blocks.1.amp (Amplifier): output abs max inf  (input[0] abs max 8.47e-01)"."""
    record = event.record
    if event.checkpoint is not None:
        where = ring.text(record.name_id)
        label = "value"
    elif event.op is not None and record.kind == layout.KIND_GRAD:
        where = ring.text(record.name_id)
        label = ring.text(line.label_id)
    elif event.op is not None:
        module = ring.module(record.context_id)
        where = f"{module}: {ring.text(record.name_id)}"
        label = ring.text(line.label_id)
    else:
        where = f"{ring.text(record.name_id)} ({ring.text(record.label_id)})"
        label = ring.text(line.label_id)
    lo, hi = reference_min_max(line)
    if bit == layout.STOP_BELOW:
        value = f"non-zero abs min {format_8_2e(line.abs_min_nonzero).strip()}"
    elif bit == layout.STOP_CAST:
        value = cast.culprit_text(line, ring.control)
    else:
        value = f"abs max {format_8_2e(hi).strip()}"
    text = f"{where}: {label} {value}"
    inputs = [
        r
        for r in (event.frame.lines if event.frame else ())
        if r.kind == layout.KIND_INPUT
        and r.flags & layout.FLAG_HAS_STATS
        and r.numel
        and r is not line
    ]
    if inputs:
        text += (
            f"  ({ring.text(inputs[0].label_id)} abs max"
            f" {format_8_2e(reference_min_max(inputs[0])[1]).strip()})"
        )
    return text


def _program_line(ring, event):
    """ "model.py:66 in forward": the program's line that ran the event's op (a
    backward op's forward line), or "" where there is none to tell."""
    return op_line(ring, event.op) if event.op is not None else ""


def _carried_from(ring, event):
    """How the first non-finite value reached a forward op that carried it in (as
    the runtime's report says it, report.cpp's carried_from), or ""."""
    op = event.op
    if (
        op is None
        or op.kind != layout.KIND_OP_OUTPUT
        or op.flags & layout.FLAG_BACKWARD
        or not op.flags & layout.FLAG_CARRIER
        or event.seq != ring.header.first_nonfinite_seq
        or op.diagnosis_id != layout.NO_ID  # its why names the collective it came through
    ):
        return ""
    return "carried in" + carried_from(ring, op.aux_id)


def _frame_block(ring, frame, note):
    records = [frame.header, *frame.lines]
    text = [format_record(r, ring.text) for r in records[: LINES_PER_FRAME + 1]]
    text[0] += f"    <- {note}"
    if len(records) > LINES_PER_FRAME + 1:
        # an optimizer step is not in the reference's listing: no command shows the rest
        where = " (ovf frames 2)" if frame.header.kind == layout.KIND_FRAME else ""
        text.append(f"{PREFIX} ... {len(records) - LINES_PER_FRAME - 1} more lines{where}")
    return text


def stop_summary(ring, event, chosen=None):
    """The text for a stop at `event`; `chosen` is the (bit, line) to name, by
    default the first offending line."""
    # Under torchrun every rank may stop: say which one this is.
    rank = rank_text(ring.header)
    out = [f"ovf: {rank + ': ' if rank else ''}{title(ring, event)}"]
    if event.scaler is not None:
        out += [f"     {line}" for line in scaler.stop_lines(ring, event.scaler)]
    if event.warning is not None:
        out.append(f"     {early.text(ring, event.warning)}")
    shown = []  # the frames listed below
    culprit = chosen or (event.offending[0] if event.offending else None)
    where = _program_line(ring, event)
    if where:
        out.append(f"     at {where}")
    carried = _carried_from(ring, event)
    if carried:
        out.append(f"     {carried}")
    if culprit is not None:
        bit, line = culprit
        out.append(f"     {_culprit(ring, event, bit, line)}")
        out.append(
            f"     {bit_name(bit)} in"
            f" {ring.text(line.name_id if event.checkpoint else line.label_id)}: {_counts(line)}"
        )
        out += judged_lines(ring, line, prefix="     ")
        out += replay_lines(ring, line.seq, prefix="     ")
        if line.seq == ring.header.first_nonfinite_seq:
            out += [f"     {text}" for text in samples.first_lines(ring, line, rows_always=True)]
    if event.frame is not None:
        out.append(COLUMN_HEADER)
        before = previous_frame(ring, event.frame)
        if before is not None:
            out += _frame_block(ring, before, "previous frame")
        out += _frame_block(ring, event.frame, "this frame")
        shown += [f for f in (before, event.frame) if f is not None]
    if event.op is not None:
        # The module's forward is still running: show the last frame that
        # finished before the op, then the op itself.
        out.append(COLUMN_HEADER)
        before = walk_back(ring, 1, end_seq=event.seq).frames
        if before:
            out += _frame_block(ring, before[0], "last frame before the op")
            shown.append(before[0])
        what = "this gradient" if event.op.kind == layout.KIND_GRAD else "this op"
        out.append(f"{format_record(event.op, ring.text, ring.module)}    <- {what}")
    unseen = compiled.note(shown)
    if unseen:
        out.append(unseen)
    late = device.late_note(ring.header, op=event.op is not None)
    if late is not None:
        out.append(f"ovf: {late}")
    # The runtime took a snapshot of the Python stack at the event (none in a
    # C++ program, which has no Python line to show).
    python = (
        "`ovf py-bt` shows the Python line, `ovf py-locals` its locals, "
        if ring.header.snapshot_addr
        else ""
    )
    if ring.header.step_state in (layout.STEPPING_AT_EVENT, layout.STEPPING_ENDED):
        python += "`ovf step-into` replays the step into the producing module, "
    out.append(f"ovf: {python}`ovf frames` the frames before, `continue` runs to the next event")
    return "\n".join(out) + "\n"
