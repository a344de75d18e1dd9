"""What a cast to the narrow floating types would lose (layout 6's cast counts):
the shares a line's values would overflow, flush to zero or turn subnormal in
float16, bfloat16, float8_e4m3fn and float8_e5m2, and the watch on them
(`ovf watch --cast`), judged as runtime/core/cast_loss.cpp judges it."""

from . import layout


def over_limit(line, control):
    """The loss (index into layout.CAST_LOSSES) of `line` whose share in a cast to
    control.cast_target is above its limit, overflow first; None when none is."""
    if not line.flags & layout.FLAG_CAST or not line.numel:
        return None
    if control.cast_target >= len(layout.CAST_TARGETS):
        return None
    counts = layout.cast_losses(line, control.cast_target)
    for loss, limit in enumerate(control_limits(control)):
        # a share above a limit >= 0 holds at least one value: 0 stops at the first
        if limit >= 0 and counts[loss] / line.numel > limit:
            return loss
    return None


def percent(share):
    """0.00523 as "0.52%", a share too small for two decimals as "<0.01%"."""
    if share == 0:
        return "0%"
    if share < 1e-4:
        return "<0.01%"
    return f"{share * 100:.3g}%"


def limits_text(target, limits):
    """ "overflow > 0.1% or flush > 5%" for the limits set (None: off)."""
    parts = [
        f"{name} > {percent(limit) if limit else 'none'}"
        for name, limit in zip(layout.CAST_LOSSES, limits, strict=True)
        if limit is not None and limit >= 0
    ]
    return f"a cast to {target} that would {' or '.join(parts)} of a tensor's values"


def control_limits(control):
    return (control.cast_overflow_max, control.cast_flush_max, control.cast_subnormal_max)


def event_text(control):
    """The stop's kind, for the summary's title: what was watched."""
    target = layout.CAST_TARGETS[control.cast_target]
    return "cast loss: " + limits_text(target, control_limits(control))


def culprit_text(line, control):
    """ "overflow 0.52% (12 of 2304 values) in a cast to fp8_e4m3" for a line over its limit."""
    loss = over_limit(line, control)
    if loss is None:
        return "no cast loss above its limit"
    count = layout.cast_losses(line, control.cast_target)[loss]
    return (
        f"{layout.CAST_LOSSES[loss]} {percent(count / line.numel)} ({count} of {line.numel}"
        f" values) in a cast to {layout.CAST_TARGETS[control.cast_target]}"
    )


def suffix(line):
    """ "  [cast: fp16 subnormal <0.01%; fp8_e4m3 overflow 3.12% flush 0.04%]": the
    losses each target would have, by name ("lossless" when none would), for a
    line recorded with cast counts; "" otherwise."""
    shares = layout.cast_shares(line)
    if shares is None:
        return ""
    parts = [
        name
        + "".join(
            f" {loss} {percent(s)}" for loss, s in zip(layout.CAST_LOSSES, losses, strict=True) if s
        )
        for name, losses in shares.items()
        if any(losses)
    ]
    return "  [cast: " + ("; ".join(parts) or "lossless") + "]"
