"""The first non-finite value of a ring in the runtime's own words: what
runtime/core/report.cpp's describe_nonfinite and event_summary.cpp's event summary
say of it in the process, read here from a live process or a core instead, so that
`python3 -m ovf.ranks` judges rings and summaries alike."""

import os

from . import layout, samples, snapshot
from .errors import OvfError
from .ring import BadSlot

SUMMARY_VERSION = 1  # event_summary.h's kEventSummaryVersion
KIND_WORDS = {
    layout.KIND_OP_OUTPUT: "op",
    layout.KIND_GRAD: "gradient",
    layout.KIND_BUFFER: "buffer",
    layout.KIND_STEP_PARAM: "optimizer step",
    layout.KIND_WEIGHT: "parameter",
    layout.KIND_INPUT: "module input",
    layout.KIND_OUTPUT: "module output",
    layout.KIND_CHECKPOINT: "checkpoint",
}
EVENT_WORDS = (
    (layout.STOP_NAN, "nan"),
    (layout.STOP_INF, "inf"),
    (layout.STOP_BACKWARD, "backward"),
)


def user_line(ring, *seqs):
    """ "model.py:66 in forward": the program's line in the event snapshot where it was
    taken at one of the records `seqs` (snapshot.cpp's user_line_at), or "" where the
    snapshot is of another event or there is none."""
    try:
        snap = snapshot.read(ring)
    except OvfError:
        return ""
    if snap.event_seq not in seqs:
        return ""
    for frame in snap.frames:
        if frame.user:
            return f"{os.path.basename(frame.file)}:{frame.line} in {frame.function}"
    return ""


def carried_from(ring, gradient_of):
    """Where a value a forward op carried in came from (report.cpp's carried_from)."""
    if gradient_of == layout.NO_ID:
        return (
            " from a value no op ovf watched made (made before ovf started, or outside the ops "
            "it sees)"
        )
    return (
        f" by the gradient of {ring.text(gradient_of)}: it was made in the backward pass, which"
        " ovf did not watch (--backward names the op that made it and its forward line)"
    )


def module_of(ring, r):
    """The module `r` belongs to, as `ovf frames` names it ("" for none)."""
    if r.kind in (layout.KIND_OP_OUTPUT, layout.KIND_BUFFER):
        return ring.module(r.context_id, "")
    if r.kind == layout.KIND_GRAD:
        return ring.module(r.name_id, "")
    if r.kind == layout.KIND_STEP_PARAM:
        return ring.text(r.label_id)  # the parameter's path
    frame = ring.record(r.frame_seq)
    if isinstance(frame, BadSlot) or frame.kind != layout.KIND_FRAME:
        return ""
    return ring.module(frame.name_id, "")


def replay(ring, r):
    """What the replay at the event found for the module line (optimizer step's
    parameter) `r` (event_summary.cpp's replay_json): {"said", "op", "module", "line",
    "why", "verdict"}, or None."""
    frame = r if r.kind == layout.KIND_FRAME else ring.record(r.frame_seq)
    if (
        r.kind == layout.KIND_OP_OUTPUT
        or isinstance(frame, BadSlot)
        or frame.kind not in (layout.KIND_FRAME, layout.KIND_STEP)
        or frame.verdict_id == layout.NO_ID
    ):
        return None
    out = {"said": ring.text(frame.verdict_id)}
    op = ring.record(frame.cause_seq) if frame.cause_seq != layout.NO_SEQ else None
    if op is None or isinstance(op, BadSlot):
        return {**out, "op": None}

    def text(i):
        return ring.text(i) if i != layout.NO_ID else None

    return {
        **out,
        "op": text(op.name_id),
        "module": ring.module(op.context_id, ""),
        "line": text(op.location_id),
        "why": text(op.diagnosis_id),
        "verdict": text(op.verdict_id),
    }


def _step_of(ring, r):
    frame = ring.record(r.frame_seq) if r.kind == layout.KIND_STEP_PARAM else None
    return frame if frame is not None and not isinstance(frame, BadSlot) else None


def role(ring, r):
    """ "producer" where the process made `r` from finite values, else "carrier"."""
    if r.kind == layout.KIND_OP_OUTPUT:
        return "carrier" if r.flags & layout.FLAG_CARRIER else "producer"
    if r.kind == layout.KIND_STEP_PARAM:
        step = _step_of(ring, r)
        return "carrier" if step is not None and step.flags & layout.FLAG_CARRIER else "producer"
    if r.kind in (layout.KIND_OUTPUT, layout.KIND_GRAD, layout.KIND_BUFFER):
        return "producer"
    return "carrier"  # a parameter, a module's input, a checkpointed value


