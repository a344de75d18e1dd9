"""GB/s of ovf's stats engine against a plain memory read and the reference approach.

For each dtype (float32, float16, bfloat16) and size (1e4, 1e6, 1e7 elements),
three ways of going over the same contiguous CPU tensor, interleaved round by
round (medians reported), one thread:

  floor      a C loop that reads every byte once and does nothing else
             (bench/read_floor.c, loaded with ctypes over tensor.data_ptr());
  ovf        ovf._ovf.stats(tensor): abs min / abs max over finite values and
             the NaN, +Inf, -Inf, zero and subnormal counts, in one pass;
  reference  what transformers.debug_utils does per tensor (written for this
             benchmark): abs(), min(), max(), isnan().any(), isinf().any(),
             each with a host read (.item()).
  cast       ovf._ovf.stats(tensor, casts=True): the same pass, also counting what
             casts to float16, bfloat16 and both float8 types would lose (12
             counts; --cast-shares, ovf watch --cast); "cast/ovf" is its cost.

Last, the cast counts by copy of the engine's loops: where the default counts with
the AVX-512 loops (`_ovf.scan_loops()`), child processes with OVF_SCAN_ISA=avx2 and
with the default measure the same cells at 1e6 and 1e7, alternately, three times
each; the medians and their ratio are printed.

GB/s counts the tensor's bytes once per call. The target is ovf >= 0.5 x the
floor at 1e6 and 1e7 elements. ovf's time includes one Python -> C++ call and
building the result dict; the line "call overhead" measures that on a
1-element tensor, and "ovf engine" subtracts it.

    python3 bench/stats_throughput.py [--quick]
"""

import argparse
import ctypes
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (pins threads before torch loads)
import torch  # noqa: E402

SIZES = (10_000, 1_000_000, 10_000_000)
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
TARGET = 0.5  # ovf / floor at 1e6 and 1e7
TARGET_SIZES = (1_000_000, 10_000_000)


def load_floor_library():
    """The built bench/read_floor.c (build*/bench/), else compile it with cc into a temp dir."""
    candidates = []
    if os.environ.get("OVF_READ_FLOOR_LIB"):
        candidates.append(os.environ["OVF_READ_FLOOR_LIB"])
    candidates += sorted(
        glob.glob(os.path.join(_common.REPO, "build*", "bench", "libovf_read_floor.so"))
    )
    path = next((c for c in candidates if os.path.isfile(c)), None)
    if path is None:
        source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "read_floor.c")
        path = os.path.join(tempfile.mkdtemp(prefix="ovf-bench-"), "libovf_read_floor.so")
        subprocess.run(["cc", "-O3", "-shared", "-fPIC", "-o", path, source], check=True)
    lib = ctypes.CDLL(path)
    lib.ovf_read_floor.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    lib.ovf_read_floor.restype = ctypes.c_uint64
    return lib, path


def reference_stats(t):
    """The reference's per-tensor work: abs, min, max, isnan, isinf, a host read per stat."""
    a = t.abs()
    return (
        a.min().item(),
        a.max().item(),
        torch.isnan(t).any().item(),
        torch.isinf(t).any().item(),
    )


def time_per_call(fn, inner):
    start = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - start) / inner


def calibrate(fn, budget_s):
    """How many calls take about budget_s."""
    inner = 1
    while True:
        t = time_per_call(fn, inner)
        if t * inner >= budget_s / 4 or inner >= 1 << 22:
            return max(1, int(budget_s / max(t, 1e-9)))
        inner *= 4


def measure(methods, rounds, budget_s):
    """Median seconds per call of each method, rounds interleaved (the order rotates)."""
    inner = {name: calibrate(fn, budget_s) for name, fn in methods.items()}
    samples = {name: [] for name in methods}
    names = list(methods)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            samples[name].append(time_per_call(methods[name], inner[name]))
    return {name: _common.median(v) for name, v in samples.items()}


