"""What the header says of device statistics (layout 3): the mode, the backends
that ran, frames still pending, and whether the latest event was judged late.
One wording for `ovf status`, the stop summary and ovf.postmortem."""

from . import layout


def status_lines(header, always=False):
    """The device lines of `ovf status` (`always`: also when no device tensor was
    seen) and of ovf.postmortem's summary; none before layout 3 or a session."""
    if header.layout_version < 3 or header.device_mode == layout.DEVICE_MODE_NONE:
        return []
    used = header.device_backends
    ran = used & (layout.BACKEND_PORTABLE | layout.BACKEND_CUDA)
    if not always and not ran and not header.pending_frames:
        return []
    mode = layout.DEVICE_MODE_NAMES.get(header.device_mode, f"unknown ({header.device_mode})")
    backends = [
        name
        for bit, name in (
            (layout.BACKEND_CUDA, "CUDA kernels"),
            (layout.BACKEND_PORTABLE, "portable (ATen ops on the device)"),
        )
        if used & bit
    ]
    line = f"device statistics: {mode} mode; " + (
        "backends used: " + ", ".join(backends) if backends else "no device tensor seen yet"
    )
    if header.pending_frames:
        line += f"; {header.pending_frames} frame(s) waiting for their statistics"
    out = [line]
    if used & layout.BACKEND_CUDA_REJECTED:
        out.append(
            "device statistics: the CUDA backend disagreed with the portable one on its first "
            "frame (self-check) and was switched off"
        )
    if used & layout.BACKEND_CUDA_BUILT:
        out.append(
            "device statistics: ovf's CUDA backend is built"
            + (
                "; this process has no GPU (torch sees no CUDA device)"
                if used & layout.BACKEND_NO_CUDA_DEVICE
                else ""
            )
        )
    return out


def late_note(header, op=False):
    """The stop summary's line for an event judged after its frame (or its op:
    `op`) returned."""
    if header.layout_version < 3 or not header.last_event_late:
        return None
    if op:
        return (
            "fast device mode: this op's statistics arrived after it had returned, so the "
            "process stopped at a later op or hook (`ovf py-bt` shows where it was then; the "
            "line named above is the op's own); --device-mode exact (OVF_DEVICE_MODE=exact) "
            "stops right after the op"
        )
    return (
        "fast device mode: this frame's statistics arrived after its forward had returned, "
        "so the process stopped at a later hook (`ovf py-bt` shows where it was then); "
        "--device-mode exact (OVF_DEVICE_MODE=exact) stops inside the frame"
    )
