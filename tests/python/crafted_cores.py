"""Hostile ELF core files, made here byte by byte (nothing binary is committed):
what a reader must survive without using gigabytes or minutes."""

import struct

PT_LOAD, PF_RW = 1, 6
ELF_HEADER = struct.Struct("<4sBBBBB7xHHIQQQIHHHHHH")
PROGRAM_HEADER = struct.Struct("<IIQQQQQQ")
MAGIC = struct.pack("<Q", 0x474E49522D46564F)  # the ring's "OVF-RING"


def core(segments, data):
    """An ET_CORE file whose PT_LOAD `segments` [(vaddr, file offset into `data`, size)]
    all read from the one `data` blob placed after the headers."""
    base = ELF_HEADER.size + PROGRAM_HEADER.size * len(segments)
    out = bytearray(
        ELF_HEADER.pack(
            b"\x7fELF",
            2,
            1,
            1,
            0,
            0,
            4,
            62,
            1,
            0,
            ELF_HEADER.size,
            0,
            0,
            ELF_HEADER.size,
            PROGRAM_HEADER.size,
            len(segments),
            64,
            0,
            0,
        )
    )
    for vaddr, offset, size in segments:
        out += PROGRAM_HEADER.pack(PT_LOAD, PF_RW, base + offset, vaddr, 0, size, size, 4096)
    return bytes(out + data)


def ring_header(names_index, names_arena, names_count, arena_used, records, write_seq):
    """A valid layout-2 ring header (1024 bytes) of a single process on the CPU
    whose records and string table lie where the caller says."""
    h = bytearray(1024)
    struct.pack_into(
        "<QIIIIQQQQQQQIIII",
        h,
        0,
        0x474E49522D46564F,
        2,
        1024,
        192,
        64,
        records,
        write_seq,
        0,
        2**64 - 1,
        2**64 - 1,
        names_index,
        names_arena,
        names_count,
        names_count,
        arena_used,
        arena_used,
    )
    struct.pack_into(
        "<iiiii", h, 96, 4242, -1, -1, 1, -1
    )  # pid, rank, local rank, world size, device
    struct.pack_into("<I", h, 152, 0xFFFFFFFF)  # root_class_id: none
    return bytes(h)


def frame_record(seq, name_id, label_id):
    """A FRAME record (layout 2, 192 bytes) named by two string ids."""
    r = bytearray(192)
    struct.pack_into("<QQQQIIB", r, 0, seq, seq, 0, 0, name_id, label_id, 1)
    return bytes(r)


def huge_name_arena(path):
    """1.2 MB on disk: 1024 overlapping segments of the same 1 MiB make a 1 GiB
    string arena readable, and the header says it is all in use."""
    arena_at, index_at, records_at = 0x4000_0000, 0x2000_0000, 0x3000_0000
    index = struct.pack("<II", 0, (1 << 30) - 1) * 4  # four names, each claiming the whole arena
    records = frame_record(0, 1, 2).ljust(64 * 192, b"\0")  # one frame named by two of them
    blob = (
        ring_header(index_at, arena_at, 4, 1 << 30, records_at, 1)
        + index
        + records
        + b"A" * (1 << 20)
    )
    segments = [
        (0x1000_0000, 0, 1024),
        (index_at, 1024, len(index)),
        (records_at, 1024 + len(index), len(records)),
    ]
    segments += [
        (arena_at + i * (1 << 20), 1024 + len(index) + len(records), 1 << 20) for i in range(1024)
    ]
    with open(path, "wb") as f:
        f.write(core(segments, blob))


def endless_scan(path, segments=65534):
    """About 20 MB on disk: `segments` writable segments of 16 MiB each, all the
    same bytes, none holding a ring: a terabyte for a magic scan to read."""
    blob = b"\0" * (16 << 20)
    with open(path, "wb") as f:
        f.write(
            core([(0x1_0000_0000 + i * (16 << 20), 0, 16 << 20) for i in range(segments)], blob)
        )


def ring_core(path, ring=True, zeros=()):
    """A core with no notes at all (no NT_FILE, no loader list): the ring header at
    0x10000000 in a segment of which only the header's 1024 bytes are in the file, 1 MiB
    more in memory not dumped (p_filesz < p_memsz), then the string table ("model.layer",
    "Linear") and 64 records, one frame. `ring`: False leaves the magic out. `zeros`:
    [(address, MiB, writable)] more segments, all reading the same MiB of zeros."""
    names = [b"", b"model.layer", b"Linear"]
    index = b"".join(
        struct.pack("<II", sum(map(len, names[:i])), len(n)) for i, n in enumerate(names)
    )
    arena = b"".join(names)
    records = frame_record(0, 1, 2).ljust(64 * 192, b"\0")
    index_at, records_at, arena_at = 0x2000_0000, 0x3000_0000, 0x4000_0000
    header = ring_header(index_at, arena_at, len(names), len(arena), records_at, 1)
    if not ring:
        header = bytes(8) + header[8:]
    blob = header + index + records + arena
    segments = [
        (0x1000_0000, 0, len(header)),
        (index_at, len(header), len(index)),
        (records_at, len(header) + len(index), len(records)),
        (arena_at, len(header) + len(index) + len(records), len(arena)),
    ]
    segments += [(address, len(blob), mib << 20) for address, mib, _ in zeros]
    if zeros:
        blob += bytes(max(mib for _, mib, _ in zeros) << 20)
    data = bytearray(core(segments, blob))
    # Program header i: p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz.
    first = ELF_HEADER.size
    struct.pack_into("<Q", data, first + 40, len(header) + (1 << 20))  # p_memsz
    for i, (_, _, writable) in enumerate(zeros, start=4):
        if not writable:
            struct.pack_into("<I", data, first + i * PROGRAM_HEADER.size + 4, 4)
    with open(path, "wb") as f:
        f.write(data)
    return path
