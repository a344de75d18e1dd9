"""Which samples: the samples log (ring.h's ovf_samples_log, layout 7) with the
dataset indices a DataLoader gave the last batches, and the rows of the first
non-finite line (its record's row fields) read as samples of its batch, worded
as runtime/core/row_samples.cpp and sample_log.cpp word them in the process."""

import struct
from collections import namedtuple

from . import layout
from .errors import OvfError
from .ring import BadSlot
from .target import TargetMemoryError

MAGIC = 0x4C504D532D46564F  # "OVF-SMPL"
VERSION = 1
ENTRIES = 16
PER_ENTRY = 64
_HEADER = struct.Struct("<QIIQ40x")
_ENTRY = struct.Struct(f"<QQIIQ{PER_ENTRY}q")
SIZE = _HEADER.size + ENTRIES * _ENTRY.size
MIXER_SEARCH = 1 << 20  # records read back for a module that mixed a batch's rows

Entry = namedtuple("Entry", "batch total dataset indices")
# rows: the kept rows; count: rows holding a NaN/Inf; extent: the first dimension;
# mixed_by: what mixed the batch's rows before ("" none); dataset, indices: the samples
RowSamples = namedtuple("RowSamples", "rows count extent mixed_by dataset indices")


def entries(ring):
    """The samples log's complete entries, oldest first ([] where the runtime kept
    none: no DataLoader batch, or a ring older than layout 7)."""
    address = ring.header.samples_addr if ring.version >= 7 else 0
    if not address:
        return []
    data = _read(ring, address, SIZE)
    magic, version, size, written = _HEADER.unpack_from(data)
    if magic != MAGIC or (version == VERSION and size != SIZE):
        raise OvfError(
            f"ovf: the samples log at 0x{address:x} is corrupt (magic 0x{magic:016x}, {size} bytes)"
        )
    if version != VERSION:
        raise OvfError(f"ovf: the samples log has version {version}; this ovf reads {VERSION}")
    found = []
    for k in range(max(0, written - ENTRIES), written):
        batch, total, dataset_id, count, number, *indices = _ENTRY.unpack_from(
            data, _HEADER.size + (k % ENTRIES) * _ENTRY.size
        )
        if number != k + 1:  # being written when the process stopped, or reused
            continue
        found.append(Entry(batch, total, ring.text(dataset_id), indices[: min(count, PER_ENTRY)]))
    return found


def of_batch(ring, batch):
    return [e for e in entries(ring) if e.batch == batch]


def entry_text(e):
    """ "batch 2 held dataset indices 37, 5 (Squares, 2 of 2)"."""
    kept = len(e.indices)
    share = f"{e.total} of {e.total}" if kept == e.total else f"the first {kept} of {e.total}"
    listed = ", ".join(map(str, e.indices))
    return f"batch {e.batch} held dataset indices {listed} ({e.dataset}, {share})"


def _holds_batch_rows(r):
    if r.kind == layout.KIND_OP_OUTPUT:
        return not r.flags & layout.FLAG_BACKWARD
    return r.kind in (
        layout.KIND_INPUT,
        layout.KIND_OUTPUT,
        layout.KIND_GRAD,
        layout.KIND_CHECKPOINT,
    )


def _mixes_rows(ring, r):
    if r.kind == layout.KIND_FRAME:
        cls = ring.text(r.label_id)
        return "BatchNorm" in cls and "Frozen" not in cls
    if r.kind == layout.KIND_OP_OUTPUT and not r.flags & layout.FLAG_BACKWARD:
        return "batch_norm" in ring.text(r.name_id)
    return False


def _mixer_before(ring, first):
    for seq in range(first.seq - 1, max(first.seq - MIXER_SEARCH, 0) - 1, -1):
        r = ring.record(seq)
        if isinstance(r, BadSlot) or r.batch != first.batch:
            break
        if not _mixes_rows(ring, r):
            continue
        if r.kind == layout.KIND_FRAME:
            return f"{ring.text(r.label_id)} ({ring.module(r.name_id, 'no module')})"
        return f"{ring.text(r.name_id)} in {ring.module(r.context_id, 'no module')}"
    return ""


