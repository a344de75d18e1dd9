"""GradScaler's records in the ring (layout 4's SCALER kind), read back with the
debuggers' reader: every skip with its scale, parameter and cause, the stop when
the scaler gives up, the history ovf status / ovf frames / the plot show; and
the scaler's numbers untouched by ovf."""

import ovf
import torch
from ovf_ring import layout, listing, picture, scaler
from test_op_observer import records_since, ring_now
from torch import nn

ORACLE_WHY = "aten::div: the divisor has 2 zeros: x/0 in 2 elements (inf)"


def train(case, steps, watched=True, **debug_options):
    """scripts/amp_scaler.py's loop in this process; returns (model, scaler, records)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    grad_scaler = torch.amp.GradScaler("cpu", init_scale=2.0**26 if case == "recover" else 2.0**16)
    x = torch.randn(8, 8)
    if case == "collapse":
        x[1] = x[0]
    start = ring_now().end_seq
    debug = (
        ovf.DebugUnderflowOverflow(model, on_nan="continue", **debug_options) if watched else None
    )
    try:
        for _ in range(steps):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                out = model(x)
            out = out.float()
            d = out[:, None, :] - out[None, :, :]
            loss = -(d.pow(2).sum(-1) + torch.eye(len(out))).sqrt().mean()
            grad_scaler.scale(loss).backward()
            grad_scaler.step(opt)
            grad_scaler.update()
    finally:
        if debug is not None:
            debug.remove()
    return model, grad_scaler, records_since(ring_now(), start)


def scaler_records(records):
    return [r for r in records if r.kind == layout.KIND_SCALER]


def test_every_skip_is_a_record_with_its_scale_parameter_and_cause():
    _, _, records = train("collapse", 18, ops=True, backward=True)
    ring = ring_now()
    updates = scaler_records(records)
    assert [(r.skips_in_row, r.scale_before, r.scale_after) for r in updates] == [
        (n, 2.0 ** (17 - n), 2.0 ** (16 - n)) for n in range(1, 19)
    ]
    assert {ring.text(r.name_id) for r in updates} == {"GradScaler"}
    assert {ring.text(r.label_id) for r in updates} == {"0.weight"}
    want = layout.FLAG_NONFINITE | layout.FLAG_CONSTANT | layout.FLAG_EXPECTED
    assert all(r.flags == want for r in updates)
    cause = ring.record(updates[0].cause_seq)
    assert ring.text(cause.name_id) == "aten::div" and ring.text(cause.aux_id) == "aten::sqrt"
    assert cause.flags & layout.FLAG_BACKWARD and cause.flags & layout.FLAG_EXPECTED
    assert not cause.flags & layout.FLAG_PRODUCER  # deliberate: no first value, no event
    assert ring.text(cause.diagnosis_id) == ORACLE_WHY
    # The scaled backward and unscale_ made every NaN/Inf: nothing counts as a first value.
    assert ring.header.first_nonfinite_seq == layout.NO_SEQ
    # The 17th skip took the scale below 1: the one event.
    assert ring.header.last_event_kind == layout.STOP_SCALER
    assert ring.header.last_event_seq == updates[16].seq
    assert scaler.stop_lines(ring, updates[16]) == [
        "GradScaler skipped 17 steps in a row (batch 0 to 16): the gradients were non-finite each"
        " time, and its scale went from 65536 to 0.5, below the floor 1 (--scale-floor)",
        "the first skip's first non-finite value (0.weight's gradient held one) was produced in"
        " the backward pass by aten::div, the gradient of aten::sqrt in no module"
        " at test_loss_scaler_ring.py:35 in train (batch 0)",
        f"why: {ORACLE_WHY}",
    ]
    assert scaler.history(ring) == (
        "GradScaler: 18 skipped steps in the ring (last at batch 17); scale now 0.25"
    )
    assert listing.text(ring, listing.Selection(count=1)).splitlines()[:2] == [
        "ovf: batch 13: GradScaler skipped the step (14 in a row): scale 8 -> 4;"
        " 0.weight's gradient non-finite",
        "ovf: batch 14: GradScaler skipped the step (15 in a row): scale 4 -> 2;"
        " 0.weight's gradient non-finite",
    ]


def test_the_plot_draws_the_scale_with_skips_as_non_finite():
    train("collapse", 3)
    drawn = picture.collect(ring_now())  # columns: the newest records, this run's last
    row = drawn.rows.index("GradScaler loss scale")
    cells = sorted((column, value, bad) for r, column, value, bad in drawn.cells if r == row)
    assert [(value, bad) for _, value, bad in cells[-3:]] == [
        (32768.0, True),
        (16384.0, True),
        (8192.0, True),
    ]


def test_a_scaler_that_recovers_records_its_skips_and_never_stops():
    _, grad_scaler, records = train("recover", 14)
    ring = ring_now()
    updates = scaler_records(records)
    assert [r.skips_in_row for r in updates] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 1]
    assert updates[-1].scale_after == grad_scaler.get_scale() == 65536.0
    assert all(r.cause_seq == layout.NO_SEQ for r in updates)  # module mode: backward unseen
    assert not [r for r in records if r.seq == ring.header.last_event_seq]


def test_the_scalers_numbers_are_the_same_with_ovf_on_and_off():
    on_model, on_scaler, _ = train("recover", 14, ops=True, backward=True)
    off_model, off_scaler, _ = train("recover", 14, watched=False)
    assert on_scaler.get_scale() == off_scaler.get_scale()
    for a, b in zip(on_model.parameters(), off_model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_healthy_steps_read_no_scale_and_a_skip_reads_it_twice(monkeypatch):
    # Reading the scale is .item(): a host sync on a GPU. Healthy steps must not pay it.
    from ovf import _scaler

    reads = []
    read = _scaler._read_scale
    monkeypatch.setattr(_scaler, "_read_scale", lambda s: reads.append(s) or read(s))
    _, _, records = train("healthy", 5)
    assert reads == [] and scaler_records(records) == []
    train("collapse", 2)
    assert len(reads) == 4  # before and after each of the two skips' updates
