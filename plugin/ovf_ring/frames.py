"""Frames as the reference keeps them, rebuilt from the ring.

A frame is one FRAME record and its lines (contiguous seqs, each line's
frame_seq naming the FRAME), preceded by the BATCH_START markers written since
the frame before it: the reference appends "*** Starting batch number=N ***" to
the frame being built, so the marker prints as that frame's first lines.
"""

from dataclasses import dataclass, field

from . import layout
from .ring import BadSlot

# Lines one frame holds at most (monitor.h: kMaxLinesPerFrame).
MAX_LINES = 512


@dataclass
class Frame:
    header: layout.Record
    lines: list
    markers: list = field(default_factory=list)
    # OP_OUTPUT records written since the frame before (op observer), in ring
    # order: the ops that ran in this module's forward after its last child
    # returned, or in an ancestor's between two children. Each names its module.
    ops: list = field(default_factory=list)

    @property
    def is_op(self):
        """A frame made of one op record (a ring without module frames: a
        LibTorch C++ program), named by the op and the module scope it ran in."""
        return self.header.kind in (layout.KIND_OP_OUTPUT, layout.KIND_BUFFER)

    def records(self, with_ops=False):
        """The reference's records of this frame; with_ops puts the op records
        where they ran, before the module's own FRAME record."""
        return [*self.markers, *(self.ops if with_ops else ()), self.header, *self.lines]

    @property
    def seq(self):
        return self.header.seq

    @property
    def batch(self):
        return self.header.batch

    @property
    def end_seq(self):
        """The seq after this frame's last line."""
        return self.header.seq + 1 + len(self.lines)

    @property
    def nonfinite(self):
        return bool(self.header.flags & layout.FLAG_NONFINITE)


@dataclass
class Walk:
    """The frames found, oldest first, and why the walk stopped early, if it did."""

    frames: list
    stopped_by: BadSlot = None  # a torn / overwritten / unreadable slot
    inconsistent: list = field(default_factory=list)  # seqs of lines not of their frame
    # op and buffer records written after the newest frame kept, oldest first:
    # an op that fired in a forward still running, or in the loss, backward or step
    trailing_ops: list = field(default_factory=list)


def walk_back(ring, count, end_seq=None, keep=None, ops_as_frames=False):
    """The newest `count` frames that `keep(frame)` accepts (all when None),
    with seq below `end_seq`, walking back no further than the ring holds.
    `ops_as_frames`: each op record is a frame of its own (a ring that has no
    module frames, as a LibTorch C++ program writes it).

    Unfiltered, this is report.cpp's last_frames: markers after the newest
    frame belong to a frame not yet written and are left out; CHECKPOINT
    records (detect_overflow) are not part of frames; lines whose FRAME was
    overwritten are dropped; the walk ends at the first torn or overwritten
    slot. Markers of rejected frames go to the next newer frame kept, so batch
    boundaries still show in a filtered listing.
    """
    end = ring.end_seq if end_seq is None else min(end_seq, ring.end_seq)
    walk = Walk(frames=[])
    kept = []  # newest first
    lines = []  # lines of the frame being collected, newest first
    marker_home = None  # the frame that markers seen now belong to
    for seq in range(end - 1, ring.floor_seq - 1, -1):
        r = ring.record(seq)
        if isinstance(r, BadSlot):
            walk.stopped_by = r
            break
        if r.kind in (
            layout.KIND_CHECKPOINT,
            layout.KIND_STEP,
            layout.KIND_STEP_PARAM,
            layout.KIND_GRAD,
            layout.KIND_SCALER,
            layout.KIND_WARNING,
        ):
            # not the reference's frames: detect_overflow, optimizer steps, gradients, a loss
            # scaler's updates, early warnings
            continue
        if r.kind in (layout.KIND_OP_OUTPUT, layout.KIND_BUFFER) and not ops_as_frames:
            if lines:
                walk.inconsistent.append(r.seq)  # an op inside a frame's lines
            elif marker_home is not None:
                marker_home.ops.insert(0, r)
            elif not kept:
                walk.trailing_ops.insert(0, r)
            continue
        if r.kind == layout.KIND_BATCH_START:
            if lines:
                walk.inconsistent.append(r.seq)  # a marker inside a frame's lines
            elif marker_home is not None:
                marker_home.markers.insert(0, r)
            continue
        if len(kept) == count:
            break  # the oldest kept frame has all its markers
        if r.kind not in (layout.KIND_FRAME, layout.KIND_OP_OUTPUT, layout.KIND_BUFFER):
            lines.append(r)
            continue
        frame = Frame(header=r, lines=lines[::-1])
        lines = []
        walk.inconsistent.extend(line.seq for line in frame.lines if line.frame_seq != r.seq)
        if keep is None or keep(frame):
            kept.append(frame)
            marker_home = frame
        elif not kept:
            marker_home = None  # markers of frames newer than any kept one are dropped
    walk.frames = kept[::-1]
    return walk


def frame_at(ring, seq):
    """The frame whose FRAME record has `seq`, with its markers, or None."""
    header = ring.record(seq)
    if isinstance(header, BadSlot) or header.kind not in (layout.KIND_FRAME, layout.KIND_STEP):
        return None
    lines = []
    for line_seq in range(seq + 1, min(ring.end_seq, seq + 1 + MAX_LINES)):
        r = ring.record(line_seq)
        if isinstance(r, BadSlot) or r.kind not in layout.LINE_KINDS or r.frame_seq != seq:
            break
        lines.append(r)
    frame = Frame(header=header, lines=lines)
    for marker_seq in range(seq - 1, ring.floor_seq - 1, -1):
        r = ring.record(marker_seq)
        if isinstance(r, BadSlot) or r.kind not in (
            layout.KIND_BATCH_START,
            layout.KIND_CHECKPOINT,
            layout.KIND_OP_OUTPUT,
            layout.KIND_STEP,
            layout.KIND_STEP_PARAM,
            layout.KIND_GRAD,
            layout.KIND_BUFFER,
        ):
            break
        if r.kind == layout.KIND_BATCH_START:
            frame.markers.insert(0, r)
        elif r.kind in (layout.KIND_OP_OUTPUT, layout.KIND_BUFFER):
            frame.ops.insert(0, r)
    return frame


def previous_frame(ring, frame):
    """The frame written just before `frame`, or None."""
    walk = walk_back(ring, 1, end_seq=frame.seq)
    return walk.frames[0] if walk.frames else None
