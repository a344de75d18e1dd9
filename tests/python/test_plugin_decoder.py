"""The ring decoder and the reference formatter on hand-built ring images:
torn and overwritten slots, hostile names, bad headers, filters."""

import json
import math
import os
import struct
import sys

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "plugin"))

from ovf_plugin import commands, summary  # noqa: E402
from ovf_plugin.control import Control  # noqa: E402
from ovf_plugin.session import Session  # noqa: E402
from ovf_ring import layout, postmortem, report  # noqa: E402
from ovf_ring.errors import OvfError  # noqa: E402
from ovf_ring.event import last_event  # noqa: E402
from ovf_ring.frames import walk_back  # noqa: E402
from ovf_ring.ring import locate  # noqa: E402
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


def test_every_known_layout_version_reads_the_same():
    """Yesterday's cores (layout 1: headroom shared its bytes with an op's module)
    read as today's (layout 2), headroom and op records included."""
    listings = {}
    for version in layout.RECORD_SIZES:
        b = two_batches(version=version)
        head = b._append(layout.KIND_FRAME, name_id=b.intern("fc"), label_id=b.intern("Linear"))
        b._append(
            layout.KIND_OUTPUT,
            frame_seq=head,
            label_id=b.intern("output"),
            dtype=2,
            numel=4,
            flags=layout.FLAG_HAS_STATS,
            abs_min=1.0,
            abs_max=49136.0,
            abs_min_nonzero=1.0,
            headroom_dtype=3,
            headroom_underflow=2,
        )
        b._append(
            layout.KIND_OP_OUTPUT,
            name_id=b.intern("aten::exp"),
            label_id=b.intern("output"),
            dtype=2,
            numel=4,
            flags=layout.FLAG_HAS_STATS,
            abs_min=1.0,
            abs_max=2.0,
            context_id=b.intern("fc"),
            aux_id=layout.NO_ID,
        )
        listings[version] = listing(ImageTarget(b.image()), ["--headroom", "--ops", "3"])
    assert listings[1] == listings[2]
    assert "1.00e+00 4.91e+04 output  [fp16: 0.75 of max, 2 below normal]" in listings[2]
    assert "1.00e+00 2.00e+00 output = aten::exp in fc" in listings[2]


def test_listing_is_the_reference_format():
    out = listing(ImageTarget(two_batches().image()), ["3"])
    assert (
        out == "Last 3 forward frames:\n"
        "abs min  abs max  metadata\n"
        "                   Net\n"
        "1.00e+00 3.00e+00 input[0]\n"
        "2.50e-01 6.00e+00 output\n"
        "\n\n                  *** Starting batch number=1 ***\n"
        "abs min  abs max  metadata\n"
        "                  fc Linear\n"
        "5.00e-01 2.00e+00 weight\n"
        "1.00e+00 3.00e+00 input[0]\n"
        "2.50e-01 6.00e+00 output\n"
        "                   Net\n"
        "1.00e+00 3.00e+00 input[0]\n"
        "2.50e-01 6.00e+00 output\n"
    )


UNSEEN = (
    "module frames are recorded there; the ATen ops Inductor fuses into its kernels are not "
    "seen (--ops names eager ops only)"
)


def compiled_batches(compiled=True):
    """Batch 0 eager; in batch 1 the model runs compiled (its frames flagged so, when
    `compiled`), and fc's output overflows there."""
    b = RingBuilder()
    b.marker()
    for batch in range(2):
        flags = layout.FLAG_COMPILED if batch and compiled else 0
        b.frame("fc", "Linear", [("output", 4, 4, 0, batch, 0.25, 6.0)], flags)
        b.frame("", "Net", [("output", 4, 4, 0, 0, 0.25, 6.0)], flags)
        b.end_batch()
    return b


