"""One look at the runtime's ring: locate the state, validate it, read records.

Inferior memory is untrusted: every size and count is checked against the
layout and capped before it sizes a read, every record's sequence number is
checked against the slot it must be in, and string ids are bounds-checked.
The header is one read; records come in chunks (one bulk read each, newest
first, only as far back as a command walks); the string table is two reads.
"""

import struct
import time

from . import layout
from .errors import OvfError
from .report import escape_text
from .target import TargetMemoryError

MAX_CAPACITY = 1 << 30  # the runtime's own cap (round_up_pow2)
MAX_NAMES = 1 << 24
MAX_NAME = 1 << 16  # bytes of one interned string (a module path, a file name)
# A longer string (a 1 MB module name) is shown by its start and its size:
# printed whole it would bury the report, and it is no name anyone reads.
LONG_NAME_SHOWN = 200
NAME_BLOCK = 512  # index entries read at a time (4 KiB)
CHUNK_RECORDS = 4096  # 512 KiB per read
# The magic scan's bounds: the runtime's own mappings come first and hold the
# state within a few MiB; more than this is a crafted or foreign core.
SCAN_MAX_BYTES = 256 << 20
SCAN_MAX_SECONDS = 10.0

# Why a slot holds no usable record.
TORN = "torn"  # being written (seq marked none) or reserved but not yet written
OVERWRITTEN = "overwritten"  # the ring wrapped over it
UNREADABLE = "unreadable"  # not in memory / not in the core
CORRUPT = "corrupt"  # a kind the layout does not define


class NewerLayoutError(OvfError):
    """A ring header that is valid but of a layout newer than this reader's."""


class BadSlot:
    """Stands for a record that cannot be shown, and says why."""

    def __init__(self, seq, why):
        self.seq = seq
        self.why = why

    def describe(self):
        return f"record {self.seq} is {self.why}"


def locate(target, library_hint=""):
    """The Ring of the target's runtime, or OvfError saying why there is none.
    `library_hint`: how the user points the debugger at a library that moved."""
    kind = target.kind()
    address = target.find_data_symbol(layout.STATE_SYMBOL)
    problem = None
    if address is not None:
        try:
            return Ring(target, address)
        except OvfError as e:
            problem = e
    missing = target.missing_library("libovf_runtime")
    hint = "; " + library_hint if missing and library_hint else ""
    # A live process's symbol is the truth; a core's may come from a library
    # that was rebuilt or moved since the core was written, so look for the ring.
    newer = []  # rings the scan found but cannot read: worth saying rather than "no ring"
    cut = []  # a line when the scan gave up early
    if kind == "core":
        found = scan_for_state(target, newer, cut)
        if found is not None:
            ring, where = found
            why = "ovf_state points at no ring" if address is not None else "no symbol ovf_state"
            ring.notes.append(
                f"ovf: found the ring by scanning memory at 0x{ring.address:x}{where} ({why})"
            )
            if missing:
                ring.notes.append(f"ovf: the runtime library {missing} was not found" + hint)
            return ring
    if kind == "live":
        _raise_if_ended(target)
    if newer:
        raise newer[0]
    if problem is not None:
        raise problem
    if missing:
        raise OvfError(
            f"ovf: the runtime library {missing} was not found and no ring was found in memory"
            + hint
        )
    if kind == "core":
        raise OvfError(
            "ovf: no ovf ring in this core file (no symbol ovf_state, and no ring "
            "header in its memory" + (f"; {cut[0].removeprefix('ovf: ')}" if cut else "") + ")"
        )
    raise OvfError(
        "ovf: no ovf runtime in this process (no symbol ovf_state): start it under "
        "`ovf break-on-nan` and `run`, or with `python3 -m ovf`"
    )


def _raise_if_ended(target):
    """A process killed while the debugger held it stopped (SIGKILL from outside,
    the OOM killer) is a zombie the debugger has not reaped: its memory is gone,
    which reads as no runtime at all unless said."""
    pid = target.pid()
    if not pid:
        return
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        state = "X"
    if state in ("Z", "X"):
        raise OvfError(
            f"ovf: process {pid} has ended (killed while stopped, or exited): its memory and "
            "the ring in it are gone; `run` starts it again, and a core file of it, if one "
            "was written, still holds the ring"
        )


def _scan_order(regions):
    """The runtime library's own mappings first, then the one right after each
    (its .bss), then the rest, smallest first: the state is found without reading
    gigabytes. (Where a core names no files, as a gcore of gdb 16 cut before its
    notes at the end, a library's .bss is still among the small regions, and the
    heap and tensor arenas are the big ones.)"""

    def rank(i):
        start, end, path = regions[i]
        if "libovf_runtime" in path:
            return (0, 0, i)
        if i and "libovf_runtime" in regions[i - 1][2]:
            return (1, 0, i)
        return (2, end - start, i)

    return [regions[i] for i in sorted(range(len(regions)), key=rank)]