def what(ring, r, subject="the first non-finite value"):
    """The first line of describe_nonfinite, without "ovf: "; for a module's line,
    event_summary.cpp's own words."""
    text = lambda i: "an unknown op" if i == layout.NO_ID else ring.text(i)  # noqa: E731
    module = lambda i: ring.module(i, "no module")  # noqa: E731
    at = lambda i: "" if i == layout.NO_ID else f" at {ring.text(i)}"  # noqa: E731
    batch = f"(batch {r.batch})"
    if r.kind == layout.KIND_GRAD:
        return (
            f"{subject} was the gradient of {module(r.name_id)}'s {ring.text(r.label_id)[5:]} in"
            f" the backward pass {batch}"
        )
    if r.kind == layout.KIND_OP_OUTPUT:
        carrier = r.flags & layout.FLAG_CARRIER
        if r.flags & layout.FLAG_BACKWARD:
            gradient_of = (
                ""
                if carrier and r.aux_id == layout.NO_ID
                else f", the gradient of {text(r.aux_id)} in {module(r.context_id)}"
                f"{at(r.location_id)}"
            )
            how = (
                f"carried into {text(r.name_id)} in the backward pass"
                if carrier
                else f"produced in the backward pass by {text(r.name_id)}"
            )
            return f"{subject} was {how}{gradient_of} {batch}"
        line = op_line(ring, r)
        where = f"{text(r.name_id)} in {module(r.context_id)}{' at ' + line if line else ''}"
        if carrier:
            # its why says where the value came from (a collective), where ovf knows
            came = "" if r.diagnosis_id != layout.NO_ID else carried_from(ring, r.aux_id)
            return f"{subject} was carried into {where} {batch}{came}"
        return f"{subject} was produced by {where} {batch}"
    if r.kind == layout.KIND_BUFFER:
        return (
            f"{subject} was written into the buffer {text(r.label_id)} by the forward of"
            f" {module(r.context_id)} {batch}"
        )
    step = _step_of(ring, r)
    if step is not None and step.kind == layout.KIND_STEP:
        carried = (
            " from its gradient: it was made in the backward pass (--backward names the op that"
            " made it and its forward line)"
            if step.flags & layout.FLAG_CARRIER
            else ""
        )
        return (
            f"{subject} was written by optimizer.step ({text(step.label_id)}) into"
            f" {text(r.label_id)} (after batch {r.batch}){carried}"
        )
    return (
        f"{subject} was the {ring.text(r.label_id)} of {module_of(ring, r) or 'no module'} {batch}"
    )


def op_line(ring, r):
    """The program's line an op record names (a backward op's forward line, an op
    judged after its statistics arrived), else the snapshot's of its own record."""
    return ring.text(r.location_id) if r.location_id != layout.NO_ID else user_line(ring, r.seq)


def summary(ring, host=None):
    """The event summary the process would write for its first non-finite value
    (event_summary.cpp's fields), or None where the ring holds none. OvfError:
    its record was overwritten or cannot be read."""
    h = ring.header
    if h.first_nonfinite_seq == layout.NO_SEQ:
        return None
    r = ring.record(h.first_nonfinite_seq)
    if isinstance(r, BadSlot):
        raise OvfError(
            f"ovf: the first non-finite value of process {h.pid} was record"
            f" {h.first_nonfinite_seq}, no longer readable ({r.why})"
        )
    op = r.kind == layout.KIND_OP_OUTPUT
    # The forward line a backward op names, else where the program was at the
    # event that found the value (the snapshot, while no later event replaced it).
    if r.location_id != layout.NO_ID:
        line = ring.text(r.location_id)
    else:  # a module's line is found at the end of its frame, an op's at the op
        line = user_line(ring, r.seq) if op else user_line(ring, r.seq, r.frame_seq)
    events = h.last_event_kind if h.last_event_seq != layout.NO_SEQ else 0
    shown = samples.first_json(ring, r)
    rows = shown.get("rows")
    if rows is not None:
        rows["text"] = samples.rows_text(ring, r, samples.of_batch(ring, r.batch))
    return {
        "ovf_event_summary": SUMMARY_VERSION,
        "rank": h.rank,
        "local_rank": h.local_rank,
        "world_size": h.world_size,
        "host": host,
        "pid": h.pid,
        "batch": r.batch,
        "seq": r.seq,
        "time_ns": r.timestamp_ns,
        "events": ",".join(word for bit, word in EVENT_WORDS if events & bit),
        "kind": KIND_WORDS.get(r.kind, "other"),
        "role": role(ring, r),
        "op": ring.text(r.name_id) if op and r.name_id != layout.NO_ID else None,
        "module": module_of(ring, r),
        "line": line or None,
        "what": what(ring, r),
        "why": ring.text(r.diagnosis_id) if op and r.diagnosis_id != layout.NO_ID else None,
        "verdict": ring.text(r.verdict_id) if op and r.verdict_id != layout.NO_ID else None,
        "replay": replay(ring, r),
        "samples": shown.get("samples", []),
        "rows": rows,
    }
