"""The ring's bytes, as runtime/include/ovf/ring.h lays them out (layout versions 1 to 9).

Versions: fields never move; additions go into reserved space and bump the
version; a reader reads every version it knows and names a newer one as such.
Version 1 had 128-byte records whose last 8 bytes were context_id/aux_id for op
records and headroom_dtype/headroom_underflow for a frame's tensor lines;
version 2 has 192-byte records with both pairs as fields of their own and 56
reserved bytes, and the header's root_class_id (152) and own_on_event (156);
version 3 adds the header's device fields (168-183: device_mode, device_backends,
pending_frames, last_event_late), zero in earlier versions; version 4 adds the
record's loss-scaler fields (144-171: scale_before, scale_after, cause_seq,
skips_in_row), the SCALER kind, the EXPECTED flag, the SCALER stop bit and the
control block's scaler_max_skips (576) and scale_floor (584); version 5 adds the
WARNING kind (an early warning, in the same record fields), the EARLY stop bit and
the control block's early_horizon (580) and update_ratio_max (592); version 6
has 256-byte records with the cast counts (172-219: what casts to float16,
bfloat16 and the float8 types would lose, flagged CAST), the CAST stop bit and
observe bit, and the control block's cast_target (600) and cast limits (608-631);
version 7 adds the record's rows (220-251: which rows of the first non-finite line's
first dimension hold its NaN/Inf) and the header's samples_addr (184: the samples log,
the dataset indices of the last batches, decoded by samples.py); version 8 adds the
record's verdict_id (252) and the replay flag; version 9 the header's step_state (192)
and step_where_id (196), the control block's step_request (632) and the STEP stop bit
(`ovf step-into`).

Every field is listed with its offset and struct code, so that one table drives
decoding, control-block writes and the test that compiles ring.h and compares
offsetof/sizeof field by field. Values are little-endian: the runtime writes
native x86-64 / aarch64 memory, and a byte-swapped magic reads as "no ring".
"""

import struct
from collections import namedtuple

from .fields import (  # noqa: F401 (GLOB_SIZE, MAX_TRACE_BATCHES: part of the layout's names)
    CONTROL_FIELDS,
    GLOB_SIZE,
    HEADER_FIELDS,
    MAX_TRACE_BATCHES,
    RECORD_FIELDS,
    ROWS_KEPT,
)

MAGIC = 0x474E49522D46564F  # "OVF-RING" as a little-endian u64
# Its bytes, in two halves that a scan matches together. Never one 8-byte constant: the
# training process imports this module too (the replay's check), and a copy of the magic
# in its heap is what a scan of a core cut short before the real state would find.
MAGIC_HEAD, MAGIC_TAIL = b"OVF-", b"RING"
LAYOUT_VERSION = 9
HEADER_SIZE = 1024
RECORD_SIZE = 256
# every layout version this reader knows
RECORD_SIZES = {1: 128, 2: 192, 3: 192, 4: 192, 5: 192, 6: 256, 7: 256, 8: 256, 9: 256}
CONTROL_OFFSET = 256
CONTROL_SIZE = 640
NO_SEQ = 0xFFFFFFFFFFFFFFFF
STATE_SYMBOL = "ovf_state"
STOP_FUNCTION = "ovf_stop_event"

# enum ovf_record_kind
KIND_EMPTY, KIND_FRAME, KIND_WEIGHT, KIND_INPUT, KIND_OUTPUT, KIND_GRAD = range(6)
KIND_OP_OUTPUT, KIND_CHECKPOINT, KIND_BATCH_START, KIND_NONE, KIND_NOT_TENSOR = range(6, 11)
KIND_STEP, KIND_STEP_PARAM = 11, 12  # optimizer.step() and its non-finite parameters
KIND_BUFFER = 13  # a module's buffer its forward turned non-finite (layout 2)
KIND_SCALER = 14  # a loss scaler's update that skipped the step or changed the scale (layout 4)
KIND_WARNING = 15  # an early warning: a module's growth, or an optimizer step's size (layout 5)
KIND_NAMES = (
    "empty",
    "frame",
    "weight",
    "input",
    "output",
    "grad",
    "op",
    "checkpoint",
    "batch",
    "none",
    "not-tensor",
    "step",
    "step-param",
    "buffer",
    "scaler",
    "warning",
)
LINE_KINDS = frozenset(
    {
        KIND_WEIGHT,
        KIND_INPUT,
        KIND_OUTPUT,
        KIND_GRAD,
        KIND_OP_OUTPUT,
        KIND_STEP_PARAM,
        KIND_NONE,
        KIND_NOT_TENSOR,
    }
)

