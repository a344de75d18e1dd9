"""What a cast would lose (layout 6's cast counts) against a direct computation: cast
with torch, then count. Every real floating dtype the engines read, at the edges of
every target's range and over twenty decades of magnitudes, contiguous and strided,
in the CPU engine (every copy of its scan loops), the portable device backend (whole
and in pieces); then the records a module run and an op run leave in the ring."""

import os

import ovf
import pytest
import torch
from build_paths import PACKAGE_PARENT, run_ovf_child
from ovf_ring import cast, layout
from test_op_observer import records_since, ring_now
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))

DIRECT = """
import torch

TARGETS = {"float16": torch.float16, "bfloat16": torch.bfloat16,
           "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}


def direct(t):
    # {target: {loss: count}}: cast with torch, then count what changed
    x = t.to(torch.float64)
    finite = torch.isfinite(x)
    out = {}
    for name, dtype in TARGETS.items():
        c = t.to(dtype).to(torch.float64)
        lost = ~torch.isfinite(c)
        if dtype == torch.float8_e4m3fn:  # no inf: torch saturates to 448 (or makes NaN)
            lost |= x.abs() - c.abs() > 16  # more than half its spacing (32) near 448
        tiny = torch.finfo(dtype).tiny
        out[name] = {
            "overflow": int((finite & lost).sum()),
            "flush": int((finite & (x != 0) & (c == 0)).sum()),
            "subnormal": int((finite & (c != 0) & (c.abs() < tiny)).sum()),
        }
    return out
"""

CHECK = (
    DIRECT
    + """
import os
from ovf import _ovf

DEVICE = os.environ.get("OVF_TEST_CAST_DEVICE", "cpu")  # where device_stats reads its copy

EDGES = [65504, 65520, 65519.99, 65536, 464, 463.9, 464.1, 448, 480, 61440, 61439, 57344,
         2**-24, 2**-25, 2**-25 * 1.0001, 2**-14, 2**-14 - 2**-25, 2**-14 - 2**-26,
         2**-9, 2**-10, 2**-10 * 1.001, 2**-6, 2**-6 - 2**-10, 2**-6 - 2**-11,
         2**-16, 2**-17, 2**-17 * 1.001, 2**-14 - 2**-17, 2**-14 - 2**-18,
         2**-133, 2**-134, 2**-126, 2**-126 - 2**-134, 3.3961e38, 3.39e38, 3.4e38,
         0.0, 1.0, 1e-30, 1e-39, 1e-44, float("inf"), float("nan")]
torch.manual_seed(0)
wide = torch.randn(20011, dtype=torch.float64) * torch.exp(torch.randn(20011) * 20).double()
wrong = []
for dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16,
              torch.float8_e4m3fn, torch.float8_e5m2):
    edges = torch.tensor(EDGES + [-e for e in EDGES], dtype=torch.float64).to(dtype)
    for data_name, data in (("edges", edges), ("wide", wide.to(dtype))):
        there = data.to(DEVICE)
        for layout_name, t, u in (("contiguous", data, there), ("strided", data[::3], there[::3])):
            want = direct(t)
            for engine, stats, x in (("cpu", _ovf.stats, t), ("device", _ovf.device_stats, u)):
                got = stats(x, casts=True).get("cast")
                if got != want:
                    wrong.append(f"{engine} {dtype} {data_name} {layout_name}: {got} != {want}")
            if _ovf.stats(t).get("cast") is not None:
                wrong.append(f"counted unasked: {dtype}")
for t in (torch.arange(5), torch.ones(3, dtype=torch.bool), torch.ones(2, dtype=torch.complex64)):
    if "cast" in _ovf.stats(t, casts=True):
        wrong.append(f"cast counts for {t.dtype}")
print(wrong)
"""
)


