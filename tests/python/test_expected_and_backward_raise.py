"""Where a run expects non-finite values it says so (ovf.expected_nonfinite(),
python3 -m ovf --stop nan), and a backward NaN raises out of the backward()
that made it, before any optimizer writes it into the weights."""

import os
import subprocess
import sys

import ovf
import pytest
import torch
from build_paths import PACKAGE_PARENT
from ovf_ring import layout  # on sys.path through test_masks -> test_op_observer
from test_masks import nonfinite_ops
from torch import nn


class Probe(nn.Module):
    """A loss scaler's overflow probe inside a forward, then a real -inf after it."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        with ovf.expected_nonfinite():
            probe = (self.lin(x) * 1e6).half()  # overflows float16 on purpose
        overflow = bool(torch.isinf(probe).any())
        return torch.log(self.lin(x) * 0) if overflow else x


def test_values_inside_the_region_are_deliberate_and_after_it_they_count():
    torch.manual_seed(0)
    lines, ring, _ = nonfinite_ops(Probe(), torch.ones(1, 2))
    # the probe, then isinf() reading it after the region (abs, to): deliberate all
    assert [(op, role) for op, role, _ in lines] == [
        ("aten::to", layout.FLAG_CONSTANT),
        ("aten::abs", layout.FLAG_CONSTANT),
        ("aten::to", layout.FLAG_CONSTANT),
        ("aten::log", layout.FLAG_PRODUCER),
    ]
    first = ring.record(ring.header.first_nonfinite_seq)
    assert ring.text(first.name_id) == "aten::log"


def test_the_region_is_honoured_at_module_level_and_nests():
    class Overflowing(nn.Module):
        def forward(self, x):
            return x * 1e39

    model = nn.Sequential(Overflowing())
    debug = ovf.DebugUnderflowOverflow(model, on_nan="raise", keyword_inputs=True)
    try:
        with ovf.expected_nonfinite():
            with ovf.expected_nonfinite():
                model(torch.ones(2))
            model(torch.ones(2))  # still inside the outer region
        with pytest.raises(ovf.NonFiniteError):
            model(torch.ones(2))
    finally:
        debug.remove()


def test_a_backward_nan_raises_out_of_backward_before_the_optimizer_writes():
    encoder = nn.Linear(4, 4)
    opt = torch.optim.SGD(encoder.parameters(), lr=0.1)
    debug = ovf.DebugUnderflowOverflow(encoder, ops=True, backward=True)
    try:
        z = encoder(torch.ones(2, 4))
        distance = (z[0] - z[1]).pow(2).sum().sqrt()  # identical rows: sqrt'(0) = inf
        before = encoder.weight.detach().clone()
        with pytest.raises(ovf.NonFiniteError):
            distance.backward()
        assert torch.equal(encoder.weight.detach(), before)
        encoder(torch.ones(2, 4))  # delivered once: the next forward does not raise it again
    finally:
        debug.remove()
    del opt


# 3e38 * 10 overflows float32 (inf), y - y makes NaN of it.
STOPS = """import torch
x = torch.tensor([3e38])
y = x * 10
print("inf", flush=True)
z = y - y
print("nan", flush=True)
w = z + 1
print("end")
"""


@pytest.mark.parametrize(
    "stop, stops_at_the_inf", [("nan,inf", True), ("nan", False), ("inf", True)]
)
def test_python_mode_stop_names_the_kinds_that_stop(tmp_path, stop, stops_at_the_inf):
    script = tmp_path / "stops.py"
    script.write_text(STOPS)
    out = subprocess.run(
        [sys.executable, "-m", "ovf", "--ops", "--stop", stop, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": PACKAGE_PARENT},
    )
    assert out.returncode == 1, out.stderr
    # the report is printed at the event: before the line after the inf, or only at the NaN
    report_first = out.stdout.index("Detected inf/nan") < out.stdout.index("inf\n")
    assert report_first == stops_at_the_inf, out.stdout
    assert "end" not in out.stdout  # the NaN stops whatever --stop says
    # the NaN's story starts at the inf, stopped there or not
    # the op's line where an event fired at it (its snapshot holds the line)
    where = " at stops.py:3 in <module>" if stops_at_the_inf else ""
    assert (
        f"ovf: the first non-finite value was produced by aten::mul in no module{where} (batch 0)"
        in out.stdout.splitlines()
    ), out.stdout


def test_python_mode_refuses_an_unknown_stop_kind(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    out = subprocess.run(
        [sys.executable, "-m", "ovf", "--stop", "nan,above", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": PACKAGE_PARENT},
    )
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == "ovf: --stop 'nan,above': give nan, inf or nan,inf (what stops the run)\n"