def data(dtype, n):
    return torch.randn(n, generator=torch.Generator().manual_seed(n)).to(dtype)


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def cast_cells(stats, rounds, budget_s):
    """{"dtype n": median seconds of a cast-counting call} at TARGET_SIZES."""
    cells = {}
    for dtype in DTYPES:
        for n in TARGET_SIZES:
            t = data(dtype, n)
            sec = measure({"cast": lambda: stats(t, casts=True)}, rounds, budget_s)  # noqa: B023
            cells[f"{dtype_name(dtype)} {n}"] = sec["cast"]
    return cells


def compare_copies(ovf, args):
    """Cast GB/s with the AVX2 loops and with the default's, in alternating children."""
    default = ovf._ovf.scan_loops()
    print(f"\ncast counts by copy of the loops (this process runs {default})")
    if default != "avx2+avx512-counts":
        print("  the default counts with the AVX2 or baseline loops here: nothing to compare")
        return
    runs = {"avx2": [], default: []}
    for _ in range(3):
        for isa, name in (("avx2", "avx2"), ("", default)):
            command = [sys.executable, __file__, "--cast-cells"] + (
                ["--quick"] if args.quick else []
            )
            env = dict(os.environ, OVF_SCAN_ISA=isa)
            out = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
            runs[name].append(json.loads(out.stdout.splitlines()[-1]))
    print(f"{'cell':<18} {'avx2 GB/s':>10} {'avx512 GB/s':>12} {'avx512/avx2':>12}")
    for cell in runs["avx2"][0]:
        dtype, n = cell.split()
        nbytes = int(n) * torch.empty(0, dtype=getattr(torch, dtype)).element_size()
        gbps = {k: nbytes / _common.median([r[cell] for r in v]) / 1e9 for k, v in runs.items()}
        print(
            f"{cell:<18} {gbps['avx2']:>10.1f} {gbps[default]:>12.1f}"
            f" {gbps[default] / gbps['avx2']:>12.2f}"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter rounds (a smoke test)")
    parser.add_argument(
        "--rounds", type=int, default=None, help="interleaved rounds per cell (default 9)"
    )
    parser.add_argument(
        "--cast-cells", action="store_true", help=argparse.SUPPRESS
    )  # a child of compare_copies: its cells as JSON
    args = parser.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 9)
    budget_s = 0.01 if args.quick else 0.06
    if args.cast_cells:
        print(json.dumps(cast_cells(_common.import_ovf()._ovf.stats, rounds, budget_s)))
        return 0

    ovf = _common.import_ovf()
    stats = ovf._ovf.stats
    lib, lib_path = load_floor_library()
    _common.print_machine("ovf stats engine throughput (bench/stats_throughput.py)", ovf)
    print(f"floor:    {lib_path}")
    print(
        f"method:   {rounds} interleaved rounds of ~{budget_s * 1e3:.0f} ms per method and cell; "
        "median seconds per call; GB/s = tensor bytes / time (1 GB = 1e9 bytes)"
    )
    print("data:     torch.randn(n) cast to the dtype (finite, no zeros in practice), contiguous\n")

    one = torch.ones(1)
    overhead = measure(
        {"ovf": lambda: stats(one), "floor": lambda: lib.ovf_read_floor(one.data_ptr(), 4)},
        rounds,
        budget_s,
    )
    print(
        f"call overhead (1-element tensor): ovf._ovf.stats {overhead['ovf'] * 1e6:.2f} us, "
        f"ctypes floor call {overhead['floor'] * 1e6:.2f} us\n"
    )

    header = (
        f"{'dtype':<9} {'elements':>9} {'MB':>7} |"
        f" {'floor GB/s':>10} {'ovf GB/s':>9} {'ref GB/s':>9} |"
        f" {'ovf/floor':>9} {'ref/floor':>9} {'ovf/ref':>8} |"
        f" {'ovf engine GB/s':>15} {'engine/floor':>12} |"
        f" {'cast GB/s':>9} {'cast/ovf':>8}"
    )
    print(header)
    print("-" * len(header))
    rows = []
    for dtype in DTYPES:
        for n in SIZES:
            t = data(dtype, n)
            nbytes = t.numel() * t.element_size()
            ptr = t.data_ptr()
            assert stats(t)["numel"] == n
            sec = measure(
                {  # (each lambda is called before the loop moves on: no late binding)
                    "floor": lambda: lib.ovf_read_floor(ptr, nbytes),  # noqa: B023
                    "ovf": lambda: stats(t),  # noqa: B023
                    "reference": lambda: reference_stats(t),  # noqa: B023
                    "cast": lambda: stats(t, casts=True),  # noqa: B023
                },
                rounds,
                budget_s,
            )
            gbps = {k: nbytes / v / 1e9 for k, v in sec.items()}
            engine_s = max(sec["ovf"] - overhead["ovf"], 1e-12)
            engine_gbps = nbytes / engine_s / 1e9
            row = dict(
                dtype=dtype_name(dtype),
                n=n,
                mb=nbytes / 1e6,
                **gbps,
                engine=engine_gbps,
                ovf_floor=gbps["ovf"] / gbps["floor"],
                ref_floor=gbps["reference"] / gbps["floor"],
                ovf_ref=gbps["ovf"] / gbps["reference"],
                engine_floor=engine_gbps / gbps["floor"],
            )
            rows.append(row)
            print(
                (
                    f"{row['dtype']:<9} {n:>9.0e} {row['mb']:>7.2f} |"
                    f" {gbps['floor']:>10.1f} {gbps['ovf']:>9.1f} {gbps['reference']:>9.2f} |"
                    f" {row['ovf_floor']:>9.2f} {row['ref_floor']:>9.3f} {row['ovf_ref']:>8.1f} |"
                    f" {engine_gbps:>15.1f} {row['engine_floor']:>12.2f} |"
                    f" {gbps['cast']:>9.1f} {sec['cast'] / sec['ovf']:>8.2f}"
                ),
                flush=True,
            )

    print("\nratio table (ovf / floor; target >= 0.5 at 1e6 and 1e7)")
    dtype_names = [dtype_name(d) for d in DTYPES]
    print(f"{'elements':>9} " + " ".join(f"{d:>9}" for d in dtype_names))
    for n in SIZES:
        cells = [
            next(r for r in rows if r["n"] == n and r["dtype"] == d)["ovf_floor"]
            for d in dtype_names
        ]
        print(f"{n:>9.0e} " + " ".join(f"{c:>9.2f}" for c in cells))

    missed = [r for r in rows if r["n"] in TARGET_SIZES and r["ovf_floor"] < TARGET]
    print()
    big = [r for r in rows if r["n"] in TARGET_SIZES]
    ovf_lo, ovf_hi = min(r["ovf"] for r in big), max(r["ovf"] for r in big)
    floor_lo, floor_hi = min(r["floor"] for r in big), max(r["floor"] for r in big)
    if ovf_hi < 1.2 * ovf_lo and floor_hi > 1.5 * floor_lo:
        print(
            f"note: at 1e6 and 1e7 ovf runs at {ovf_lo:.1f}-{ovf_hi:.1f} GB/s whatever the size and"
            f" dtype, while the floor runs at {floor_lo:.1f}-{floor_hi:.1f} GB/s (cache vs DRAM):"
            " the stats engine is compute-bound, not memory-bound"
        )
    if missed:
        for r in missed:
            print(
                f"TARGET MISSED: {r['dtype']} at {r['n']:.0e} elements: ovf {r['ovf']:.1f} GB/s is "
                f"{r['ovf_floor']:.2f} x the floor's {r['floor']:.1f} GB/s (target >= {TARGET}); "
                f"engine alone (call overhead removed) {r['engine_floor']:.2f} x"
            )
    else:
        print(
            f"target met: ovf >= {TARGET} x the floor at 1e6 and 1e7 elements for every dtype "
            f"(lowest {min(r['ovf_floor'] for r in rows if r['n'] in TARGET_SIZES):.2f} x)"
        )
    compare_copies(ovf, args)
    print(_common.load_line("end"))
    return _common.exit_status(missed, args.quick)


if __name__ == "__main__":
    sys.exit(main())
