"""The early warning's records in the ring (layout 5's WARNING kind), read back with the
debuggers' reader: a module's growth with the values it was judged on, an optimizer
step's update-to-weight ratio against a direct computation, one warning a session, and
the model's numbers untouched by ovf."""

import math

import ovf
import pytest
import torch
from ovf_ring import early, layout, picture
from test_op_observer import records_since, ring_now
from torch import nn
from torch.nn import functional as F


def fp16_growth(steps, **debug_options):
    """tests/e2e/scripts/early_warning.py's fp16_growth loop; (model, records)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 1, bias=False)).half()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    x = torch.full((4, 8), 0.5, dtype=torch.float16)
    start = ring_now().end_seq
    debug = ovf.DebugUnderflowOverflow(model, on_nan="continue", **debug_options)
    try:
        for _ in range(steps):
            loss = F.mse_loss(model(x).float(), torch.ones(4, 1))
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        debug.remove()
    return model, records_since(ring_now(), start)


def warnings_in(records):
    return [r for r in records if r.kind == layout.KIND_WARNING]


def test_growth_is_recorded_with_the_values_it_was_judged_on():
    _, records = fp16_growth(11, early=True, update_ratio=0)
    ring = ring_now()
    (w,) = warnings_in(records)
    outputs = {
        r.batch: r.abs_max
        for r in records
        if r.kind == layout.KIND_OUTPUT and ring.text(ring.record(r.frame_seq).name_id) == "0"
    }
    assert (w.batch, w.abs_max, w.scale_before) == (7, outputs[7], outputs[6]) == (7, 2334, 776.5)
    assert (ring.text(w.name_id), ring.text(w.label_id), w.dtype) == ("0", "Linear", 3)
    assert (w.scale_after, w.skips_in_row, w.flags) == (65504.0, 4, layout.FLAG_HAS_STATS)
    frame = ring.record(w.cause_seq)
    assert (frame.kind, ring.text(frame.name_id), frame.batch) == (layout.KIND_FRAME, "0", 7)
    assert early.line(ring, w) == (
        "ovf: early warning at batch 7: 0 (Linear)'s output abs max grew from 776 to 2.33e+03 in"
        " one batch (x3.01); at that growth it passes float16's largest value 65504 in 4 batches"
        " (batch 11)"
    )


def test_a_session_warns_once_and_a_disarmed_one_never():
    _, records = fp16_growth(11, early=True)  # the ratio at step 0, then growth: one record
    assert [(r.batch, r.cause_seq) for r in warnings_in(records)] == [(0, layout.NO_SEQ)]
    _, records = fp16_growth(11)
    assert warnings_in(records) == []


@pytest.mark.parametrize("width", [16, 1024])  # 0.weight: 256 elements (whole), 16384 (sampled)
def test_the_update_ratio_is_the_steps_own(width):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, width), nn.Tanh(), nn.Linear(width, 1))
    opt = torch.optim.SGD(model.parameters(), lr=50.0)
    x = torch.randn(32, 16)
    start = ring_now().end_seq
    debug = ovf.DebugUnderflowOverflow(model, on_nan="continue", early=True, update_ratio=0.5)
    try:
        before = [p.detach().clone() for p in model.parameters()]
        model(x).pow(2).mean().backward()
        opt.step()
    finally:
        debug.remove()
    change = [
        (p.detach() - w).norm().item() for p, w in zip(model.parameters(), before, strict=True)
    ]
    size = [w.norm().item() for w in before]
    ratio = math.hypot(*change) / math.hypot(*size)
    (w,) = warnings_in(records_since(ring_now(), start))
    ring = ring_now()
    most = max(range(len(change)), key=change.__getitem__)
    names = ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert (ring.text(w.name_id), ring.text(w.label_id)) == ("SGD", names[most])
    assert w.scale_after == 0.5 and ratio > 0.5
    if width == 16:  # every parameter within the sample: the ratio itself
        assert w.abs_max == pytest.approx(ratio, rel=1e-5)
        assert w.scale_before == pytest.approx(change[most] / size[most], rel=1e-5)
    else:  # 4096 of 0.weight's 16384 elements
        assert w.abs_max == pytest.approx(ratio, rel=0.05)


def test_the_early_warning_leaves_the_models_numbers_alone():
    armed, _ = fp16_growth(6, early=True)
    plain, _ = fp16_growth(6)
    for a, b in zip(armed.parameters(), plain.parameters(), strict=True):
        assert torch.equal(a, b)


def test_the_plot_marks_the_warning_at_the_growing_modules_cell():
    fp16_growth(11, early=True, update_ratio=0)
    drawn = picture.collect(ring_now())
    (mark,) = [m for m in drawn.marks if m["kind"] == "event"]
    assert drawn.rows[mark["row"]] == "0 (Linear)", drawn.rows
    assert drawn.columns[mark["column"]]["batch"] == 7
    assert mark["text"].startswith("event (early): record ")
    assert mark["text"].endswith(
        ", early warning at batch 7: 0 (Linear)'s output abs max grew from 776 to 2.33e+03 in"
        " one batch (x3.01); at that growth it passes float16's largest value 65504 in 4"
        " batches (batch 11)"
    )


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex64, torch.bfloat16])
def test_parameters_of_every_dtype_are_measured(dtype):
    # float64 and complex take their norms in their own precision, bfloat16 in float32
    torch.manual_seed(0)
    model = nn.Linear(8, 8, bias=False).to(dtype)
    opt = torch.optim.SGD(model.parameters(), lr=1e3)
    x = torch.randn(4, 8).to(dtype)
    start = ring_now().end_seq
    debug = ovf.DebugUnderflowOverflow(model, on_nan="continue", early=True)
    try:
        w = model.weight.detach().clone()
        model(x).abs().pow(2).mean().backward()
        opt.step()
    finally:
        debug.remove()
    (warning,) = warnings_in(records_since(ring_now(), start))
    ratio = ((model.weight.detach() - w).norm() / w.norm()).item()
    assert warning.abs_max == pytest.approx(ratio, rel=1e-2)