# enum ovf_dtype, index = value
DTYPE_NAMES = (
    "unknown",
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "complex64",
    "complex128",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
    "float8_e4m3",
    "float8_e5m2",
    "uint16",
    "uint32",
    "uint64",
)


def dtype_name(code):
    """An enum ovf_dtype value's name ("unknown" for one this reader does not know)."""
    return DTYPE_NAMES[code] if code < len(DTYPE_NAMES) else "unknown"


FLOAT_DTYPES = frozenset({1, 2, 3, 4, 5, 6, 13, 14})

# enum ovf_record_flags
FLAG_HAS_STATS = 1 << 0
FLAG_NONFINITE = 1 << 1
FLAG_EMPTY = 1 << 2
FLAG_NO_DATA = 1 << 3
FLAG_TRUNCATED = 1 << 4
FLAG_ROOT = 1 << 5
FLAG_TRACED = 1 << 6
FLAG_UNUSED_7 = 1 << 7  # was: weight statistics reused (could be stale); never written now
FLAG_PRODUCER = 1 << 8
FLAG_CARRIER = 1 << 9
FLAG_BACKWARD = 1 << 10
FLAG_CONSTANT = 1 << 11  # deliberate NaN/Inf: a constant argument, made from constants, a mask
FLAG_PENDING = 1 << 12  # device statistics not arrived yet (fast device mode)
FLAG_COMPILED = 1 << 13  # a frame from a torch.compile'd graph (fused ops unseen)
FLAG_EXPECTED = 1 << 14  # made in an expected region (GradScaler's scaled backward); CONSTANT too
FLAG_CAST = 1 << 15  # cast_counts hold what casts to the narrow types would lose (layout 6)
FLAG_REPLAY = 1 << 16  # written by the replay of a step at a module event (layout 8)

# enum ovf_device_mode (header device_mode)
DEVICE_MODE_NONE, DEVICE_MODE_FAST, DEVICE_MODE_EXACT = 0, 1, 2
DEVICE_MODE_NAMES = {
    DEVICE_MODE_NONE: "none",
    DEVICE_MODE_FAST: "fast",
    DEVICE_MODE_EXACT: "exact",
}
# enum ovf_device_backend_bits (header device_backends)
BACKEND_PORTABLE = 1 << 0
BACKEND_CUDA = 1 << 1
BACKEND_CUDA_REJECTED = 1 << 2
BACKEND_CUDA_BUILT = 1 << 3
BACKEND_NO_CUDA_DEVICE = 1 << 4

