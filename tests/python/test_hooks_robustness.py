"""What the hooks record for every kind of module input and output, and that
ovf never changes, crashes or slows down (in memory) the training run."""

import collections
import dataclasses
import gc
import os

import ovf
import pytest
import torch
from models import batch_inputs, make_net
from ovf import _ovf
from torch import nn


@dataclasses.dataclass
class Result:
    logits: torch.Tensor
    aux: object = None


class Odd(nn.Module):
    """Returns whatever it is told to, to exercise output walking."""

    def __init__(self, make):
        super().__init__()
        self.make = make

    def forward(self, x, mask=None, scale=1.0):
        return self.make(x)


class Wrapper(nn.Module):
    def __init__(self, make):
        super().__init__()
        self.inner = Odd(make)

    def forward(self, x):
        return self.inner(x, mask=x > 0, scale=2.0)


def frame_lines(make, x=None):
    """The report lines of Odd's frame for one forward of Wrapper(make), every tensor of
    it seen (keyword_inputs=True; the reference's view is test_transformers_reference's)."""
    x = torch.tensor([[1.0, -2.0], [0.5, 4.0]]) if x is None else x
    model = Wrapper(make)
    debug = ovf.DebugUnderflowOverflow(model, on_nan="continue", keyword_inputs=True)
    model(x)
    text = _ovf.report(2)
    debug.remove()
    lines = text.splitlines()
    start = lines.index(" " * 18 + "inner Odd")
    end = lines.index(" " * 19 + "Wrapper")
    return lines[start + 1 : end]


INPUTS = [
    "5.00e-01 4.00e+00 input[0]",
    "0.00e+00 1.00e+00 input[\"mask\"]",
    "     not a tensor input[\"scale\"]",
]


@pytest.mark.parametrize(
    "make,expected_outputs",
    [
        (lambda x: x, ["5.00e-01 4.00e+00 output"]),
        (lambda x: None, ["             None output"]),
        (lambda x: 7, ["     not a tensor output"]),
        (
            lambda x: {"logits": x, "loss": None, 3: "s"},
            [
                "5.00e-01 4.00e+00 output[\"logits\"]",
                "             None output[\"loss\"]",
                "     not a tensor output[3]",
            ],
        ),
        (lambda x: collections.OrderedDict(a=x * 2), ["1.00e+00 8.00e+00 output[\"a\"]"]),
        (
            lambda x: Result(x, aux=[x[0], (None,)]),
            [
                "5.00e-01 4.00e+00 output.logits",
                "1.00e+00 2.00e+00 output.aux[0]",
                "             None output.aux[1][0]",
            ],
        ),
        (
            lambda x: [x.t(), x[:, ::2]],
            ["5.00e-01 4.00e+00 output[0]", "5.00e-01 1.00e+00 output[1]"],
        ),
        (lambda x: x[:0], ["            empty output"]),
        (lambda x: x.to(torch.complex64) * 1j, ["5.00e-01 4.00e+00 output"]),
        (lambda x: x > 0, ["0.00e+00 1.00e+00 output"]),
        (lambda x: torch.empty(2, device="meta"), ["          no data output"]),
    ],
)
def test_output_structures(make, expected_outputs):
    assert frame_lines(make) == INPUTS + expected_outputs


def test_deep_nesting_is_capped_not_recursed_forever():
    def deep(x):
        v = x
        for _ in range(50):
            v = (v,)
        return v

    lines = frame_lines(deep)
    assert lines[-1] == "     not a tensor output" + "[0]" * 8


def test_huge_output_lists_are_truncated():
    lines = frame_lines(lambda x: [x] * 5000)
    assert 500 < len(lines) < 520


def test_hostile_names_are_escaped_in_the_report(capsys):
    name = "evil\x1b[2J\nname\u0085caf\u00e9"  # C0 controls, a C1 control (NEL), a plain accent
    model = nn.ModuleDict({name: nn.Linear(2, 2)})
    debug = ovf.DebugUnderflowOverflow(model, on_nan="continue")
    model[name](torch.ones(1, 2))
    text = _ovf.report(1)
    debug.remove()
    assert " " * 18 + "evil\\x1b[2J\\x0aname\\xc2\\x85caf\u00e9 Linear" in text.splitlines()
    assert "\x1b" not in text and "\u0085" not in text


def train(model, steps, debug_cls=None):
    """Deterministic SGD steps; returns every output and gradient."""
    torch.manual_seed(123)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    debug = debug_cls(model) if debug_cls else None
    seen = []
    for step in range(steps):
        out = model(batch_inputs(step))
        loss = out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        seen.append(out.detach().clone())
        seen += [p.grad.clone() for p in model.parameters()]
        opt.step()
    if debug:
        debug.remove()
    return seen


def test_outputs_and_gradients_are_bit_identical_with_and_without_ovf():
    plain = train(make_net(), 5)
    watched = train(make_net(), 5, ovf.DebugUnderflowOverflow)
    assert len(plain) == len(watched)
    for a, b in zip(plain, watched, strict=False):
        assert torch.equal(a, b)


