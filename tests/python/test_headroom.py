"""Headroom against a narrower dtype: each line's abs max as a share of the
target's largest value, and its values below the target's smallest normal."""

import os
import sys

import ovf
import torch
from ovf import _ovf
from torch import nn

sys.path.insert(
    0,
    os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "plugin"
    ),
)
from ovf_ring import layout, report  # noqa: E402
from ovf_ring.frames import walk_back  # noqa: E402
from ovf_ring.proc_target import ProcTarget  # noqa: E402
from ovf_ring.ring import locate  # noqa: E402


def test_lines_carry_headroom_against_fp16():
    model = nn.Linear(4, 4, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.eye(4) * 2.0)
    x = torch.tensor(
        [[3.0e4, 1e-6, -2e-5, 0.0]]
    )  # output 6e4: 0.92 of fp16's max; 2 values below 2^-14
    debug = ovf.DebugUnderflowOverflow(model, on_nan="continue")
    _ovf.set_control(headroom_dtype=layout.HEADROOM_DTYPES["fp16"][0])
    try:
        model(x)
    finally:
        debug.remove()
    ring = locate(ProcTarget(os.getpid(), {"ovf_state": _ovf.state_address()}))
    frame = walk_back(ring, 1).frames[0]
    lines = {ring.text(r.label_id): layout.headroom(r) for r in frame.lines}
    assert lines["input[0]"] == ("fp16", 3.0e4 / 65504.0, 2)
    assert lines["output"] == ("fp16", 6.0e4 / 65504.0, 2)
    assert lines["weight"] == ("fp16", 2.0 / 65504.0, 0)
    text = report.format_frame(frame, ring.text, with_headroom=True).splitlines()
    assert text[-1] == "0.00e+00 6.00e+04 output  [fp16: 0.92 of max, 2 below normal]"
    # without --headroom the listing is the reference's, unchanged
    assert report.format_frame(frame, ring.text).splitlines()[-1] == "0.00e+00 6.00e+04 output"


def test_headroom_is_off_by_default_and_per_session():
    model = nn.Linear(2, 2)
    debug = ovf.DebugUnderflowOverflow(model, on_nan="continue")
    try:
        model(torch.ones(1, 2))
    finally:
        debug.remove()
    ring = locate(ProcTarget(os.getpid(), {"ovf_state": _ovf.state_address()}))
    assert ring.control.headroom_dtype == 0
    assert all(layout.headroom(r) is None for r in walk_back(ring, 1).frames[0].lines)