# enum ovf_stop_bits, in the order events are named
STOP_NAN = 1 << 0
STOP_INF = 1 << 1
STOP_ABOVE = 1 << 2
STOP_BELOW = 1 << 3
STOP_TRACED = 1 << 4
STOP_ABORT_AFTER = 1 << 5
STOP_PRODUCER_ONLY = 1 << 6  # modifier: NaN/Inf events only where produced (or first seen)
STOP_BACKWARD = 1 << 7
STOP_SCALER = 1 << 8  # a loss scaler gave up: skips in a row, or its scale below the floor
STOP_EARLY = 1 << 9  # an early warning: growth toward the dtype's limit, or a huge update (5)
STOP_CAST = 1 << 10  # a line's cast to control.cast_target loses more than a limit (6)
# A stop on a line of the step replayed for `ovf step-into` (9): never armed, not an event.
STOP_STEP = 1 << 11
# enum ovf_step_request (control.step_request) and enum ovf_step_state (header step_state)
STEP_NONE, STEP_INTO, STEP_NEXT, STEP_STEP, STEP_FINISH = range(5)
STEPPING_NONE, STEPPING_AT_EVENT, STEPPING_AT_LINE, STEPPING_RETURNED = range(4)
STEPPING_ENDED, STEPPING_REFUSED = 4, 5
STOP_NAMES = (
    ("nan", STOP_NAN),
    ("inf", STOP_INF),
    ("above", STOP_ABOVE),
    ("below", STOP_BELOW),
    ("traced", STOP_TRACED),
    ("abort_after", STOP_ABORT_AFTER),
    ("producer_only", STOP_PRODUCER_ONLY),
    ("backward", STOP_BACKWARD),
    ("scaler", STOP_SCALER),
    ("early", STOP_EARLY),
    ("cast", STOP_CAST),
)

# Headroom targets (enum ovf_dtype values): name -> (dtype, largest finite, smallest normal)
HEADROOM_DTYPES = {
    "fp16": (3, 65504.0, 2.0**-14),
    "bf16": (4, 255.0 * 2.0**120, 2.0**-126),
    "fp8_e4m3": (13, 448.0, 2.0**-6),
    "fp8_e5m2": (14, 57344.0, 2.0**-14),
}
HEADROOM_BY_DTYPE = {code: (name, top, low) for name, (code, top, low) in HEADROOM_DTYPES.items()}
TENSOR_LINE_KINDS = frozenset({KIND_WEIGHT, KIND_INPUT, KIND_OUTPUT})


def headroom(r):
    """(name, abs max / the dtype's max, values below its smallest normal) of a
    frame's tensor line recorded with headroom on; None otherwise."""
    if r.kind not in TENSOR_LINE_KINDS or r.headroom_dtype not in HEADROOM_BY_DTYPE:
        return None
    name, top, _ = HEADROOM_BY_DTYPE[r.headroom_dtype]
    return name, r.abs_max / top, r.headroom_underflow


# enum ovf_observe_bits
OBSERVE_OPS = 1 << 0
OBSERVE_BACKWARD = 1 << 1
OBSERVE_OPTIMIZER_STATE = 1 << 2
OBSERVE_CAST = 1 << 3  # every floating line counts what casts would lose (layout 6)
OBSERVE_CAPTURE_OPTIMIZER = 1 << 4  # a copy before each optimizer step: its events replay

# enum ovf_cast_target / ovf_cast_loss: a record's cast_counts[target * 3 + loss]
CAST_TARGETS = ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2")  # the names --cast takes
CAST_TARGET_DTYPES = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
CAST_LOSSES = ("overflow", "flush", "subnormal")


def cast_losses(r, target):
    """(overflow, flush, subnormal) counts of line r for a cast to CAST_TARGETS[target]."""
    return r.cast_counts[target * 3 : target * 3 + 3]


def cast_shares(r):
    """{target: (overflow, flush, subnormal) as shares of r's elements} for a line
    recorded with cast counts (FLAG_CAST); None otherwise."""
    if not r.flags & FLAG_CAST or not r.numel:
        return None
    return {
        name: tuple(count / r.numel for count in cast_losses(r, t))
        for t, name in enumerate(CAST_TARGETS)
    }


NO_ID = 0xFFFFFFFF

# enum ovf_on_event, index = value
ON_EVENT_NAMES = ("raise", "warn", "abort", "wait", "continue")
ON_EVENT_CONTINUE = 4
ON_EVENT_WAIT = 3

DETECTION_STATES = ("off", "watching", "non-finite seen")