def test_status_and_frames_say_once_what_compiled_code_hides():
    target = ImageTarget(compiled_batches().image())
    status = commands.execute(Session(target), "status", [])
    line = f"torch.compile: 2 of the last 4 frames ran in compiled graphs: {UNSEEN}\n"
    assert status.count("torch.compile") == 1 and line in status, status
    frames = listing(target)
    note = f"ovf: 2 of 4 frames listed ran in torch.compile'd graphs: {UNSEEN}\n"
    assert frames.startswith(note + "Last 4 forward frames:\n"), frames
    assert listing(target, ["1"]).startswith(
        f"ovf: 1 of 1 frame listed ran in torch.compile'd graphs: {UNSEEN}\nLast 1 forward"
    )
    # frames of the eager batch only: nothing to say
    assert listing(target, ["--batch", "0"]).startswith("Last 2 forward frames:\n")
    data = json.loads(listing(target, ["--json"]))
    assert [f["compiled"] for f in data["frames"]] == [False, False, True, True]
    assert data["notes"] == [note.strip()]
    # python3 -m ovf.postmortem: in the summary when no frames are listed (--frames 0),
    # else in the listing only
    core = postmortem.Core("core", ring=locate(target))
    assert postmortem.summary(core, ring_notes=True).endswith(line)
    assert "torch.compile" not in postmortem.summary(core)
    assert postmortem.frames(core) == frames


def test_an_eager_ring_says_nothing_of_compiled_code():
    target = ImageTarget(compiled_batches(compiled=False).image())
    status = commands.execute(Session(target), "status", [])
    assert "compile" not in status and "Inductor" not in status, status
    assert listing(target).startswith("Last 4 forward frames:\n")


def test_a_stop_in_a_compiled_frame_says_it_once():
    b = compiled_batches()
    inf_frame = 6  # batch 1's fc: after a marker, batch 0's two frames of two records, a marker
    image = b.image(last_event_seq=inf_frame, last_event_kind=layout.STOP_INF)
    ring = locate(ImageTarget(image))
    text = summary.stop_summary(ring, last_event(ring))
    assert text.count(UNSEEN) == 1, text
    assert f"ovf: 1 of 2 frames listed ran in torch.compile'd graphs: {UNSEEN}\n" in text, text
    eager = compiled_batches(compiled=False)
    ring = locate(ImageTarget(eager.image(last_event_seq=inf_frame, last_event_kind=2)))
    assert "compile" not in summary.stop_summary(ring, last_event(ring))


def test_format_8_2e_is_pythons_for_the_reference_values():
    for x in (
        0.0,
        1e-300,
        5e-324,
        1.5,
        6.27e4,
        65504.0,
        1e308,
        math.inf,
        -math.inf,
        math.nan,
        -math.nan,
    ):
        assert report.format_8_2e(x) == format(x, "8.2e").replace("-nan", " nan")
    assert report.format_8_2e(-math.nan) == "     nan"


def test_reference_min_max_follows_torch():
    b = RingBuilder()
    b.frame(
        "m",
        "M",
        [
            ("output", 4, 4, 1, 0, 1.0, 2.0),
            ("x", 4, 4, 0, 2, 1.0, 2.0),
            ("y", 4, 2, 0, 2, math.inf, 0.0),
        ],
    )
    ring = locate(ImageTarget(b.image()))
    lines = walk_back(ring, 1).frames[0].lines
    assert [report.format_record(r, ring.text) for r in lines] == [
        "     nan      nan output",
        "1.00e+00      inf x",
        "     inf      inf y",
    ]