def row_samples(ring, first, held):
    """What `first`'s rows say (None where they were not measured); `held`: the
    samples log's entries of its batch (of_batch)."""
    if first.row_extent == 0 or first.row_count == 0:  # not measured (or torn)
        return None
    rows = list(first.rows[: min(first.row_count, layout.ROWS_KEPT)])
    none = RowSamples(rows, first.row_count, first.row_extent, "", "", [])
    # only a value computed from the batch has its rows; every row: none singled out
    if not _holds_batch_rows(first) or first.row_count == first.row_extent:
        return none
    sized = [e for e in held if e.total == first.row_extent]
    if len(sized) != 1:
        return none
    mixed_by = _mixer_before(ring, first)
    if mixed_by:
        return none._replace(mixed_by=mixed_by)
    (batch,) = sized
    indices = [batch.indices[row] for row in rows if row < len(batch.indices)]
    return none._replace(dataset=batch.dataset, indices=indices)


def rows_text(ring, first, held):
    """ "the first non-finite value (batch 4) is in row 5 of 8 along its first
    dimension: dataset index 37 (Squares)", or "" where the rows were not measured;
    `held` as row_samples takes it."""
    s = row_samples(ring, first, held)
    if s is None:
        return ""
    text = f"the first non-finite value (batch {first.batch})"
    if s.count == s.extent and s.extent > 1:
        text += f" is in all {s.extent} rows along its first dimension"
    else:
        more = f" and {s.count - len(s.rows)} more" if s.count > len(s.rows) else ""
        text += (
            f" is in row{'' if s.count == 1 else 's'} {', '.join(map(str, s.rows))}{more} of"
            f" {s.extent} along its first dimension"
        )
    if s.mixed_by:
        text += (
            f"; {s.mixed_by} mixed the batch's rows before it, so which samples it came from"
            " is not told"
        )
    elif s.indices:
        word = "index" if len(s.indices) == 1 else "indices"
        first_n = f", of the first {len(s.indices)}" if len(s.indices) < s.count else ""
        text += f": dataset {word} {', '.join(map(str, s.indices))} ({s.dataset}{first_n})"
    return text


def listing(ring, batch=None):
    """`ovf samples`: the kept batches' dataset indices (or one batch's), and what
    the first non-finite value's rows say."""
    kept = entries(ring)
    found = kept if batch is None else [e for e in kept if e.batch == batch]
    if not found:
        where = f" for batch {batch}" if batch is not None else ""
        return (
            f"ovf: no dataset indices are kept{where}: ovf names the samples a DataLoader "
            "(torch.utils.data) gave the last 16 batches, in Python mode (python3 -m ovf, "
            "ovf.enable)\n"
        )
    out = [entry_text(e) for e in found]
    first = ring.record(ring.header.first_nonfinite_seq)
    if ring.header.first_nonfinite_seq != layout.NO_SEQ and not isinstance(first, BadSlot):
        rows = rows_text(ring, first, [e for e in kept if e.batch == first.batch])
        if rows:
            out.append(rows)
    return "\n".join(out) + "\n"


def _read(ring, address, size):
    try:
        return ring.target.read_memory(address, size)
    except TargetMemoryError as e:
        raise OvfError(f"ovf: cannot read the samples log at 0x{address:x}: {e}") from None


def first_lines(ring, first, rows_always=False):
    """What the samples say of the first non-finite record `first` (a Record or None):
    its rows and its batch's dataset indices, one line each; a line saying why where
    the samples log cannot be read. The rows only where the batch's samples are known
    (as the process's report has them), unless `rows_always`."""
    if first is None:
        return []
    try:
        held = of_batch(ring, first.batch)
        rows = rows_text(ring, first, held) if held or rows_always else ""
    except OvfError as e:
        return [str(e)]
    return ([rows] if rows else []) + [entry_text(e) for e in held]


def first_json(ring, first):
    """The rows of `first` and its batch's samples as JSON values ({} where none)."""
    try:
        held = of_batch(ring, first.batch)
        s = row_samples(ring, first, held)
    except OvfError as e:
        return {"samples_error": str(e)}
    rows = (
        None
        if s is None
        else {
            "extent": s.extent,
            "count": s.count,
            "first": s.rows,
            "mixed_by": s.mixed_by or None,
            "dataset_indices": s.indices,
        }
    )
    return {
        "rows": rows,
        "samples": [{"dataset": e.dataset, "total": e.total, "indices": e.indices} for e in held],
    }