def _table(fields, size):
    """A struct.Struct over `fields` [(name, offset, code)], padded to `size`,
    checking that the offsets leave no overlap; returns (struct, {name: (offset, size)})."""
    fmt = "<"
    at = 0
    where = {}
    for name, offset, code in fields:
        if offset < at:
            raise AssertionError(f"layout table: {name} overlaps the field before it")
        fmt += f"{offset - at}x" if offset > at else ""
        width = struct.calcsize("<" + code)
        fmt += code
        where[name] = (offset, width)
        at = offset + width
    fmt += f"{size - at}x" if size > at else ""
    packed = struct.Struct(fmt)
    if packed.size != size:
        raise AssertionError(f"layout table is {packed.size} bytes, expected {size}")
    return packed, where


RECORD_STRUCT, RECORD_OFFSETS = _table(RECORD_FIELDS, RECORD_SIZE)


def _fields_before(name):
    return RECORD_FIELDS[: [n for n, _, _ in RECORD_FIELDS].index(name)]


# Version 7: the fields before the verdict, in 256 bytes; version 6: the fields before
# the rows; versions 2 to 5: the fields before cast_counts, in 192 bytes; version 1: the
# same fields up to aux_id, in 128.
_RECORD_V7_FIELDS = _fields_before("verdict_id")
_RECORD_V6_FIELDS = _fields_before("row_extent")
_RECORD_V2_FIELDS = _fields_before("cast_counts")
_RECORD_V1_FIELDS = RECORD_FIELDS[: len(_fields_before("aux_id")) + 1]
_RECORD_V7_STRUCT, _ = _table(_RECORD_V7_FIELDS, RECORD_SIZES[7])
_RECORD_V6_STRUCT, _ = _table(_RECORD_V6_FIELDS, RECORD_SIZES[6])
_RECORD_V2_STRUCT, _ = _table(_RECORD_V2_FIELDS, RECORD_SIZES[2])
_RECORD_V1_STRUCT, _ = _table(_RECORD_V1_FIELDS, RECORD_SIZES[1])
CONTROL_STRUCT, CONTROL_OFFSETS = _table(CONTROL_FIELDS, CONTROL_SIZE)
_HEADER_ONLY_STRUCT, HEADER_OFFSETS = _table(HEADER_FIELDS, CONTROL_OFFSET)
# The fixed part of a record is (seq, frame_seq, ...): one tuple per record.
Record = namedtuple("Record", [name for name, _, _ in RECORD_FIELDS])
# What the fields a layout did not have read as (zero else).
_ABSENT = {
    "cause_seq": NO_SEQ,
    "cast_counts": (0,) * 12,
    "rows": (0,) * ROWS_KEPT,
    "verdict_id": NO_ID,
}


def _width(code):
    """How many values a field's struct code unpacks to (an array's count; "256s" is one)."""
    count = code[:-1]
    return int(count) if count and code[-1] != "s" else 1


def _fold(values, fields):
    """The unpacked `values` of `fields`, an array field's values as one tuple."""
    out, at = [], 0
    for _, _, code in fields:
        width = _width(code)
        out.append(tuple(values[at : at + width]) if width > 1 else values[at])
        at += width
    return out


def _unfold(record, fields):
    """A Record's values of `fields` flat, as the struct packs them."""
    flat = []
    for name, _, code in fields:
        value = getattr(record, name)
        flat += list(value) if _width(code) > 1 else [value]
    return flat


def _complete(values, fields, absent=_ABSENT):
    """A Record from the folded values of `fields`; the rest as a layout without them reads."""
    known = dict(zip((n for n, _, _ in fields), values, strict=True))
    return Record._make(
        known[name] if name in known else absent.get(name, 0) for name, _, _ in RECORD_FIELDS
    )


_BEFORE_V4 = {"cause_seq": NO_SEQ}  # the layout 4 fields' "none" in older records (zero else)
Header = namedtuple("Header", [name for name, _, _ in HEADER_FIELDS])


