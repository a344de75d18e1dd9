"""Show the runtime's state: version, process, batch, records, what is armed.

Reads the ring of a live process or a core file; without one, shows what is
armed for the next `run`.
"""

import datetime

from ovf_ring import cast, compiled, device, early, layout, scaler
from ovf_ring.errors import OvfError
from ovf_ring.event import describe_seq, last_event, replay_lines, verdict_lines
from ovf_ring.identity import process_text

NAME = "status"


def add_arguments(p):
    pass


def run(session, args):
    armed = session.arming.describe()
    lines = []
    try:
        ring = session.ring()
    except OvfError as e:
        if session.target.kind() != "none":
            raise
        lines.append(str(e).replace("ovf: no process", "ovf: no process yet"))
        ring = None
    if ring is not None:
        lines += ring.notes + _ring_lines(ring)
    lines.append(
        "debugger: "
        + ("; ".join(armed) if armed else "nothing armed (ovf break-on-nan, ovf watch)")
    )
    return "\n".join(lines) + "\n"


def _name(names, value):
    return names[value] if value < len(names) else f"unknown ({value})"


def _ring_lines(ring):
    h, c = ring.header, ring.control
    started = (
        datetime.datetime.fromtimestamp(h.start_time_ns / 1e9).strftime("%Y-%m-%d %H:%M:%S")
        if 0 < h.start_time_ns < 1 << 62
        else "?"
    )
    out = [
        (
            f"ovf runtime {layout.version_text(h.runtime_version)}, ring layout {h.layout_version},"
            f" state at 0x{ring.address:x}"
        ),
        f"{process_text(h)}, started {started}",
        (
            f"detection: {_name(layout.DETECTION_STATES, h.detection_state)}; batch {h.batch};"
            f" {h.frames_written} frames, {h.write_seq} records written; the ring keeps"
            f" {ring.capacity}"
        ),
        f"runtime: {'enabled' if c.enabled else 'disabled'}, on event:"
        f" {_name(layout.ON_EVENT_NAMES, c.on_event)}, stops on: {_bits(c.stop_mask) or 'nothing'}"
        + (f", modules '{c.glob_text}'" if c.glob_text else "")
        + (f", from batch {c.after_batch}" if c.after_batch else "")
        + (f", above {c.above:g}" if c.stop_mask & layout.STOP_ABOVE else "")
        + (f", below {c.below:g}" if c.stop_mask & layout.STOP_BELOW else "")
        + (", trace batches " + ",".join(map(str, c.traced)) if c.traced else "")
        + (f", abort after batch {c.abort_after_batch}" if c.abort_after_batch >= 0 else "")
        + (
            f", scaler after {c.scaler_max_skips} skips in a row"
            if c.stop_mask & layout.STOP_SCALER and c.scaler_max_skips
            else ""
        )
        + (
            f", scale floor {c.scale_floor:g}"
            if c.stop_mask & layout.STOP_SCALER and c.scale_floor > 0
            else ""
        )
        + (f", growth within {c.early_horizon} batches" if c.early_horizon else "")
        + (f", updates above {c.update_ratio_max:g}x the weights" if c.update_ratio_max else "")
        + (
            ", " + cast.limits_text(layout.CAST_TARGETS[c.cast_target], cast.control_limits(c))
            if c.stop_mask & layout.STOP_CAST and c.cast_target < len(layout.CAST_TARGETS)
            else ""
        )
        + (", cast losses counted" if c.observe & layout.OBSERVE_CAST else "")
        + (", optimizer steps captured" if c.observe & layout.OBSERVE_CAPTURE_OPTIMIZER else ""),
    ]
    out += device.status_lines(h, always=True)
    out.append("first non-finite: " + describe_seq(ring, h.first_nonfinite_seq))
    out += verdict_lines(ring, h.first_nonfinite_seq, prefix="  ")
    out += replay_lines(ring, h.first_nonfinite_seq, prefix="  ")
    scaled = scaler.history(ring)
    if scaled:
        out.append(f"loss scaler: {scaled}")
    warned = early.warning(ring)
    if warned is not None:
        out.append(early.line(ring, warned, prefix=""))
    event = last_event(ring)
    if event is not None:
        out.append(f"last event: {_bits(event.bits)} at " + describe_seq(ring, event.seq))
    unseen = compiled.status_line(ring)
    if unseen:
        out.append(unseen)
    return out


def _bits(mask):
    return ", ".join(name for name, bit in layout.STOP_NAMES if mask & bit)
