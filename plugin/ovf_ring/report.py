"""The reference report's text (transformers.debug_utils), byte for byte as the
runtime's C++ formatter (runtime/src/report.cpp) writes it."""

import math
from dataclasses import replace

from . import cast, layout

PREFIX = " " * 17  # DebugUnderflowOverflow.prefix
COLUMN_HEADER = "abs min  abs max  metadata"  # f"{'abs min':8} {'abs max':8} metadata"


def format_8_2e(x):
    """format(x, "8.2e"), as report.cpp's format_8_2e: Python prints "nan" (never
    "-nan"), "inf" and "-inf" right-aligned, and finite values as C's %8.2e does
    (both round correctly)."""
    return f"{x:8.2e}"


def reference_min_max(r):
    """What torch's abs().min() / abs().max() print for a line: NaN propagates,
    infinities count (report.cpp: reference_min_max)."""
    if r.nan_count > 0:
        return math.nan, math.nan
    infs = r.pos_inf_count + r.neg_inf_count
    any_finite = r.numel > infs
    return (r.abs_min if any_finite else math.inf), (math.inf if infs else r.abs_max)


# Characters that reorder the text around them (U+202E makes "exp" read "pxe"):
# escaped like controls, as report.cpp's is_bidi_control does.
BIDI_CONTROLS = frozenset({0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)})


def escape_text(raw):
    """Bytes of an inferior string as printable text: backslash, C0 controls and
    DEL as escapes, as report.cpp's escape_text does; then, so that no byte can
    drive a terminal or reorder a line, invalid UTF-8, C1 controls
    (U+0080..U+009F) and bidirectional controls as \\xNN per byte. Other
    valid UTF-8 text passes unchanged."""
    text = []
    i = 0
    while i < len(raw):
        c = raw[i]
        if c < 0x80:
            text.append("\\\\" if c == 0x5C else f"\\x{c:02x}" if c < 0x20 or c == 0x7F else chr(c))
            i += 1
            continue
        length = _utf8_length(raw, i)
        char = raw[i : i + length].decode("utf-8") if length else ""
        if char and not 0x80 <= ord(char) <= 0x9F and ord(char) not in BIDI_CONTROLS:
            text.append(char)
        else:
            text.extend(f"\\x{b:02x}" for b in raw[i : i + max(length, 1)])
        i += max(length, 1)
    return "".join(text)


def _utf8_length(raw, i):
    """Length of the valid UTF-8 sequence starting at raw[i], or 0."""
    for length in (2, 3, 4):
        try:
            raw[i : i + length].decode("utf-8")
            return length
        except UnicodeDecodeError:
            continue
    return 0


def _right_17(word):
    return f"{word:>17}"


def format_record(r, text, module=None):
    """One record as the reference prints it; `text(id)` returns an interned
    string, escaped (Ring.text); `module(id)` a module path for people
    (Ring.module: "<root Class>", "(no module)")."""
    kind = r.kind
    if kind in (layout.KIND_FRAME, layout.KIND_STEP):
        return f"{PREFIX} {text(r.name_id)} {text(r.label_id)}"
    if kind == layout.KIND_BATCH_START:
        return f"\n\n{PREFIX} *** Starting batch number={r.batch} ***\n{COLUMN_HEADER}"
    if kind == layout.KIND_NONE:
        return f"{_right_17('None')} {text(r.label_id)}"
    if kind == layout.KIND_NOT_TENSOR:
        return f"{_right_17('not a tensor')} {text(r.label_id)}"
    if kind == layout.KIND_CHECKPOINT:
        lo, hi = reference_min_max(r)
        return f"{format_8_2e(lo)} {format_8_2e(hi)} {text(r.name_id)}"
    if kind in (layout.KIND_OP_OUTPUT, layout.KIND_BUFFER):
        return format_op(r, text, module)
    if kind == layout.KIND_GRAD:
        lo, hi = reference_min_max(r)
        return f"{format_8_2e(lo)} {format_8_2e(hi)} {text(r.label_id)} of {text(r.name_id)}"
    label = text(r.label_id)
    if r.flags & layout.FLAG_PENDING:  # a device's statistics on their way (fast mode)
        return f"{_right_17('pending')} {label}"
    if not r.flags & layout.FLAG_HAS_STATS:
        return (
            f"{_right_17('no data' if r.flags & layout.FLAG_NO_DATA else 'unknown dtype')} {label}"
        )
    if r.numel == 0:  # the reference fails on min() of nothing; ovf says so
        return f"{_right_17('empty')} {label}"
    lo, hi = reference_min_max(r)
    return f"{format_8_2e(lo)} {format_8_2e(hi)} {label}"


def _module_name(context_id, text, module=None):
    """The module path an op ran in, for people (Ring.module where given)."""
    if module is not None:
        return module(context_id)
    return text(context_id) if context_id != layout.NO_ID else "(no module)"