def scan_for_state(
    target, newer=None, notes=None, max_bytes=SCAN_MAX_BYTES, max_seconds=SCAN_MAX_SECONDS
):
    """(Ring, " in <path>") for the first valid ring header in writable memory,
    or None; ring headers of a newer layout are appended to `newer`. The scan
    reads at most `max_bytes` for at most `max_seconds` (a crafted core can
    claim terabytes of segments); where it stopped early, a line says so in
    `notes`."""
    regions = _scan_order(list(target.memory_regions()))
    total = sum(max(0, end - start) for start, end, _ in regions)
    deadline = time.monotonic() + max_seconds
    scanned = 0
    for start, end, path in regions:
        at = start
        while at < end:
            if scanned >= max_bytes or time.monotonic() > deadline:
                if notes is not None:
                    notes.append(
                        f"ovf: the scan for the ring stopped after {scanned >> 20} MiB of "
                        f"{total >> 20} MiB of writable memory ({max_bytes >> 20} MiB or "
                        f"{max_seconds:g} s at most)"
                    )
                return None
            size = min(end - at, 1 << 20)
            try:
                data = target.read_memory(at, size)
            except TargetMemoryError:
                break
            scanned += size
            hit = data.find(layout.MAGIC_HEAD)
            while hit >= 0:
                # the state is 8-byte aligned, so chunks need no overlap
                if hit % 8 == 0 and data[hit + 4 : hit + 8] == layout.MAGIC_TAIL:
                    try:
                        return Ring(target, at + hit), f" in {path}" if path else ""
                    except NewerLayoutError as e:
                        if newer is not None:
                            newer.append(e)
                    except OvfError:
                        pass  # the magic's 8 bytes by chance
                hit = data.find(layout.MAGIC_HEAD, hit + 1)
            at += size
    return None


