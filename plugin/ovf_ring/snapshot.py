"""The event snapshot (ring.h: ovf_snapshot): the Python stack of the thread
that made the value and the locals of the program's own innermost frame, as
the runtime took them at the latest event. Read like the ring: memory reads
only, every count capped, the magic, version and completion checked."""

import struct
from collections import namedtuple

from .errors import OvfError
from .target import TargetMemoryError

MAGIC = 0x50414E532D46564F  # "OVF-SNAP"
VERSION = 2
MAX_FRAMES = 64
# Locals kept of the user frame, by version: 1 kept 64 and did not count the rest; 2
# keeps 256 and says how many the frame had (frame_locals). Cores of both are read.
LOCALS_KEPT = {1: 64, 2: 256}
MAX_LOCALS = LOCALS_KEPT[VERSION]
DIMS = 8
FLAG_USER = 1
LOCAL_TENSOR, LOCAL_HAS_STATS, LOCAL_SHAPE_TRUNCATED, LOCAL_VALUE = 1, 2, 4, 8

_HEADER = struct.Struct("<QIIQIIIII20x")
_FRAME = struct.Struct("<IIiI")
_LOCAL = struct.Struct(f"<IIIBBbB{DIMS}qQQQQQdd")


def size_of(version):
    return _HEADER.size + MAX_FRAMES * _FRAME.size + LOCALS_KEPT[version] * _LOCAL.size


SIZE = size_of(VERSION)

Frame = namedtuple("Frame", "file function line user")
Local = namedtuple(
    "Local",
    (
        "name type flags dtype device_type device_index ndim shape numel nan_count "
        "pos_inf_count neg_inf_count zero_count abs_min abs_max value"
    ),
)
# kept: how many locals of a frame it keeps; frame_locals: how many the user frame
# had (None where the snapshot did not count them: version 1)
Snapshot = namedtuple("Snapshot", "event_seq thread_id frames locals kept frame_locals")


def read(ring):
    """The ring's Snapshot, or OvfError saying why there is none."""
    address = ring.header.snapshot_addr
    if not address:
        raise OvfError(
            "ovf: no snapshot: no event has fired yet (or the runtime took none: a C++ program, "
            "or a ring of layout 1)"
        )
    # Only the parts in use: a core keeps the pages a process wrote, and the
    # snapshot's unused tail may never have been.
    data = _read(ring, address, _HEADER.size)
    (
        magic,
        version,
        size,
        event_seq,
        frame_count,
        local_count,
        complete,
        thread_id,
        frame_locals,
    ) = _HEADER.unpack_from(data)
    if magic != MAGIC or (version in LOCALS_KEPT and size != size_of(version)):
        raise OvfError(
            f"ovf: the event snapshot at 0x{address:x} is corrupt (magic 0x{magic:016x},"
            f" {size} bytes)"
        )
    if version not in LOCALS_KEPT:
        raise OvfError(
            f"ovf: the event snapshot has version {version}; this ovf reads versions "
            f"{', '.join(map(str, LOCALS_KEPT))}"
        )
    kept = LOCALS_KEPT[version]
    if complete != 1:
        raise OvfError(
            "ovf: the event snapshot was being written when the process stopped; it is incomplete"
        )
    frame_count, local_count = min(frame_count, MAX_FRAMES), min(local_count, kept)
    frames_data = _read(ring, address + _HEADER.size, frame_count * _FRAME.size)
    base = _HEADER.size + MAX_FRAMES * _FRAME.size
    locals_data = _read(ring, address + base, local_count * _LOCAL.size)
    frames = []
    for i in range(frame_count):
        file_id, function_id, line, flags = _FRAME.unpack_from(frames_data, i * _FRAME.size)
        frames.append(
            Frame(ring.text(file_id), ring.text(function_id), line, bool(flags & FLAG_USER))
        )
    local_list = []
    for i in range(local_count):
        v = _LOCAL.unpack_from(locals_data, i * _LOCAL.size)
        name_id, type_id, flags, dtype, device_type, device_index, ndim = v[:7]
        shape = v[7 : 7 + DIMS][: min(ndim, DIMS)]
        # a plain value's text id sits where a tensor's shape would (ring.h's union)
        value = ring.text(v[7] & 0xFFFFFFFF) if flags & LOCAL_VALUE else None
        local_list.append(
            Local(
                ring.text(name_id),
                ring.text(type_id),
                flags,
                dtype,
                device_type,
                device_index,
                ndim,
                shape,
                *v[7 + DIMS :],
                value,
            )
        )
    counted = max(frame_locals, local_count) if version >= 2 else None
    return Snapshot(event_seq, thread_id, frames, local_list, kept, counted)


def _read(ring, address, size):
    if size == 0:
        return b""
    try:
        return ring.target.read_memory(address, size)
    except TargetMemoryError as e:
        raise OvfError(f"ovf: cannot read the event snapshot at 0x{address:x}: {e}") from None


def stale_note(ring, snap):
    """A line when the snapshot is not of the latest event, else ""."""
    if snap.event_seq == ring.header.last_event_seq:
        return ""
    return (
        f"ovf: this snapshot was taken at record {snap.event_seq}; the latest event is record "
        f"{ring.header.last_event_seq}\n"
    )
