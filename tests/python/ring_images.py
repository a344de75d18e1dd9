"""Hand-built ring images for the ring decoder's tests: a process image made of a few byte
segments (what a core holds), a ring writer that lays out records as the runtime does,
a debugger control with no debugger behind it, and `ovf frames` run on an image."""

import math
import os
import struct
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "plugin"))

from ovf_plugin import commands  # noqa: E402
from ovf_plugin.control import Control  # noqa: E402
from ovf_plugin.session import Session  # noqa: E402
from ovf_ring import layout  # noqa: E402
from ovf_ring.target import Target, TargetMemoryError  # noqa: E402

STATE, RECORDS, INDEX, ARENA = 0x10000, 0x100000, 0x200000, 0x300000


class ImageTarget(Target):
    """A process image made of a few byte segments (what a core file holds)."""

    def __init__(self, segments, symbols=None, kind="core"):
        self.segments = {a: bytearray(b) for a, b in segments.items()}
        self.symbols = symbols if symbols is not None else {"ovf_state": STATE}
        self._kind = kind

    def kind(self):
        return self._kind

    def read_memory(self, address, size):
        for start, data in self.segments.items():
            if start <= address and address + size <= start + len(data):
                return bytes(data[address - start : address - start + size])
        raise TargetMemoryError(f"0x{address:x} is not in the image")

    def write_memory(self, address, data):
        for start, seg in self.segments.items():
            if start <= address and address + len(data) <= start + len(seg):
                seg[address - start : address - start + len(data)] = data
                return
        raise TargetMemoryError(f"0x{address:x} is not in the image")

    def find_data_symbol(self, name):
        return self.symbols.get(name)

    def memory_regions(self):
        return [(a, a + len(d), "") for a, d in sorted(self.segments.items())]


class NoDebuggerControl(Control):
    """A debugger's control that keeps what it is told: the breakpoint as a
    (function, callback) pair, and no environment."""

    def set_stop_breakpoint(self, function, callback):
        return (function, callback)

    def get_environment(self, name):
        return None

    def set_environment(self, name, value):
        pass

    def stop_breakpoint_enabled(self):
        return False

    def resume(self):
        raise AssertionError("no process to resume: a test's ring image is not running")


class RingBuilder:
    """Writes records as the runtime does: one contiguous run per frame."""

    def __init__(self, capacity=64, version=layout.LAYOUT_VERSION):
        self.capacity = capacity
        self.version = version
        self.size = layout.RECORD_SIZES[version]
        self.records = bytearray(capacity * self.size)
        self.names = [b"<string table full>"]
        self.seq = 0
        self.frames = 0
        self.header = dict(
            magic=layout.MAGIC,
            layout_version=version,
            header_size=1024,
            record_size=self.size,
            record_capacity=capacity,
            records_addr=RECORDS,
            batch=0,
            first_nonfinite_seq=layout.NO_SEQ,
            last_event_seq=layout.NO_SEQ,
            names_index_addr=INDEX,
            names_arena_addr=ARENA,
            names_capacity=1024,
            names_arena_size=1 << 16,
            pid=4242,
            rank=-1,
            local_rank=-1,
            world_size=1,
            device_index=-1,
            runtime_version=0x000100,
            detection_state=1,
            max_frames_to_save=21,
            root_class_id=layout.NO_ID,
        )

    def intern(self, text):
        raw = text if isinstance(text, bytes) else text.encode()
        if raw not in self.names:
            self.names.append(raw)
        return self.names.index(raw)

    def _append(self, kind, **fields):
        values = dict.fromkeys(layout.Record._fields, 0)
        values.update(
            seq=self.seq,
            frame_seq=self.seq,
            kind=kind,
            batch=self.header["batch"],
            device_index=-1,
            abs_min=math.inf,
            abs_min_nonzero=math.inf,
            cast_counts=(0,) * 12,
            rows=(0,) * layout.ROWS_KEPT,
            verdict_id=layout.NO_ID,
        )
        values.update(fields)
        slot = self.seq % self.capacity
        self.records[slot * self.size : (slot + 1) * self.size] = layout.encode_record(
            layout.Record(**values), self.version
        )
        self.seq += 1
        return values["seq"]

    def marker(self):
        return self._append(layout.KIND_BATCH_START)

    def frame(self, module, cls, lines, flags=0):
        """lines: [(label, kind, numel, nan, inf, abs_min, abs_max)]; flags: the FRAME's own
        (FLAG_COMPILED)."""
        bad = layout.FLAG_NONFINITE if any(nan or inf for _, _, _, nan, inf, _, _ in lines) else 0
        head = self._append(
            layout.KIND_FRAME,
            name_id=self.intern(module),
            label_id=self.intern(cls),
            flags=bad | flags,
        )
        for label, kind, numel, nan, inf, lo, hi in lines:
            flags = layout.FLAG_HAS_STATS | (layout.FLAG_NONFINITE if nan or inf else 0)
            self._append(
                kind,
                frame_seq=head,
                label_id=self.intern(label),
                dtype=2,
                numel=numel,
                nan_count=nan,
                pos_inf_count=inf,
                flags=flags,
                abs_min=lo,
                abs_max=hi,
                abs_min_nonzero=lo,
            )
        self.frames += 1
        return head

    def end_batch(self):
        self.header["batch"] += 1
        self.marker()

    def image(self, **overrides):
        arena = b"".join(self.names)
        index = b""
        at = 0
        for raw in self.names:
            index += struct.pack("<II", at, len(raw))
            at += len(raw)
        h = dict(
            self.header,
            write_seq=self.seq,
            names_count=len(self.names),
            names_arena_used=len(arena),
            frames_written=self.frames,
        )
        h.update(overrides)
        state = bytearray(layout.HEADER_SIZE)
        for name, (offset, size) in layout.HEADER_OFFSETS.items():
            code = dict((n, c) for n, _, c in layout.HEADER_FIELDS)[name]
            state[offset : offset + size] = struct.pack("<" + code, h.get(name, 0))
        for name, value in (
            ("enabled", 1),
            ("stop_mask", 3),
            ("above", math.inf),
            ("abort_after_batch", -1),
        ):
            offset, data = layout.encode_control_field(name, value)
            state[offset : offset + len(data)] = data
        return {STATE: bytes(state), RECORDS: bytes(self.records), INDEX: index, ARENA: arena}


def two_batches(capacity=64, version=layout.LAYOUT_VERSION):
    b = RingBuilder(capacity, version)
    b.marker()
    for _batch in range(2):
        b.frame(
            "fc",
            "Linear",
            [
                ("weight", 2, 4, 0, 0, 0.5, 2.0),
                ("input[0]", 3, 4, 0, 0, 1.0, 3.0),
                ("output", 4, 4, 0, 0, 0.25, 6.0),
            ],
        )
        b.frame("", "Net", [("input[0]", 3, 4, 0, 0, 1.0, 3.0), ("output", 4, 4, 0, 0, 0.25, 6.0)])
        b.end_batch()
    return b


def listing(target, argv=()):
    return commands.execute(Session(target), "frames", list(argv))