class Ring:
    """The validated header, control block and lazily read records of one state."""

    def __init__(self, target, address):
        self.target = target
        self.address = address
        self.notes = []  # lines the commands print before their output
        try:
            raw = target.read_memory(address, layout.HEADER_SIZE)
        except TargetMemoryError as e:
            raise OvfError(f"ovf: cannot read ovf_state at 0x{address:x}: {e}") from None
        self.header, self.control = layout.decode_header(raw)
        self._validate()
        h = self.header
        self.capacity = h.record_capacity
        self.version = h.layout_version
        self.record_size = h.record_size
        self.end_seq = h.write_seq
        self.floor_seq = max(0, self.end_seq - self.capacity)
        self._chunks = {}  # chunk number -> bytes of CHUNK_RECORDS slots
        self._name_index = {}  # block number -> bytes of NAME_BLOCK index entries
        self._texts = {}  # name id -> escaped text

    def _validate(self):
        h = self.header
        where = f"ovf_state at 0x{self.address:x}"
        if h.magic == 0:
            raise OvfError(
                f"ovf: the ovf runtime is loaded but its ring is not initialised yet ({where} is"
                " zero)"
            )
        if h.magic != layout.MAGIC:
            raise OvfError(f"ovf: {where} holds no ovf ring (magic 0x{h.magic:016x})")
        if h.layout_version > layout.LAYOUT_VERSION:
            raise NewerLayoutError(
                f"ovf: the ring has layout version {h.layout_version}, newer than this ovf "
                f"debugger extension reads ({layout.LAYOUT_VERSION}); use the extension that "
                f"ships with the runtime (version {layout.version_text(h.runtime_version)})"
            )
        if h.layout_version not in layout.RECORD_SIZES:
            raise OvfError(f"ovf: {where} is corrupt (layout version {h.layout_version})")
        expected = layout.RECORD_SIZES[h.layout_version]
        if h.header_size != layout.HEADER_SIZE or h.record_size != expected:
            raise OvfError(
                f"ovf: {where} is corrupt (header {h.header_size} bytes, record "
                f"{h.record_size} bytes; layout {h.layout_version} has "
                f"{layout.HEADER_SIZE} and {expected})"
            )
        cap = h.record_capacity
        if cap == 0 or cap & (cap - 1) or cap > MAX_CAPACITY:
            raise OvfError(
                f"ovf: {where} is corrupt (record capacity {cap} is not a power of two "
                f"up to {MAX_CAPACITY})"
            )
        if h.write_seq >= 1 << 62 or h.records_addr == 0:
            raise OvfError(
                f"ovf: {where} is corrupt (write sequence {h.write_seq}, records at "
                f"0x{h.records_addr:x})"
            )

    # ------------------------------------------------------------ records

    def _chunk(self, number):
        data = self._chunks.get(number)
        if data is None:
            first = number * CHUNK_RECORDS
            count = min(CHUNK_RECORDS, self.capacity - first)
            try:
                data = self.target.read_memory(
                    self.header.records_addr + first * self.record_size, count * self.record_size
                )
            except TargetMemoryError:
                data = b""
            self._chunks[number] = data
        return data

    def record(self, seq):
        """The Record written with sequence number `seq`, or a BadSlot."""
        if seq < self.floor_seq or seq >= self.end_seq:
            return BadSlot(seq, OVERWRITTEN if seq < self.floor_seq else TORN)
        slot = seq & (self.capacity - 1)
        data = self._chunk(slot // CHUNK_RECORDS)
        offset = (slot % CHUNK_RECORDS) * self.record_size
        if len(data) < offset + self.record_size:
            return BadSlot(seq, UNREADABLE)
        found = struct.unpack_from("<Q", data, offset)[0]
        if found != seq:
            return BadSlot(seq, OVERWRITTEN if found != layout.NO_SEQ and found > seq else TORN)
        record = layout.decode_record(data, offset, self.version)
        if record.kind == layout.KIND_EMPTY or record.kind >= len(layout.KIND_NAMES):
            return BadSlot(seq, CORRUPT)
        return record

    def records_of_kind(self, kind):
        """The readable records of `kind` in the ring, oldest first: one pass over
        each chunk's kind bytes (offset 40) instead of decoding every slot; the
        matches are decoded by record(), so a torn or overwritten slot is left out."""
        seqs = []
        for number in range((self.capacity + CHUNK_RECORDS - 1) // CHUNK_RECORDS):
            data = self._chunk(number)
            kinds = data[40 :: self.record_size]
            at = kinds.find(kind)
            while at != -1:
                seqs.append(struct.unpack_from("<Q", data, at * self.record_size)[0])
                at = kinds.find(kind, at + 1)
        records = (self.record(seq) for seq in sorted(seqs))
        return [r for r in records if not isinstance(r, BadSlot)]

    def record_at(self, address):
        """The sequence number of the slot at `address` (a record pointer), or None."""
        offset = address - self.header.records_addr
        if offset < 0 or offset % self.record_size or offset // self.record_size >= self.capacity:
            return None
        return offset // self.record_size

    # ------------------------------------------------------------ names

    def name(self, name_id):
        """The interned string `name_id` as raw bytes (b"<bad name id N>" for a
        bad id). Read on demand, an index block and one string at a time: a
        crafted header cannot make the reader load a gigabyte arena."""
        h = self.header
        count = min(h.names_count, h.names_capacity, MAX_NAMES)
        if name_id >= count:
            return b"<bad name id %d>" % name_id
        block = name_id // NAME_BLOCK
        index = self._name_index.get(block)
        if index is None:
            first = block * NAME_BLOCK
            index = self._read_or_empty(
                h.names_index_addr + 8 * first, 8 * min(NAME_BLOCK, count - first)
            )
            self._name_index[block] = index
        at = 8 * (name_id % NAME_BLOCK)
        if len(index) < at + 8:
            return b"<bad name id %d>" % name_id
        offset, length = struct.unpack_from("<II", index, at)
        used = min(h.names_arena_used, h.names_arena_size)
        if offset + length > used:
            return b"<bad name id %d>" % name_id
        if length > MAX_NAME:
            return self._long_name(name_id, h.names_arena_addr + offset, length)
        raw = self._read_or_empty(h.names_arena_addr + offset, length) if length else b""
        return raw if len(raw) == length else b"<bad name id %d>" % name_id

    def _long_name(self, name_id, address, length):
        """Its first LONG_NAME_SHOWN bytes (not cutting a UTF-8 character) and its size."""
        head = self._read_or_empty(address, LONG_NAME_SHOWN + 1)
        if len(head) != LONG_NAME_SHOWN + 1:
            return b"<bad name id %d>" % name_id
        cut = LONG_NAME_SHOWN
        while cut > LONG_NAME_SHOWN - 3 and head[cut] & 0xC0 == 0x80:  # a continuation byte
            cut -= 1
        return head[:cut] + b"... (a name of %d bytes)" % length

    def _read_or_empty(self, address, size):
        try:
            return self.target.read_memory(address, size)
        except TargetMemoryError as e:
            note = f"ovf: the string table is unreadable ({e}); names show as <bad name id>"
            if note not in self.notes:
                self.notes.append(note)
            return b""

    def module(self, name_id, none="(no module)"):
        """A module path for people: `none` for no module, the watched model
        itself (path "") as "<root Class>" where the runtime named its class."""
        if name_id == layout.NO_ID:
            return none
        path = self.text(name_id)
        if path == "" and self.header.root_class_id != layout.NO_ID:
            return f"<root {self.text(self.header.root_class_id)}>"
        return path

    def text(self, name_id):
        """The interned string `name_id`, escaped for printing (report.escape_text)."""
        text = self._texts.get(name_id)
        if text is None:
            text = self._texts[name_id] = escape_text(self.name(name_id))
        return text
