"""The op observer: every ATen op's outputs checked, the producing op named with
its module, producers told from carriers, backward ops named by their forward
op; and the model's numbers untouched."""

import os
import sys

import ovf
import pytest
import torch
from ovf import _options, _ovf
from torch import nn

sys.path.insert(
    0,
    os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "plugin"
    ),
)
from ovf_ring import layout  # noqa: E402
from ovf_ring.proc_target import ProcTarget  # noqa: E402
from ovf_ring.ring import locate  # noqa: E402


class Feat(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        h = self.lin(x)
        shifted = h - 10.0
        logged = torch.log(shifted)  # NaN is born here, in functional code
        return logged * 2


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.feat = Feat()
        self.head = nn.Linear(3, 1)

    def forward(self, x):
        return self.head(self.feat(x))


def ring_now():
    return locate(ProcTarget(os.getpid(), {"ovf_state": _ovf.state_address()}))


def records_since(ring, start):
    return [r for r in (ring.record(s) for s in range(start, ring.end_seq)) if hasattr(r, "kind")]


def run_model(model, x, **options):
    start = ring_now().end_seq
    debug = ovf.DebugUnderflowOverflow(model, on_nan="continue", **options)
    try:
        out = model(x)
    finally:
        debug.remove()
    ring = ring_now()
    return out, ring, records_since(ring, start)


def test_the_producing_op_is_named_with_its_module_and_downstream_ops_are_carriers():
    torch.manual_seed(0)
    _, ring, records = run_model(Model(), torch.ones(2, 3), ops=True)
    ops = [
        (
            ring.text(r.name_id),
            ring.text(r.context_id),
            r.flags & (layout.FLAG_PRODUCER | layout.FLAG_CARRIER),
        )
        for r in records
        if r.kind == layout.KIND_OP_OUTPUT and r.flags & layout.FLAG_NONFINITE
    ]
    assert ops[0] == ("aten::log", "feat", layout.FLAG_PRODUCER)
    assert ("aten::mul", "feat", layout.FLAG_CARRIER) in ops
    # one call, one record: nn.Linear's aten::linear returns what its inner addmm
    # made, so the record is linear's (the op the module called)
    assert ("aten::linear", "head", layout.FLAG_CARRIER) in ops
    assert not any(name == "aten::addmm" for name, _, _ in ops)
    frames = {
        ring.text(r.name_id): r.flags & (layout.FLAG_PRODUCER | layout.FLAG_CARRIER)
        for r in records
        if r.kind == layout.KIND_FRAME
    }
    # feat made the NaN inside its forward, by an op (aten::log): with ops seen, the
    # op is the producer and feat neither; head got it in; the root neither
    assert frames == {"feat.lin": 0, "feat": 0, "head": layout.FLAG_CARRIER, "": 0}
    # the first non-finite record of all is the log's output
    first = ring.record(ring.header.first_nonfinite_seq)
    assert (first.kind, ring.text(first.name_id)) == (layout.KIND_OP_OUTPUT, "aten::log")


def test_producer_only_stops_at_the_log_not_at_its_carriers():
    torch.manual_seed(0)
    model = Model()
    debug = ovf.DebugUnderflowOverflow(model, on_nan="continue", ops=True)
    bits = _options.STOP_BITS
    _ovf.set_control(stop_mask=bits["nan"] | bits["inf"] | bits["producer_only"])
    try:
        model(torch.ones(2, 3))
        ring = ring_now()
        event = ring.record(ring.header.last_event_seq)
        assert (ring.text(event.name_id), ring.text(event.context_id)) == ("aten::log", "feat")
        # non-finite records came after it (carriers), and none of them stopped
        later = [r for r in records_since(ring, event.seq + 1) if r.flags & layout.FLAG_NONFINITE]
        assert later and all(not r.flags & layout.FLAG_PRODUCER for r in later)
    finally:
        debug.remove()


def test_in_place_ops_are_judged_before_they_overwrite_their_input():
    class InPlace(nn.Module):
        def forward(self, x):
            y = x.clone()
            y.log_()  # produces NaN in place: the input was finite before
            return y.mul_(2)  # carries it, in place

    _, ring, records = run_model(InPlace(), torch.tensor([-1.0, 2.0]), ops=True)
    nonfinite = [
        (ring.text(r.name_id), r.flags & (layout.FLAG_PRODUCER | layout.FLAG_CARRIER))
        for r in records
        if r.kind == layout.KIND_OP_OUTPUT and r.flags & layout.FLAG_NONFINITE
    ]
    assert nonfinite[:2] == [
        ("aten::log_", layout.FLAG_PRODUCER),
        ("aten::mul_", layout.FLAG_CARRIER),
    ]


def nonfinite_roles(ring, records):
    return [
        (ring.text(r.name_id), r.flags & (layout.FLAG_PRODUCER | layout.FLAG_CARRIER))
        for r in records
        if r.kind == layout.KIND_OP_OUTPUT and r.flags & layout.FLAG_NONFINITE
    ]


def test_a_written_input_seen_finite_and_unchanged_is_not_read_again():
    class Steps(nn.Module):
        def forward(self, x):
            y = x.clone()  # an output seen finite
            y.mul_(2)  # its written input: known finite, not read
            y.add_(1)  # the same again (mul_'s output, seen finite)
            return y.sqrt_()  # y holds a negative: read, and sqrt_ makes the NaN

    before = _ovf._known_finite_hits()
    _, ring, records = run_model(Steps(), torch.tensor([-3.0, 2.0]), ops=True)
    assert _ovf._known_finite_hits() - before == 3
    assert nonfinite_roles(ring, records)[0] == ("aten::sqrt_", layout.FLAG_PRODUCER)


def test_a_write_through_another_tensor_on_the_storage_is_seen():
    class ThroughData(nn.Module):
        def forward(self, x):
            y = x.clone()  # seen finite
            z = x.log()  # the NaN, produced here
            y.data.copy_(z)  # into y's storage, through a tensor with a version of its own
            return y.mul_(2)  # carries it: y is read at its start, not taken as seen

    _, ring, records = run_model(ThroughData(), torch.tensor([-1.0, 2.0]), ops=True)
    roles = dict(nonfinite_roles(ring, records))
    assert roles["aten::log"] == layout.FLAG_PRODUCER
    assert roles["aten::mul_"] == layout.FLAG_CARRIER


def test_batch_norms_unmarked_write_of_its_running_stats_is_seen():
    class Norm(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(1)

        def forward(self, x):
            self.bn.running_mean.mul_(1)  # seen finite, written in place
            y = self.bn(x)  # its kernel writes inf there: no version moves, no schema says so
            self.bn.running_mean.add_(0)  # carries it: read at its start, not taken as seen
            return y

    _, ring, records = run_model(Norm(), torch.tensor([[float("inf")], [1.0]]), ops=True)
    roles = dict(nonfinite_roles(ring, records))
    assert roles["aten::add_"] == layout.FLAG_CARRIER


def test_what_ran_while_no_op_was_observed_is_read_again():
    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("state", torch.ones(3))

        def forward(self, factor):
            return self.state.mul_(factor)  # seen finite, written in place

    model = Scale()
    run_model(model, torch.tensor(1.0), ops=True)
    model.state.data.fill_(float("nan"))  # nothing observes this write, nor moves a version
    _, ring, records = run_model(model, torch.tensor(2.0), ops=True)
    assert dict(nonfinite_roles(ring, records))["aten::mul_"] == layout.FLAG_CARRIER


def watching_ops(body):
    """Runs body() with every op observed; the records it left."""
    start = ring_now().end_seq
    debug = ovf.DebugUnderflowOverflow(nn.Identity(), on_nan="continue", ops=True)
    try:
        body()
    finally:
        debug.remove()
    ring = ring_now()
    return ring, records_since(ring, start)


def test_a_write_in_the_unobserved_backward_pass_is_seen():
    state = torch.randn(3)

    class Poison(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, grad):
            state.data.fill_(float("nan"))  # a backward op (not observed): no version moves
            return grad

    def body():
        state.mul_(1)  # seen finite
        Poison.apply(torch.ones(2, requires_grad=True)).sum().backward()
        state.add_(0)  # carries the NaN: read at its start

    ring, records = watching_ops(body)
    assert dict(nonfinite_roles(ring, records))["aten::add_"] == layout.FLAG_CARRIER


def test_a_write_through_a_numpy_view_is_seen():
    def body():
        t = torch.randn(3)  # data, not a constant
        t.mul_(2)  # seen finite
        torch.from_numpy(t.numpy()).fill_(float("nan"))  # the same memory, another storage
        t.add_(1)  # carries the NaN: read at its start

    ring, records = watching_ops(body)
    assert dict(nonfinite_roles(ring, records))["aten::add_"] == layout.FLAG_CARRIER


def test_a_compiled_region_forgets_what_was_seen():
    compiled = torch.compile(lambda x: x * 2, backend="aot_eager")
    state = torch.ones(3)
    compiled(torch.ones(3))  # compiled before: the region below only runs

    def body():
        state.mul_(1)  # seen finite
        state.mul_(1)  # known: not read
        compiled(torch.ones(3))  # Inductor's kernels could have written anything
        state.mul_(1)  # read again

    before = _ovf._known_finite_hits()
    watching_ops(body)
    assert _ovf._known_finite_hits() - before == 1


def test_uninitialised_memory_and_views_are_not_reported():
    class Fresh(nn.Module):
        def forward(self, x):
            e = torch.empty(4)  # whatever bytes were there: no values yet
            v = x.view(-1)  # a view produces nothing new
            return v + e.zero_()

    _, ring, records = run_model(Fresh(), torch.ones(2, 2), ops=True)
    names = [ring.text(r.name_id) for r in records if r.kind == layout.KIND_OP_OUTPUT]
    assert "aten::empty" not in names and "aten::view" not in names
    assert "aten::zero_" in names and "aten::add" in names


def test_backward_ops_are_named_by_their_forward_op_and_module():
    class SqrtLoss(nn.Module):
        def forward(self, x):
            return torch.sqrt(x).sum()  # finite forward at 0, d/dx sqrt(0) = inf in backward

    model = SqrtLoss()
    x = torch.tensor([0.0, 4.0], requires_grad=True)
    debug = ovf.DebugUnderflowOverflow(model, on_nan="continue", backward=True)
    start = ring_now().end_seq
    try:
        model(x).backward()
    finally:
        debug.remove()
    ring = ring_now()
    grads = [
        r
        for r in records_since(ring, start)
        if r.kind == layout.KIND_OP_OUTPUT
        and r.flags & layout.FLAG_BACKWARD
        and r.flags & layout.FLAG_NONFINITE
    ]
    assert grads, "no non-finite backward op recorded"
    first = grads[0]
    assert (ring.text(first.aux_id), ring.text(first.context_id)) == ("aten::sqrt", "")
    assert first.flags & layout.FLAG_PRODUCER
    assert torch.isinf(x.grad[0])


@pytest.mark.parametrize("backward", [False, True])
def test_outputs_and_gradients_are_bit_identical_with_ops_observed(backward):
    from models import batch_inputs, make_net

    def train(observe):
        model = make_net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        debug = ovf.DebugUnderflowOverflow(model, ops=True, backward=backward) if observe else None
        seen = []
        for step in range(3):
            out = model(batch_inputs(step))
            out.pow(2).mean().backward()
            seen += [out.detach().clone()] + [p.grad.clone() for p in model.parameters()]
            opt.step()
            opt.zero_grad()
        if debug:
            debug.remove()
        return seen

    for a, b in zip(train(False), train(True), strict=False):
        assert torch.equal(a, b)


def test_removing_the_watcher_disarms_the_observer():
    model = Model()
    run_model(model, torch.ones(2, 3), ops=True)
    assert _ovf.control()["observe"] == 0
    before = ring_now().end_seq
    torch.log(torch.tensor([-1.0]))  # no observer: nothing written
    assert ring_now().end_seq == before


def test_optimizer_state_names_adams_moments():
    model = nn.Linear(2, 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    debug = ovf.DebugUnderflowOverflow(model, on_nan="continue", optimizers="state")
    start = ring_now().end_seq
    try:
        model(torch.tensor([[float("inf"), 1.0]])).sum().backward()  # inf gradient for the weight
        opt.step()
    finally:
        debug.remove()
    ring = ring_now()
    records = records_since(ring, start)
    steps = [r for r in records if r.kind == layout.KIND_STEP]
    assert [ring.text(r.label_id) for r in steps] == ["Adam"]
    assert steps[0].flags & layout.FLAG_CARRIER  # the gradient brought the inf in
    names = sorted(ring.text(r.label_id) for r in records if r.kind == layout.KIND_STEP_PARAM)
    # the gradient that brought the inf is listed beside the parameter it wrote
    assert names == ["weight", "weight exp_avg", "weight exp_avg_sq", "weight.grad"]
    assert _ovf.control()["observe"] == 0  # removed: nothing observed any more


def test_module_output_gradients_are_recorded_by_module():
    class SqrtOfZero(nn.Module):
        def forward(self, x):
            return torch.sqrt(x * 0.0).sum()  # finite forward; d/dx sqrt at 0 is inf, times 0: nan

    model = nn.Sequential(nn.Linear(2, 2), SqrtOfZero())
    debug = ovf.DebugUnderflowOverflow(model, on_nan="continue", backward=True)
    start = ring_now().end_seq
    try:
        model(torch.ones(1, 2)).backward()
    finally:
        debug.remove()
    ring = ring_now()
    grads = [
        (ring.text(r.name_id), ring.text(r.label_id), bool(r.flags & layout.FLAG_NONFINITE))
        for r in records_since(ring, start)
        if r.kind == layout.KIND_GRAD
    ]
    # SqrtOfZero's output is the root's too (one tensor, recorded under one of
    # them, finite); then the Linear's output gradient, the first non-finite one
    assert grads[-1] == ("0", "grad output", True)
    assert {name for name, _, _ in grads[:-1]} <= {"", "1"} and not any(
        bad for _, _, bad in grads[:-1]
    )
    assert all(
        r.flags & layout.FLAG_BACKWARD
        for r in records_since(ring, start)
        if r.kind == layout.KIND_GRAD
    )