@pytest.mark.parametrize(
    "raw, shown",
    [
        (b"plain.name", "plain.name"),
        (b"evil\x1b[2Jname", "evil\\x1b[2Jname"),
        (b"back\\slash", "back\\\\slash"),
        (b"nl\nand\rdel\x7f", "nl\\x0aand\\x0ddel\\x7f"),
        ("caf\u00e9.\u4e2d".encode(), "caf\u00e9.\u4e2d"),
        (b"bad\xff\xfeutf8", "bad\\xff\\xfeutf8"),
        ("c1\u009bcsi".encode(), "c1\\xc2\\x9bcsi"),
    ],
)
def test_hostile_names_are_escaped(raw, shown):
    assert report.escape_text(raw) == shown
    b = RingBuilder()
    b.frame(raw, "Cls\x07", [("output", 4, 1, 0, 0, 1.0, 1.0)])
    out = listing(ImageTarget(b.image()))
    assert f"                  {shown} Cls\\x07\n" in out
    assert "\x1b" not in out and "\x07" not in out


def test_wrapped_ring_shows_only_whole_frames_and_says_so():
    b = RingBuilder(capacity=64)
    for _ in range(30):
        b.frame(
            "fc", "Linear", [("input[0]", 3, 4, 0, 0, 1.0, 3.0), ("output", 4, 4, 0, 0, 0.5, 6.0)]
        )
    out = listing(ImageTarget(b.image()), ["1000"])
    assert out.startswith(
        "ovf: the ring keeps the last 64 records; older frames were overwritten\n"
        "Last 21 forward frames:\n"
    )  # 64 records = 21 whole frames + 1 line
    assert out.count("fc Linear") == 21


def test_torn_record_ends_the_walk_and_is_reported():
    b = two_batches()
    image = b.image()
    records = bytearray(image[RECORDS])
    torn_seq = 10  # a line of batch 1's fc frame, being rewritten: seq is OVF_NO_SEQ
    records[torn_seq * b.size : torn_seq * b.size + 8] = struct.pack("<Q", layout.NO_SEQ)
    image[RECORDS] = bytes(records)
    out = listing(ImageTarget(image))
    assert out.startswith(
        "ovf: record 10 is torn; older frames are not shown\nLast 1 forward frames:\n"
    )
    assert "fc Linear" not in out  # the frame holding the torn line is not printed


def test_overwritten_record_is_reported_not_printed():
    b = two_batches()
    image = b.image()
    records = bytearray(image[RECORDS])
    records[5 * b.size : 5 * b.size + 8] = struct.pack("<Q", 5 + 64)  # the writer lapped this slot
    image[RECORDS] = bytes(records)
    out = listing(ImageTarget(image))
    assert out.splitlines()[0] == "ovf: record 5 is overwritten; older frames are not shown"


def test_filters_keep_batch_markers():
    out = listing(ImageTarget(two_batches().image()), ["--module", "fc"])
    assert (
        out == "Last 2 forward frames:\nabs min  abs max  metadata\n"
        "\n\n                  *** Starting batch number=0 ***\nabs min  abs max  metadata\n"
        "                  fc Linear\n5.00e-01 2.00e+00 weight\n1.00e+00 3.00e+00 input[0]\n"
        "2.50e-01 6.00e+00 output\n"
        "\n\n                  *** Starting batch number=1 ***\nabs min  abs max  metadata\n"
        "                  fc Linear\n5.00e-01 2.00e+00 weight\n1.00e+00 3.00e+00 input[0]\n"
        "2.50e-01 6.00e+00 output\n"
    )
    assert "Last 1 forward frames:" in listing(
        ImageTarget(two_batches().image()), ["--batch", "1", "1"]
    )


