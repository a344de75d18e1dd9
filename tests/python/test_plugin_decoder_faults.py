"""The ring decoder on damaged rings and bad input, on hand-built ring images: a wrapped
ring, torn and overwritten records, bad headers, garbage and truncated images, a ring
found by scanning, no runtime, bad arguments: each told by a note or an OvfError."""

import os
import struct
import sys

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "plugin"))

from ovf_ring import layout  # noqa: E402
from ovf_ring.errors import OvfError  # noqa: E402
from ring_images import RECORDS, STATE, ImageTarget, RingBuilder, listing, two_batches  # noqa: E402


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


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(magic=0), "the ovf runtime is loaded but its ring is not initialised yet"),
        (dict(magic=0x1234), "holds no ovf ring (magic 0x0000000000001234)"),
        (
            dict(layout_version=layout.LAYOUT_VERSION + 1),
            f"the ring has layout version {layout.LAYOUT_VERSION + 1}, newer than this ovf"
            f" debugger extension reads ({layout.LAYOUT_VERSION})",
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
