"""What ovf cannot see in torch.compile'd code, said once where its frames show.

Inside a compiled graph ovf records each hooked module's frame (its FRAME record
carries FLAG_COMPILED); the ATen ops Inductor fuses into its kernels run unseen.
`ovf status`, `ovf frames` (and `python3 -m ovf.postmortem`) and a stop's summary
say so in one line when the frames they cover include a compiled one, in the
words the runtime's event report uses (report.cpp: compiled_note).
"""

from . import layout
from .frames import walk_back

# report.cpp: kCompiledUnseen
UNSEEN = (
    "module frames are recorded there; the ATen ops Inductor fuses into its kernels are not "
    "seen without --ops (its checks enter the graphs)"
)


def is_compiled(frame):
    header = frame.header
    return header.kind == layout.KIND_FRAME and bool(header.flags & layout.FLAG_COMPILED)


def note(frames):
    """ "ovf: K of N frames listed ran in torch.compile'd graphs: ..." for a
    listing of `frames`, or None when none of them is compiled."""
    counted = _count(frames)
    if counted is None:
        return None
    return f"ovf: {counted} listed ran in torch.compile'd graphs: {UNSEEN}"


def status_line(ring):
    """`ovf status`'s line over the frames `ovf frames` would list (the runtime's
    max_frames_to_save newest), or None when none of them is compiled."""
    frames = walk_back(ring, ring.header.max_frames_to_save or 21).frames
    counted = _count(frames, "the last ")
    if counted is None:
        return None
    return f"torch.compile: {counted} ran in compiled graphs: {UNSEEN}"


def _count(frames, before=""):
    """ "K of N frames" (N after `before`), or None when no frame is compiled."""
    compiled = sum(map(is_compiled, frames))
    return f"{compiled} of {before}{_frames(len(frames))}" if compiled else None


def _frames(n):
    return f"{n} frame" + ("s" if n != 1 else "")
