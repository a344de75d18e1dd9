"""An early warning (layout 5's WARNING kind): the module whose output grows toward
its dtype's limit, or the optimizer step too large for its weights, worded as
runtime/core/report_early.cpp words it in the process."""

from . import layout


def warning(ring):
    """The session's early warning still in the ring (the newest), or None."""
    found = ring.records_of_kind(layout.KIND_WARNING)
    return found[-1] if found else None


def _g(x):
    return f"{x:.3g}"


def text(ring, r):
    """The warning in one line, without the "ovf: early warning at batch N: " head."""
    if r.cause_seq != layout.NO_SEQ:  # a module's growth
        # torch's name for float8 e4m3, as the runtime's dtype_name says it in the process
        fp8_e4m3 = r.dtype == layout.HEADROOM_DTYPES["fp8_e4m3"][0]
        dtype = "float8_e4m3fn" if fp8_e4m3 else layout.dtype_name(r.dtype)
        batches = "batch" if r.skips_in_row == 1 else "batches"
        growth = _g(r.abs_max / r.scale_before)
        return (
            f"{ring.text(r.name_id)} ({ring.text(r.label_id)})'s output abs max grew from "
            f"{_g(r.scale_before)} to {_g(r.abs_max)} in one batch (x{growth})"
            f"; at that growth it passes {dtype}'s largest value {r.scale_after:g} in "
            f"{r.skips_in_row} {batches} (batch {r.batch + r.skips_in_row})"
        )
    out = (
        f"{ring.text(r.name_id)}.step() changed the weights by {_g(r.abs_max)} times their size "
        f"(|dw|/|w| over its parameters, above {_g(r.scale_after)}: --update-ratio)"
    )
    if r.label_id != layout.NO_ID:
        out += f"; the largest change: {ring.text(r.label_id)} (|dw|/|w| = {_g(r.scale_before)})"
    return out


def line(ring, r, prefix="ovf: "):
    """ "ovf: early warning at batch 2: ..." as the process prints it (`prefix`: "ovf: ")."""
    return f"{prefix}early warning at batch {r.batch}: {text(ring, r)}"