def format_op(r, text, module=None):
    """An op record (op observer): its values like a line, then what ran where:
    "     nan      nan output = aten::log in feat (produced here)"; a backward
    op names the forward op whose gradient it computes; a buffer record the
    module whose forward made it non-finite."""
    if r.flags & layout.FLAG_HAS_STATS and r.numel:
        lo, hi = reference_min_max(r)
        values = f"{format_8_2e(lo)} {format_8_2e(hi)}"
    else:
        values = _right_17("empty" if r.flags & layout.FLAG_HAS_STATS else "no data")
    where = _module_name(r.context_id, text, module)
    if r.kind == layout.KIND_BUFFER:
        return f"{values} buffer {text(r.label_id)} (made non-finite by {where}'s forward)"
    if r.flags & layout.FLAG_BACKWARD:
        origin = text(r.aux_id) if r.aux_id != layout.NO_ID else "an unknown op"
        what = f"grad = {text(r.name_id)} for {origin} in {where}"
        if r.location_id != layout.NO_ID:
            what += f" at {text(r.location_id)}"
    else:
        what = f"{text(r.label_id)} = {text(r.name_id)} in {where}"
    if r.flags & layout.FLAG_PRODUCER:
        what += " (produced here)"
    elif r.flags & layout.FLAG_CARRIER:
        what += " (carried)"
    elif r.flags & layout.FLAG_CONSTANT:
        what += " (deliberate)"
    return f"{values} {what}"


def headroom_suffix(r):
    """ "  [fp16: 0.96 of max, 3 below normal]" for a line recorded with headroom,
    then its cast shares where they were counted (cast.suffix)."""
    if not r.flags & layout.FLAG_HAS_STATS or not r.numel:
        return ""
    h = layout.headroom(r)
    own = "" if h is None else f"  [{h[0]}: {h[1]:.2f} of max, {h[2]} below normal]"
    return own + cast.suffix(r)


def format_frame(frame, text, with_ops=False, with_headroom=False, module=None):
    """A frame's text: its batch markers, (its ops,) its header, its lines, joined
    by "\\n"; with_headroom appends each line's headroom (watch --headroom). An op
    frame (frames.Frame.is_op) is headed by its module scope and op, the one line
    its output as the op record tells it."""
    if frame.is_op:
        where = _module_name(frame.header.context_id, text, module)
        return "\n".join(
            [format_record(r, text, module) for r in frame.markers]
            + [
                f"{PREFIX} {where} {text(frame.header.name_id)}",
                format_op(frame.header, text, module)
                + (headroom_suffix(frame.header) if with_headroom else ""),
            ]
        )
    return "\n".join(
        format_record(r, text, module) + (headroom_suffix(r) if with_headroom else "")
        for r in frame.records(with_ops)
    )


def format_trace(frame, text):
    """What the reference prints for a frame of a traced batch: detect_overflow's
    "<label> has nans" / "has infs" lines while it builds the frame, then the
    frame (monitor.cpp: finish_frame)."""
    out = []
    for r in frame.lines:
        if r.flags & layout.FLAG_NONFINITE:
            out += [f"{text(r.label_id)} has nans"] if r.nan_count else []
            out += [f"{text(r.label_id)} has infs"] if r.pos_inf_count + r.neg_inf_count else []
    return "".join(line + "\n" for line in out) + format_frame(frame, text) + "\n"


def format_frames(frames, text, with_ops=False, with_headroom=False, module=None):
    """Frames joined as the reference joins its saved frames."""
    return "\n".join(format_frame(f, text, with_ops, with_headroom, module) for f in frames)


# Ops that only set memory up (zeroing gradients, filling buffers, making
# ones for a backward seed): an optimizer's zero_grad makes hundreds of them.
# Listed only when asked, or when one is non-finite.
BOOKKEEPING_OPS = frozenset(
    {
        "aten::zero_",
        "aten::zeros",
        "aten::zeros_like",
        "aten::ones",
        "aten::ones_like",
        "aten::fill_",
        "aten::full",
        "aten::full_like",
        "aten::empty",
        "aten::empty_like",
        "aten::detach",
        "aten::detach_",
        "aten::set_",
        "aten::lift_fresh",
        "aten::alias",
    }
)


def is_bookkeeping(r, text):
    return (
        r.kind == layout.KIND_OP_OUTPUT
        and not r.flags & layout.FLAG_NONFINITE
        and text(r.name_id) in BOOKKEEPING_OPS
    )


def format_listing(
    frames, text, with_ops=False, with_headroom=False, module=None, trailing_ops=(), all_ops=False
):
    """`ovf frames`: the reference's "Last N forward frames:" block; with_ops
    adds the op observer's records where the ops ran (those after the newest
    frame last) without bookkeeping ops unless all_ops, with_headroom each
    line's headroom."""
    if with_ops and not all_ops:
        frames = [replace(f, ops=[r for r in f.ops if not is_bookkeeping(r, text)]) for f in frames]
        trailing_ops = [r for r in trailing_ops if not is_bookkeeping(r, text)]
    body = format_frames(frames, text, with_ops, with_headroom, module)
    if with_ops and trailing_ops:
        body += ("\n" if body else "") + "\n".join(
            format_record(r, text, module) for r in trailing_ops
        )
    return f"Last {len(frames)} forward frames:\n{COLUMN_HEADER}\n" + (body + "\n" if body else "")


def format_detection_report(batch_number, frames, text):
    """DebugUnderflowOverflow.dump_saved_frames' output (report.cpp:
    format_detection_report)."""
    return (
        f"\nDetected inf/nan during batch_number={batch_number}\n"
        f"Last {len(frames)} forward frames:\n{COLUMN_HEADER}\n"
        f"{format_frames(frames, text)}\n\n\n\n"
    )
