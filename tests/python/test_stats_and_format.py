"""The stats engine through torch tensors, and %8.2e formatting vs Python's."""

import math
import random
import struct

import pytest
import torch
from ovf import _ovf


def torch_reference(t):
    """What the stats mean, computed with torch in float64."""
    x = t.detach().to(torch.complex128 if t.is_complex() else torch.float64)
    a = x.abs()
    finite = a[torch.isfinite(a)] if not t.is_complex() else a[torch.isfinite(a)]
    nonzero = finite[finite != 0]
    pos = (x.real == math.inf) if not t.is_complex() else torch.isinf(a)
    neg = (x.real == -math.inf) if not t.is_complex() else torch.zeros_like(pos)
    return {
        "numel": t.numel(),
        "nan": int(torch.isnan(a).sum()),
        "pos_inf": int(pos.sum()),
        "neg_inf": int(neg.sum()),
        "zero": int((finite == 0).sum()),
        "abs_min": float(finite.min()) if finite.numel() else math.inf,
        "abs_max": float(finite.max()) if finite.numel() else 0.0,
        "abs_min_nonzero": float(nonzero.min()) if nonzero.numel() else math.inf,
    }


def planted(dtype, n=5000, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = (torch.randn(n, generator=g, dtype=torch.float64) * 100).to(dtype)
    idx = torch.randperm(n, generator=g)[:40]
    specials = [math.nan, math.inf, -math.inf, 0.0, -0.0]
    for i, j in enumerate(idx.tolist()):
        t[j] = specials[i % len(specials)]
    tiny = torch.finfo(dtype).tiny if dtype.is_floating_point else 0
    t[idx[-1]] = tiny / 4  # a subnormal
    return t


def check(t):
    got = _ovf.stats(t)
    want = torch_reference(t)
    assert got["has_stats"]
    for key, value in want.items():
        assert got[key] == value, (key, got[key], value)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_float_dtypes_contiguous_and_strided(dtype):
    t = planted(dtype)
    check(t)
    m = t[:4800].reshape(60, 80)
    check(m.t())  # transposed
    check(m[::3, 1::2])  # sliced both ways
    check(m[:, 5])  # one column
    check(m.unsqueeze(0).expand(3, 60, 80))  # stride 0
    check(t[:0])  # empty
    check(t[7])  # zero-dimensional


def test_negative_view_swaps_infinity_signs():
    t = torch.tensor([math.inf, math.inf, -math.inf, 2.0])
    neg = torch._neg_view(t)
    got = _ovf.stats(neg)
    assert (got["pos_inf"], got["neg_inf"]) == (1, 2)


def test_integer_bool_and_complex():
    check(torch.tensor([[-3, 0, 7], [2, -9, 1]], dtype=torch.int64).t())
    check(torch.tensor([0, 200, 17], dtype=torch.uint8))
    b = _ovf.stats(torch.tensor([True, False, True]))
    assert (b["abs_min"], b["abs_max"], b["zero"]) == (0.0, 1.0, 1)
    c = torch.tensor(
        [3 + 4j, 0j, complex(math.inf, 1), complex(math.nan, 0)], dtype=torch.complex64
    )
    got = _ovf.stats(c)
    assert (got["abs_max"], got["abs_min"], got["pos_inf"], got["nan"]) == (5.0, 0.0, 1, 1)


def test_unreadable_tensors_have_no_stats():
    assert _ovf.stats(torch.empty(3, device="meta")) is None
    assert _ovf.stats(torch.ones(2, 2).to_sparse()) is None


def random_doubles(n, seed=7):
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        x = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if math.isfinite(x):
            out.append(x)
        out.append(rng.uniform(-1e5, 1e5))
        out.append(round(rng.uniform(0, 10), 3))  # values near rounding ties
    return out


def test_format_matches_python_on_random_and_edge_values():
    edge = [
        0.0,
        -0.0,
        math.inf,
        -math.inf,
        math.nan,
        -math.nan,
        5e-324,
        1.7976931348623157e308,
        0.125,
        0.375,
        9.995,
        9.9949999,
        65504.0,
        62700.0,
        1e-5,
        123456789.0,
    ]
    for x in edge + random_doubles(20000):
        assert _ovf.format_8_2e(x) == f"{x:8.2e}", x


def test_format_matches_torch_scalar_formatting_of_low_precision_values():
    # The reference formats torch scalars: the value is the dtype's exact value.
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        t = planted(dtype)
        finite = t[torch.isfinite(t)]
        got = _ovf.stats(finite)
        assert _ovf.format_8_2e(got["abs_max"]) == f"{finite.abs().max():8.2e}"
        assert _ovf.format_8_2e(got["abs_min"]) == f"{finite.abs().min():8.2e}"