class Control(namedtuple("Control", [name for name, _, _ in CONTROL_FIELDS])):
    """The debugger-writable block; trace_batches is a tuple, module_glob raw bytes."""

    @property
    def glob_text(self):
        return self.module_glob.split(b"\0", 1)[0].decode("utf-8", "replace")

    @property
    def traced(self):
        return self.trace_batches[: min(self.trace_count, MAX_TRACE_BATCHES)]


def decode_header(data):
    """(Header, Control) from the state's first HEADER_SIZE bytes."""
    if len(data) < HEADER_SIZE:
        raise ValueError(f"{len(data)} bytes is shorter than the {HEADER_SIZE}-byte header")
    header = Header._make(_HEADER_ONLY_STRUCT.unpack_from(data, 0))
    if header.layout_version == 1:  # reserved (zero) bytes then: no root class, the mode unknown
        header = header._replace(
            root_class_id=NO_ID, own_on_event=ON_EVENT_CONTINUE, snapshot_addr=0
        )
    values = CONTROL_STRUCT.unpack_from(data, CONTROL_OFFSET)
    # the array trace_batches unpacks as MAX_TRACE_BATCHES values: fold them into one tuple
    trace = tuple(values[10 : 10 + MAX_TRACE_BATCHES])
    control = Control._make(values[:10] + (trace,) + values[10 + MAX_TRACE_BATCHES :])
    return header, control


def _record_table(version):
    """(struct, fields) of a record in layout `version`."""
    if version >= 8:
        return RECORD_STRUCT, RECORD_FIELDS
    if version == 7:
        return _RECORD_V7_STRUCT, _RECORD_V7_FIELDS
    if version == 6:
        return _RECORD_V6_STRUCT, _RECORD_V6_FIELDS
    if version != 1:
        return _RECORD_V2_STRUCT, _RECORD_V2_FIELDS
    return _RECORD_V1_STRUCT, _RECORD_V1_FIELDS


def encode_record(record, version=LAYOUT_VERSION):
    """The bytes of `record` (a Record) in layout `version`: what the runtime of
    that version writes (tests build rings of every version with it)."""
    if version == 1 and record.kind in TENSOR_LINE_KINDS:
        record = record._replace(context_id=record.headroom_dtype, aux_id=record.headroom_underflow)
    packed, fields = _record_table(version)
    return packed.pack(*_unfold(record, fields))


def decode_record(data, offset=0, version=LAYOUT_VERSION):
    """A Record of layout `version`, in the newest layout's fields."""
    packed, fields = _record_table(version)
    values = _fold(packed.unpack_from(data, offset), fields)
    if version != 1:
        r = _complete(values, fields)
        # the loss-scaler fields were reserved (zero) bytes before layout 4: no cause
        return r if version >= 4 else r._replace(cause_seq=NO_SEQ)
    r = _complete(values, fields, {**_ABSENT, "diagnosis_id": NO_ID, "location_id": NO_ID})
    if r.kind in TENSOR_LINE_KINDS:  # the union held headroom for a frame's tensor lines
        return r._replace(
            headroom_dtype=r.context_id, headroom_underflow=r.aux_id, context_id=NO_ID, aux_id=NO_ID
        )
    return r


def encode_control_field(name, value):
    """(offset from the state's start, bytes) that set one control field."""
    offset, _ = CONTROL_OFFSETS[name]
    code = dict((n, c) for n, _, c in CONTROL_FIELDS)[name]
    if name == "trace_batches":
        return CONTROL_OFFSET + offset, struct.pack(f"<{len(value)}q", *value)
    if name == "module_glob":
        raw = value.encode("utf-8")
        if len(raw) >= GLOB_SIZE:
            raise ValueError(f"a module glob holds at most {GLOB_SIZE - 1} bytes")
        return CONTROL_OFFSET + offset, raw.ljust(GLOB_SIZE, b"\0")
    return CONTROL_OFFSET + offset, struct.pack("<" + code, value)


def version_text(packed):
    """runtime_version (major << 16 | minor << 8 | patch) as "M.m.p"."""
    return f"{packed >> 16}.{(packed >> 8) & 0xFF}.{packed & 0xFF}"
