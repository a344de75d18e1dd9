"""A loss scaler's records (layout 4's SCALER kind): its history for `ovf status`
and `ovf frames`, and why it gave up (runtime/core/report_scaler.cpp words the
same in the process)."""

from . import layout
from .ring import BadSlot


def updates(ring, newest=None):
    """The SCALER records still in the ring, oldest first (at most `newest` of the
    latest)."""
    found = ring.records_of_kind(layout.KIND_SCALER)
    return found[-newest:] if newest else found


def update_text(ring, r):
    """ "GradScaler skipped the step (2 in a row): scale 65536 -> 32768; 0.weight's gradient" """
    name = ring.text(r.name_id)
    if not r.skips_in_row:
        return f"{name} changed its scale: {r.scale_before:g} -> {r.scale_after:g}"
    which = "" if r.label_id == layout.NO_ID else f"; {ring.text(r.label_id)}'s gradient non-finite"
    return (
        f"{name} skipped the step ({r.skips_in_row} in a row): scale {r.scale_before:g} ->"
        f" {r.scale_after:g}{which}"
    )


def history(ring):
    """One line for `ovf status`, or "" when no scaler wrote a record."""
    found = updates(ring)
    if not found:
        return ""
    skips = [r for r in found if r.skips_in_row]
    last = found[-1]
    text = f"{len(skips)} skipped step{'s' if len(skips) != 1 else ''} in the ring"
    if skips:
        text += f" (last at batch {skips[-1].batch})"
    return f"{ring.text(last.name_id)}: {text}; scale now {last.scale_after:g}"


def _first_of_run(ring, last):
    """The run's first skip (skips_in_row counts down by one per update of the
    run); `last` when the ring lost the others."""
    first = last
    for r in reversed(updates(ring)):
        if first.skips_in_row <= 1:
            break
        if r.seq < first.seq and r.skips_in_row == first.skips_in_row - 1:
            first = r
    return first


def _cause_text(ring, cause):
    """Where the value a skip found was made: a producing op or module gradient."""
    if cause.kind == layout.KIND_GRAD:
        return (
            f"was the gradient of {ring.module(cause.name_id, 'no module')}'s"
            f" {ring.text(cause.label_id)[5:]} in the backward pass (batch {cause.batch})"
        )
    module = ring.module(cause.context_id, "no module")
    at = "" if cause.location_id == layout.NO_ID else f" at {ring.text(cause.location_id)}"
    if cause.flags & layout.FLAG_BACKWARD:
        of = "an unknown op" if cause.aux_id == layout.NO_ID else ring.text(cause.aux_id)
        return (
            f"was produced in the backward pass by {ring.text(cause.name_id)}, the gradient of"
            f" {of} in {module}{at} (batch {cause.batch})"
        )
    return f"was produced by {ring.text(cause.name_id)} in {module}{at} (batch {cause.batch})"


def stop_lines(ring, last):
    """Why the scaler's update `last` stopped the run: lines without "ovf: "."""
    first = _first_of_run(ring, last)
    skips = last.skips_in_row
    floor = ring.control.scale_floor
    if floor > 0 and last.scale_after < floor <= last.scale_before:
        why = f", below the floor {floor:g} (--scale-floor)"
    else:
        why = f" (--scaler-skips {skips})"
    span = f"batch {first.batch}" + ("" if skips == 1 else f" to {last.batch}")
    lines = [
        f"{ring.text(last.name_id)} skipped {skips} step{'' if skips == 1 else 's in a row'}"
        f" ({span}): the gradients were non-finite each time, and its scale went from"
        f" {first.scale_before:g} to {last.scale_after:g}{why}"
    ]
    which = (
        "a gradient"
        if first.label_id == layout.NO_ID
        else f"{ring.text(first.label_id)}'s gradient"
    )
    cause = None if first.cause_seq == layout.NO_SEQ else ring.record(first.cause_seq)
    if cause is None or isinstance(cause, BadSlot):
        lines.append(
            f"the first skip found {which} non-finite; the op that made it ran unseen:"
            " --ops --backward names it and its forward line"
        )
        return lines
    lines.append(
        f"the first skip's first non-finite value ({which} held one) {_cause_text(ring, cause)}"
    )
    if cause.diagnosis_id != layout.NO_ID:
        lines.append(f"why: {ring.text(cause.diagnosis_id)}")
    return lines
