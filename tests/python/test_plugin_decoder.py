"""The ring decoder and the reference formatter on hand-built ring images: what a listing
shows and how (every layout version, the reference format, compiled frames, number formats,
hostile names, filters, JSON). Damaged rings and bad input: test_plugin_decoder_faults.py."""

import json
import math
import os
import sys

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "plugin"))

from ovf_plugin import commands, summary  # noqa: E402
from ovf_plugin.session import Session  # noqa: E402
from ovf_ring import layout, postmortem, report  # noqa: E402
from ovf_ring.event import last_event  # noqa: E402
from ovf_ring.frames import walk_back  # noqa: E402
from ovf_ring.ring import locate  # noqa: E402
from ring_images import ImageTarget, RingBuilder, listing, two_batches  # noqa: E402


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
    "seen without --ops (its checks enter the graphs)"
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