def test_nonfinite_filter_and_json():
    b = two_batches()
    b.frame("fc", "Linear", [("output", 4, 4, 0, 4, math.inf, 0.0)])
    target = ImageTarget(b.image())
    out = listing(target, ["--nonfinite"])
    assert out.count("fc Linear") == 1 and "     inf      inf output" in out
    import json

    data = json.loads(listing(target, ["--nonfinite", "--json"]))
    assert data["frames"][0]["lines"][0]["abs_min"] == "inf"
    assert data["frames"][0]["module"] == "fc" and data["frames"][0]["nonfinite"] is True


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(magic=0), "the ovf runtime is loaded but its ring is not initialised yet"),
        (dict(magic=0x1234), "holds no ovf ring (magic 0x0000000000001234)"),
        (
            dict(layout_version=7),
            "the ring has layout version 7, newer than this ovf debugger extension reads (3)",
        ),
        (dict(record_size=96), "is corrupt (header 1024 bytes, record 96 bytes"),
        (dict(record_capacity=100), "is corrupt (record capacity 100 is not a power of two"),
    ],
)
def test_bad_headers_are_one_line_errors(overrides, message):
    target = ImageTarget(two_batches().image(**overrides), kind="live")
    with pytest.raises(OvfError) as e:
        listing(target)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_future_version_in_a_core_is_not_rescued_by_the_scan():
    with pytest.raises(OvfError, match="newer than this ovf debugger extension"):
        listing(ImageTarget(two_batches().image(layout_version=layout.LAYOUT_VERSION + 1)))


def test_garbage_and_truncated_images():
    with pytest.raises(OvfError, match="no ovf ring in this core file"):
        listing(ImageTarget({STATE: os.urandom(4096)}, symbols={}))
    truncated = two_batches().image()
    truncated[STATE] = truncated[STATE][:512]  # a core cut short
    with pytest.raises(OvfError, match="cannot read ovf_state at 0x10000"):
        listing(ImageTarget(truncated, kind="live"))
    no_records = two_batches().image()
    del no_records[RECORDS]
    assert listing(ImageTarget(no_records)).startswith("ovf: record 16 is unreadable;")


def test_scan_finds_the_ring_when_the_symbol_is_missing():
    image = two_batches().image()
    image[STATE] = bytes(4096 - 8 * 3) + image[STATE]  # not at the start of its region
    target = ImageTarget({STATE - 4096 + 24: image.pop(STATE), **image}, symbols={})
    out = listing(target, ["1"])
    assert out.startswith(
        "ovf: found the ring by scanning memory at 0x10000 (no symbol ovf_state)\n"
    )


def test_no_runtime_in_a_live_process():
    with pytest.raises(
        OvfError, match=r"^ovf: no ovf runtime in this process \(no symbol ovf_state\)"
    ):
        listing(ImageTarget({}, symbols={}, kind="live"))
    with pytest.raises(OvfError, match="^ovf: no process"):
        listing(ImageTarget({}, symbols={}, kind="none"))


def test_bad_arguments_are_usage_errors():
    target = ImageTarget(two_batches().image())
    for argv, message in (
        (["zero"], "'zero' is not a count"),
        (["--batch", "-1"], "is not a batch number"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ):
        with pytest.raises(OvfError, match=message) as e:
            listing(target, argv)
        assert "usage: ovf frames" in str(e.value)
    assert listing(target, ["--help"]).startswith("usage: ovf frames")


def test_break_on_nan_writes_the_control_block_of_a_live_process():
    target = ImageTarget(two_batches().image(), kind="live")
    session = Session(
        target, NoDebuggerControl(), package_dirs=[os.path.join(TOP, "build", "python", "ovf")]
    )
    reply = commands.execute(
        session, "break-on-nan", ["--inf", "--module", "enc*", "--after-batch", "3"]
    )
    assert reply.startswith("ovf: armed: stop on inf in modules 'enc*' from batch 3\n")
    control = locate(target).control
    assert (
        control.on_event,
        control.stop_mask,
        control.glob_text,
        control.after_batch,
        control.generation,
    ) == (layout.ON_EVENT_CONTINUE, layout.STOP_INF, "enc*", 3, 1)
    with pytest.raises(OvfError, match="--if 'absmax >' is not a Python expression"):
        commands.execute(session, "break-on-nan", ["--if", "absmax >"])
    with pytest.raises(OvfError, match="uses bogus; it may use absmax"):
        commands.execute(session, "break-on-nan", ["--if", "bogus > 1"])
