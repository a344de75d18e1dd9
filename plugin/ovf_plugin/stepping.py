"""Stepping into the replayed step: `ovf step-into`, `ovf next`, `ovf step`, `ovf finish`.

At an event whose replay named the op that made the value, the runtime is inside the
stop hook with the step's inputs at hand. A move is one control-block write
(step_request) and a `continue`: the runtime replays the step (step-into) or goes on
in it, and calls the stop hook again at the line asked for, with the header's
step_state and step_where_id saying where and the snapshot holding that frame's live
locals. Nothing of the debugger's runs in the process. A plain `continue` at a line
ends the replay; the event's stop comes again, the process's state as it was.
"""

from ovf_ring import layout, snapshot
from ovf_ring.errors import OvfError
from ovf_ring.python_stack import source_line
from ovf_ring.ring import BadSlot
from ovf_ring.target import TargetMemoryError

REQUESTS = {
    "step-into": layout.STEP_INTO,
    "next": layout.STEP_NEXT,
    "step": layout.STEP_STEP,
    "finish": layout.STEP_FINISH,
}
AT_LINE = (layout.STEPPING_AT_LINE, layout.STEPPING_RETURNED)
AT_EVENT = (layout.STEPPING_AT_EVENT, layout.STEPPING_ENDED)
MOVES = "`ovf next`, `ovf step`, `ovf finish` move on, `ovf py-locals` shows the live locals"


def move(session, name):
    """Asks the runtime for the move `name` and resumes the process; returns what the
    front end printed for the resume (the next stop is reported by the breakpoint)."""
    if session.control is None or session.target.kind() != "live":
        raise OvfError(
            f"ovf {name}: no live process: stepping replays the step in the running process"
            " (a core file has no process to run)"
        )
    ring = session.ring()
    state = ring.header.step_state
    if name == "step-into" and state not in AT_EVENT:
        raise OvfError(f"ovf step-into: {_nothing_to_step_into(ring)}")
    if name != "step-into" and state not in AT_LINE:
        raise OvfError(
            f"ovf {name}: not at a line of a replayed step: `ovf step-into` first, at an"
            " event whose replay named the op that made the value"
        )
    if not session.control.stop_breakpoint_enabled():
        raise OvfError(
            f"ovf {name}: the stop breakpoint on {layout.STOP_FUNCTION} is deleted or disabled:"
            " the replay would run through every line without stopping; `ovf break-on-nan`"
            " sets it again"
        )
    offset, data = layout.encode_control_field("step_request", REQUESTS[name])
    try:
        session.target.write_memory(ring.address + offset, data)
    except TargetMemoryError as e:
        raise OvfError(f"ovf {name}: cannot write the control block: {e}") from None
    return session.control.resume()


def _nothing_to_step_into(ring):
    h = ring.header
    if h.layout_version < 9:
        return f"this runtime (ring layout {h.layout_version}) cannot step: it predates step-into"
    if h.step_state in AT_LINE:
        return "already in the replayed step: `ovf next`, `ovf step`, `ovf finish`, or `continue`"
    frame = ring.record(h.last_event_seq) if h.last_event_seq != layout.NO_SEQ else None
    if frame is None or isinstance(frame, BadSlot):
        return "the process is not stopped at an ovf event (`ovf break-on-nan`, then `run`)"
    if frame.kind == layout.KIND_OP_OUTPUT:
        return (
            "this stop came from --ops, which stops after the op that made the value; stepping"
            " replays a module-mode event (break-on-nan without --ops)"
        )
    if frame.kind == layout.KIND_STEP:
        return (
            "the value was written by an optimizer's step, not in a module's forward: nothing"
            " to step into (the stop summary has what its replay found)"
        )
    if frame.kind == layout.KIND_FRAME and frame.verdict_id != layout.NO_ID:
        return f"nothing to step into at this stop: {ring.text(frame.verdict_id)}"
    return (
        "the process is not stopped at an ovf event whose replay named the op that made the"
        " value (a module-mode NaN/Inf stop, with the replay on)"
    )


def stop_text(ring):
    """The stop at a line of the replayed step (OVF_STOP_STEP)."""
    h = ring.header
    where = ring.text(h.step_where_id) if h.step_where_id != layout.NO_ID else "?"
    out = [f"ovf: step: {where}"]
    snap = snapshot.read(ring)
    here = next((f for f in snap.frames if f.user), None)
    if here is not None:
        text = source_line(here.file, here.line)
        mark = _producing_line_mark(ring, where)
        out.append(f"  {here.line:>5}  {text}{mark}" if text else f"  {here.line:>5}{mark}")
    if h.step_state == layout.STEPPING_RETURNED:
        out.append(
            "ovf: `ovf py-locals` shows the live locals; a move or `continue` ends the replay"
        )
    else:
        out.append(f"ovf: {MOVES}; `continue` ends the replay")
    return "\n".join(out) + "\n"


def _producing_line_mark(ring, where):
    """ "   <- aten::softmax here made the value" where the line is the producing op's."""
    frame = ring.record(ring.header.last_event_seq)
    if isinstance(frame, BadSlot) or frame.cause_seq == layout.NO_SEQ:
        return ""
    op = ring.record(frame.cause_seq)
    if isinstance(op, BadSlot) or op.location_id == layout.NO_ID:
        return ""
    if not where.startswith(ring.text(op.location_id) + " "):
        return ""
    return f"    <- {ring.text(op.name_id)} here made the value"


def back_at_event_note(ring):
    """The line before the event's summary when a replayed step ended ("" otherwise)."""
    h = ring.header
    if h.step_state not in (layout.STEPPING_ENDED, layout.STEPPING_REFUSED):
        return ""
    said = ring.text(h.step_where_id) if h.step_where_id != layout.NO_ID else "the replay ended"
    return f"ovf: {said}\n"