def check(**env):
    p = run_ovf_child(["-c", CHECK], timeout=300, PYTHONPATH=PACKAGE_PARENT, **env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout == "[]\n", p.stdout[-3000:]
    return p


def test_the_cpu_engine_and_the_portable_backend_count_what_torch_casts_lose():
    check()


def test_the_baseline_scan_loops_count_the_same():
    check(OVF_SCAN_ISA="base")


def _expected_default_loops():
    """What stats_cpu.cpp picks on this CPU, from /proc/cpuinfo."""
    with open("/proc/cpuinfo") as f:
        info = f.read().split("\n\n")[0]
    fields = dict(
        (k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in info.splitlines())
    )
    flags = set(fields.get("flags", "").split())
    zen4 = fields.get("vendor_id") == "AuthenticAMD" and fields.get("cpu family") == "25"
    if {"avx512f", "avx512bw"} <= flags and not zen4:
        return "avx2+avx512-counts"
    return "avx2" if "avx2" in flags else "base"


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"), reason="reads the CPU's flags there")
def test_each_copy_of_the_loops_runs_where_asked():
    """The copy a process runs, per OVF_SCAN_ISA: the tests above count with each."""
    default = _expected_default_loops()
    avx2 = "base" if default == "base" else "avx2"  # the AVX2 copy where the CPU has AVX2
    for isa, want in (("base", "base"), ("avx2", avx2), ("", default)):
        p = run_ovf_child(
            ["-c", "from ovf import _ovf; print(_ovf.scan_loops())"],
            timeout=120,
            PYTHONPATH=PACKAGE_PARENT,
            OVF_SCAN_ISA=isa,
        )
        assert p.returncode == 0, p.stderr[-2000:]
        assert p.stdout == f"{want}\n", (isa, p.stdout)


def test_the_avx2_scan_loops_count_the_same():
    """Where the CPU has AVX-512 the default counts with its own loops; this is the
    AVX2 copy there (elsewhere the default again)."""
    check(OVF_SCAN_ISA="avx2")


def test_the_portable_backend_in_pieces_counts_the_same():
    check(OVF_TEST_PORTABLE_CHUNK="7")


_direct_namespace = {}
exec(DIRECT, _direct_namespace)  # noqa: S102 - the same direct computation in this process
direct = _direct_namespace["direct"]


def counts(r):
    """A record's counts as direct() gives them."""
    return {
        dtype: dict(zip(layout.CAST_LOSSES, r.cast_counts[t * 3 : t * 3 + 3], strict=True))
        for t, dtype in enumerate(layout.CAST_TARGET_DTYPES)
    }


def test_module_lines_hold_the_counts_of_their_tensors():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten())
    outputs = {}
    for name, m in model.named_children():
        m.register_forward_hook(lambda m, i, o, name=name: outputs.__setitem__(name, o.detach()))
    x = torch.randn(4, 3, 12, 12) * 300  # wide enough to overflow e4m3, small enough to flush
    start = ring_now().end_seq
    debug = ovf.DebugUnderflowOverflow(model, on_nan="continue", cast_shares=True)
    try:
        model(x)
    finally:
        debug.remove()
    ring = ring_now()
    seen = {}
    for r in records_since(ring, start):
        if r.kind == layout.KIND_OUTPUT:
            frame = ring.text(ring.record(r.frame_seq).name_id)
            assert r.flags & layout.FLAG_CAST, frame
            seen[frame] = counts(r)
    assert {n: seen[n] for n in outputs} == {n: direct(t) for n, t in outputs.items()}
    assert (
        seen["0"]["float8_e4m3fn"]["overflow"] > 0 and seen["1"]["float8_e4m3fn"]["subnormal"] > 0
    )


def test_lines_without_the_option_count_nothing():
    model = nn.Linear(4, 4)
    start = ring_now().end_seq
    debug = ovf.DebugUnderflowOverflow(model, on_nan="continue")
    try:
        model(torch.full((2, 4), 1e6))
    finally:
        debug.remove()
    lines = [r for r in records_since(ring_now(), start) if r.kind == layout.KIND_OUTPUT]
    assert lines and all(not r.flags & layout.FLAG_CAST and not any(r.cast_counts) for r in lines)


def test_op_outputs_hold_their_counts_too():
    class Scale(nn.Module):
        def forward(self, x):
            return torch.exp(x) * 3

    x = torch.linspace(-30, 12, 1000)
    start = ring_now().end_seq
    model = Scale()
    debug = ovf.DebugUnderflowOverflow(model, on_nan="continue", ops=True, cast_shares=True)
    try:
        model(x)
    finally:
        debug.remove()
    ring = ring_now()
    ops = {
        ring.text(r.name_id): r
        for r in records_since(ring, start)
        if r.kind == layout.KIND_OP_OUTPUT
    }
    assert counts(ops["aten::exp"]) == direct(torch.exp(x))
    assert counts(ops["aten::mul"]) == direct(torch.exp(x) * 3)
    assert cast.suffix(ops["aten::mul"]) == (
        "  [cast: fp16 overflow 4.8% flush 27.6% subnormal 18.1%; fp8_e4m3 overflow 16.6%"
        " flush 52.3% subnormal 6.4%; fp8_e5m2 overflow 5% flush 40.8% subnormal 4.6%]"
    )


def test_a_float32_t5_names_the_module_its_float16_run_overflows_in():
    # The reference documentation's T5 (transformers_models.t5) run in float32: nothing
    # overflows there, but its cast counts name the first output that float16 could not
    # hold, where the float16 run makes its first inf (test_transformers_reference.py)
    pytest.importorskip(
        "transformers",
        reason="transformers is not installed here (the trixie leg): the main leg runs it",
    )
    import transformers_models as models
    from test_transformers_reference import FIRST_NONFINITE

    model, step = models.t5("t5", dtype=torch.float32)
    outputs = {}
    names = {m: n for n, m in model.named_modules()}
    for m in names:
        m.register_forward_hook(
            lambda m, i, o: outputs.setdefault(names[m], o) if torch.is_tensor(o) else None
        )
    start = ring_now().end_seq
    debug = ovf.DebugUnderflowOverflow(model, on_nan="continue", cast_shares=True)
    try:
        with torch.no_grad():
            step(model, 0)
    finally:
        debug.remove()
    ring = ring_now()
    over = [
        (ring.text(ring.record(r.frame_seq).name_id), r)
        for r in records_since(ring, start)
        if r.kind == layout.KIND_OUTPUT and counts(r)["float16"]["overflow"]
    ]
    name, first = over[0]
    assert (
        name
        == FIRST_NONFINITE["t5-fp16"].split()[0]
        == "encoder.block.2.layer.1.DenseReluDense.dropout"
    )
    assert counts(first) == direct(outputs[name])
    assert counts(first)["float16"]["overflow"] > 0 and first.nan_count + first.pos_inf_count == 0