def rss_bytes():
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _ring_header(offset, fmt):
    """A field of this process's own ring header (ring.h), read in place."""
    import ctypes
    import struct

    size = struct.calcsize(fmt)
    raw = ctypes.string_at(_ovf.state_address() + offset, size)
    return struct.unpack(fmt, raw)[0]


def test_memory_does_not_grow_over_1000_batches():
    model = make_net()
    debug = ovf.DebugUnderflowOverflow(model)
    x = batch_inputs(0)
    capacity = _ring_header(20, "<I")
    with torch.no_grad():
        # Warm up: caches, interned names, and every page of the ring, which the
        # kernel maps only when a record is first written there (the ring wraps).
        warm = 0
        while warm < 200 or _ring_header(32, "<Q") < capacity:
            model(x)
            warm += 1
        gc.collect()
        before = rss_bytes()
        for _ in range(1000):
            model(x)
        gc.collect()
        after = rss_bytes()
    debug.remove()
    assert debug.batch_number == warm + 1000
    assert after - before < 256 * 1024, f"grew {after - before} bytes over 1000 batches"


def test_weight_stats_are_reused_until_the_parameter_changes():
    model = nn.Linear(2, 2)
    debug = ovf.DebugUnderflowOverflow(model, on_nan="continue")
    x = torch.ones(1, 2)
    model(x)
    model(x)
    with torch.no_grad():
        model.weight.fill_(3.0)  # bumps the version counter
    model(x)
    text = _ovf.report(3)
    debug.remove()
    weights = [line for line in text.splitlines() if line.endswith(" weight")]
    assert weights[0] == weights[1] != weights[2] == "3.00e+00 3.00e+00 weight"


def test_bad_arguments_are_one_line_errors():
    with pytest.raises(
        TypeError, match=r"^ovf.DebugUnderflowOverflow: model must be a torch.nn.Module; got str$"
    ):
        ovf.DebugUnderflowOverflow("model")
    with pytest.raises(
        ovf.OptionError,
        match=r"^ovf: max_frames_to_save must be an integer from 1 to 4294967295; got 0$",
    ):
        ovf.DebugUnderflowOverflow(nn.Linear(1, 1), max_frames_to_save=0)
    with pytest.raises(ovf.OptionError, match=r"trace_batch_nums must be a list"):
        ovf.DebugUnderflowOverflow(nn.Linear(1, 1), trace_batch_nums="1,3")
    with pytest.raises(
        ovf.OptionError,
        match=r"must hold batch numbers \(ints from 0 to 9223372036854775807\); got -1",
    ):
        ovf.DebugUnderflowOverflow(nn.Linear(1, 1), trace_batch_nums=[-1])
    with pytest.raises(
        ovf.OptionError,
        match=r"abort_after_batch_num must be None or an integer from 0 to 9223372036854775807",
    ):
        ovf.DebugUnderflowOverflow(nn.Linear(1, 1), abort_after_batch_num="3")
    with pytest.raises(
        ovf.OptionError, match=r"on_nan must be one of raise, warn, abort, wait, continue"
    ):
        ovf.DebugUnderflowOverflow(nn.Linear(1, 1), on_nan="explode")
    with pytest.raises(
        TypeError, match=r"^ovf.detect_overflow: var must be a torch.Tensor; got int$"
    ):
        ovf.detect_overflow(5, "x")


def test_a_failing_user_forward_is_untouched():
    class Broken(nn.Module):
        def forward(self, x):
            raise RuntimeError("user bug")

    model = Broken()
    debug = ovf.DebugUnderflowOverflow(model)
    with pytest.raises(RuntimeError, match="^user bug$"):
        model(torch.ones(1))
    debug.remove()


def test_new_instance_replaces_the_previous_one():
    a, b = make_net(), make_net()
    first = ovf.DebugUnderflowOverflow(a)
    second = ovf.DebugUnderflowOverflow(b)
    a(batch_inputs(0))  # no longer watched: no batch counted
    b(batch_inputs(0))
    assert second.batch_number == 1
    assert first._handles == []
    second.remove()


def test_an_internal_error_disables_ovf_with_one_line_and_training_goes_on(capfd):
    # A class that claims to be a dataclass but is not: dataclasses.fields() raises
    # inside ovf's output walk.
    fake = type("Fake", (), {"__dataclass_fields__": 5})()
    model = Wrapper(lambda x: fake)
    debug = ovf.DebugUnderflowOverflow(model, keyword_inputs=True)
    try:
        assert model(torch.ones(2)) is fake
        assert model(torch.ones(2)) is fake
        err = capfd.readouterr().err.splitlines()
        assert len(err) == 1
        assert err[0].startswith("ovf: internal error in a hook (AttributeError: ")
        assert err[0].endswith("); ovf is now disabled for this run")
    finally:
        debug.remove()
        _ovf.set_control(enabled=True)


def test_remove_restores_module_call():
    call = nn.Module.__call__
    debug = ovf.DebugUnderflowOverflow(make_net())
    debug.remove()
    assert nn.Module.__call__ is call
