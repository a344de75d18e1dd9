"""The device engine on the host: the portable backend (ATen ops on the
tensor's device) against the CPU engine, and the asynchronous path of fast
device mode with deferral forced on CPU tensors (OVF_TEST_DEFER=N: each frame's
statistics arrive only after N polls). The CUDA backend's own tests need a GPU
(tests/cpp/test_cuda_stats_gpu.cpp) and skip without one."""

import math
import os

import pytest
import torch
from build_paths import PACKAGE_PARENT, REPO, WENT_ON, run_ovf_child
from ovf import _options, _ovf

SCRIPT = os.path.join(REPO, "tests", "python", "scripts", "deferred_nan.py")
NEVER = "1000000"  # polls: the statistics arrive only when waited for


def _bit_patterns(dtype, n, generator):
    """n elements of `dtype` from random bits, with NaN, +-Inf, zeros and
    subnormals planted (floating types)."""
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=generator).bool()
    if dtype.is_complex:
        real = _bit_patterns(
            torch.float32 if dtype == torch.complex64 else torch.float64, 2 * n, generator
        )
        return torch.view_as_complex(real.view(n, 2).contiguous())
    if dtype.is_floating_point:
        width = torch.finfo(dtype).bits
        holder = {8: torch.uint8, 16: torch.int16, 32: torch.int32, 64: torch.int64}[width]
        low, high = (0, 256) if width == 8 else (-(2 ** (width - 1)), 2 ** (width - 1) - 1)
        x = torch.randint(low, high, (n,), generator=generator, dtype=holder).view(dtype)
        planted = [math.nan, math.inf, -math.inf, 0.0, -0.0, torch.finfo(dtype).tiny / 2]
        for i, value in enumerate(planted):
            try:
                x[i * 7 % n] = value
            except RuntimeError:  # float8_e4m3fn has no infinity
                pass
        return x
    if dtype in UNSIGNED_WIDE:  # random bits: the whole range (torch.iinfo's max overflows int64)
        size = torch.empty((), dtype=dtype).element_size()
        bits = torch.randint(0, 256, (n * size,), generator=generator, dtype=torch.uint8)
        return bits.view(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, (n,), generator=generator, dtype=torch.int64).to(dtype)


# uint16/32/64 (torch >= 2.3): few ops, no abs(): the portable backend must not use them.
UNSIGNED_WIDE = [
    getattr(torch, name) for name in ("uint16", "uint32", "uint64") if hasattr(torch, name)
]


DTYPES = [
    torch.float64,
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.complex64,
    torch.complex128,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.bool,
] + [getattr(torch, name) for name in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, name)]
DTYPES += UNSIGNED_WIDE


def _views(x):
    """The layouts a hook meets: contiguous, transposed, strided, broadcast,
    the lazy negative bit, a single element, empty."""
    m = x[:60].view(6, 10)
    views = {"contiguous": m, "transposed": m.t(), "strided": x[::3]}
    views["expanded"] = x[:4].expand(3, 4)
    if x.is_floating_point() or x.is_complex():
        views["negative bit"] = torch._neg_view(m) if hasattr(torch, "_neg_view") else -m
    views["one"] = x[5:6]
    views["empty"] = x[:0]
    return views


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_portable_backend_gives_the_cpu_engines_numbers(dtype):
    generator = torch.Generator().manual_seed(11)
    for seed in range(4):
        x = _bit_patterns(dtype, 997 + seed, generator)
        for name, view in _views(x).items():
            expected, got = _ovf.stats(view), _ovf.device_stats(view)
            assert got == expected, f"{dtype} {name}: portable {got} != cpu {expected}"


def test_a_bool_byte_other_than_one_is_true():
    """A uint8 tensor viewed as bool may hold 2: true, magnitude 1, in both engines."""
    flags = torch.tensor([2, 0, 1, 255], dtype=torch.uint8).view(torch.bool)
    expected = _ovf.stats(flags)
    assert (expected["abs_max"], expected["abs_min"], expected["zero"]) == (1.0, 0.0, 1)
    assert _ovf.device_stats(flags) == expected


PIECES = """
import torch
from ovf import _ovf
from test_device_engine import DTYPES, _bit_patterns, _views
generator = torch.Generator().manual_seed(3)
wrong = []
for dtype in DTYPES:
    x = _bit_patterns(dtype, 997, generator)
    views = _views(x)
    views["wide strided"] = x[:990].view(9, 110)[:, ::3]
    views["deep transposed"] = x[:960].view(4, 6, 40).transpose(0, 2)
    for name, view in views.items():
        if _ovf.device_stats(view) != _ovf.stats(view):
            wrong.append(f"{dtype} {name}")
print(wrong)
"""


def test_a_tensor_read_in_pieces_gives_the_cpu_engines_numbers():
    """The portable backend reads a large tensor in pieces (OVF_TEST_PORTABLE_CHUNK=7
    makes every tensor here large): the combined row is the one-pass row."""
    here = os.path.dirname(os.path.abspath(__file__))
    p = run_ovf_child(
        ["-c", PIECES],
        timeout=300,
        OVF_TEST_PORTABLE_CHUNK="7",
        PYTHONPATH=os.pathsep.join([PACKAGE_PARENT, here]),
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout == "[]\n"


MEMORY = """
import resource, torch
from ovf import _ovf
x = torch.randn(1 << 26)  # 256 MiB of float32
x[5] = float("nan")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
stats = _ovf.device_stats(x)
print(stats["nan"], (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


def test_the_portable_backends_extra_memory_is_bounded():
    """Peak memory beyond the tensor while the portable backend reads 2^26 float32
    elements (256 MiB): in pieces of 2^23 (the default; 253-262 MiB measured) under 400
    MiB; in one pass (a piece limit above the size) more than twice that, which is what
    the bound saves (1.6 GiB measured as a rule; one CI run measured 871 MiB: the peak
    resident size of a pass also depends on when the kernel hands pages back)."""

    def extra_mib(**env):
        p = run_ovf_child(["-c", MEMORY], timeout=300, OMP_NUM_THREADS="1", **env)
        assert p.returncode == 0, p.stderr[-3000:]
        nans, mib = map(int, p.stdout.split())
        assert nans == 1
        return mib

    in_pieces = extra_mib()
    assert in_pieces < 400
    assert extra_mib(OVF_TEST_PORTABLE_CHUNK=str(1 << 30)) > 2 * max(in_pieces, 256)


CAPTURED = """
import torch, ovf
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
debug = ovf.DebugUnderflowOverflow(net, device_mode="exact")
for step in range(3):
    x = torch.randn(2, 4)
    if step == 2:
        x[0, 0] = float("nan")  # inside a capture: not measured, so not an event
    net(x)
print(ovf._ovf.report(2))
"""


def test_tensors_of_a_stream_being_captured_are_not_measured():
    """Inside a CUDA graph's capture ovf enqueues nothing (OVF_TEST_CAPTURING=1 makes
    every device look capturing; OVF_TEST_DEFER=0 sends CPU tensors through the
    device engine): the lines read "no data", nothing waits, and the note comes once."""
    p = run_ovf_child(["-c", CAPTURED], OVF_TEST_DEFER="0", OVF_TEST_CAPTURING="1")
    assert p.returncode == 0, p.stderr
    notes = [line for line in p.stderr.splitlines() if line.startswith("ovf:")]
    assert notes == [
        "ovf: note: a CUDA graph is being captured on cpu: ovf does not measure the tensors "
        'of captured work (their lines read "no data"); it measures them again outside the '
        "capture"
    ]
    assert p.stdout.splitlines() == [
        "                  1 ReLU",
        "          no data input[0]",
        "          no data output",
        "                   Sequential",
        "          no data input[0]",
        "          no data output",
    ], p.stdout


def _run(mode, bad, batches, on_nan="raise", defer=None, *extra):
    env = {"OPENBLAS_NUM_THREADS": "1"}
    if defer is not None:
        env["OVF_TEST_DEFER"] = defer
    p = run_ovf_child([SCRIPT, mode, str(bad), str(batches), on_nan, *extra], **env)
    # warn trains on after a NaN, and the program then exits 1 (the script catches a raise)
    went_on = on_nan == "warn" and 0 <= bad < batches
    assert p.returncode == (1 if went_on else 0), p.stderr[-3000:]
    assert not went_on or p.stderr.splitlines()[-1] == WENT_ON, p.stderr[-3000:]
    return p.stdout


def _report(out):
    """The report ovf printed: from its header to the end of the frames."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Detected inf/nan"))
    end = next(
        (i for i in range(start, len(lines)) if lines[i].startswith(("raised in", "end of"))),
        len(lines),
    )
    return "\n".join(lines[start:end]).rstrip()


def test_fast_and_exact_name_the_same_frame_as_the_cpu_engine():
    synchronous = _run("fast", 2, 5)
    exact = _run("exact", 2, 5, "raise", "3")
    fast = _run("fast", 2, 5, "raise", "3")
    assert "raised in batch 2" in synchronous.splitlines()
    # exact: one sync per frame, the raise comes in the frame's own hook
    assert "raised in batch 2" in exact.splitlines()
    # fast: the statistics came 3 polls late, the raise at a later hook
    assert "raised in batch 3" in fast.splitlines()
    report = _report(synchronous)
    assert report.startswith("Detected inf/nan during batch_number=2")
    assert report.splitlines()[-1] == "     nan      nan output"
    assert " " * 18 + "mid Mid" in report.splitlines()
    assert _report(exact) == report
    assert _report(fast) == report


def test_a_batch_boundary_bounds_the_delay():
    # Polls never say the statistics arrived: the end of the next batch's
    # forward waits for the batch before it, so the stop is one batch late.
    out = _run("fast", 1, 6, "raise", NEVER)
    assert "raised in batch 2" in out.splitlines()
    assert _report(out) == _report(_run("fast", 1, 6))


def test_frames_wait_in_the_ring_as_pending_then_get_their_values():
    out = _run("fast", -1, 3, "raise", NEVER, "--listing")
    before = out[out.index("== listing\n") : out.index("== listing after the flush")]
    after = out[out.index("== listing after the flush") :]
    # the last batch's frames have not been waited for: their lines are pending
    assert "          pending output" in before
    assert "pending" not in after
    assert _report_free(after) == _report_free(_run("fast", -1, 3, "raise", None, "--listing"))


def _report_free(listing_text):
    return listing_text[listing_text.index("== listing after the flush") :]


def test_records_pending_at_exit_are_judged_before_the_process_ends():
    # The NaN is in the last batch and its statistics never arrive by polling:
    # the exit waits for them, reports, and leaves no pending line.
    out = _run("fast", 3, 4, "warn", NEVER)
    lines = out.splitlines()
    assert lines.index("end of script") < next(
        i for i, line in enumerate(lines) if line.startswith("Detected inf/nan")
    )
    assert _report(out) == _report(_run("fast", 3, 4, "warn"))


@pytest.mark.parametrize(
    "how",
    [
        lambda: _ovf.start_session(21, [], -1, 0, 7),
        lambda: _options.device_mode_code("fastest"),
    ],
)
def test_a_bad_device_mode_is_refused_in_one_line(how):
    with pytest.raises(ValueError) as e:
        how()
    assert "\n" not in str(e.value) and "fast" in str(e.value)


def test_the_command_line_and_environment_name_a_bad_device_mode():
    p = run_ovf_child(
        ["-m", "ovf", SCRIPT, "fast", "-1", "1", "raise"], OVF_DEVICE_MODE="sometimes"
    )
    assert p.returncode != 0
    assert "ovf: OVF_DEVICE_MODE must be fast or exact; got 'sometimes'" in p.stderr
    p = run_ovf_child(["-m", "ovf", "--device-mode", "sometimes", SCRIPT])
    assert p.returncode == 2 and "--device-mode: invalid choice: 'sometimes'" in p.stderr


def test_op_level_mode_gives_the_same_verdict_through_the_device_engine():
    # Ops' outputs of a device tensor are computed by the device engine and
    # waited for: the same report as the CPU engine's, op and module named.
    def run(**extra):
        script = os.path.join(REPO, "examples", "log_negative.py")
        p = run_ovf_child(
            ["-m", "ovf", "--ops", script], timeout=300, OPENBLAS_NUM_THREADS="1", **extra
        )
        assert p.returncode == 1, p.stderr[-2000:]
        return p.stdout

    cpu = run()
    assert "aten::log" in cpu
    assert run(OVF_TEST_DEFER="0") == cpu
    # Late statistics: exact mode waits at the op and says the same; fast mode
    # judges the op later (here when the window of waiting ops is full, as the
    # statistics never arrive by polling) and names the same op, line and why.
    assert run(OVF_TEST_DEFER="3", OVF_DEVICE_MODE="exact") == cpu
    verdict = [line for line in cpu.splitlines() if line.startswith("ovf: ")]
    assert verdict[:2] == [
        "ovf: the first non-finite value was produced by aten::log in features.log_scale"
        " at log_negative.py:36 in forward (batch 3)",
        "ovf: why: aten::log of 1 negative value (nan)",
    ]
    late = run(OVF_TEST_DEFER=NEVER)
    assert [line for line in late.splitlines() if line.startswith("ovf: ")][:2] == verdict[:2]
    assert "batch 3: loss nan" in late.splitlines()  # the stop came later than the op


OPS_WAITS = os.path.join(REPO, "tests", "python", "scripts", "ops_waits.py")


@pytest.mark.parametrize(
    "mode, defer, waits",
    [("exact", "1", "all"), ("exact", NEVER, "all"), ("fast", "1", "once a step")],
)
def test_op_statistics_wait_once_per_outermost_op_in_exact_mode_and_not_in_fast(mode, defer, waits):
    # Op outputs, in-place inputs and backward ops of device tensors go into one
    # batch per outermost op (a module output's gradient into one of its own):
    # exact mode waits once for it, fast mode judges it when it arrived (a
    # statistic one poll late here), waiting only where the optimizer step's
    # check (which waits anyway) judges what ran before it: once a step.
    p = run_ovf_child(
        ["-m", "ovf", "--ops", "--backward", OPS_WAITS, "5"],
        OVF_TEST_DEFER=defer,
        OVF_DEVICE_MODE=mode,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    counted = p.stdout.splitlines()[-1].split()
    assert counted[0] == "waits" and counted[2] == "groups", p.stdout
    n_waits, n_groups = int(counted[1]), int(counted[3])
    # forward, loss, backward, zero_grad and SGD, and each step's 4 module output
    # gradients (a group each): 99 groups with torch 2.14, 170 with 2.6 (its
    # ops nest less)
    assert n_groups >= 99
    assert n_waits == (n_groups if waits == "all" else 5)


def test_fast_mode_keeps_at_most_a_window_of_op_groups_waiting():
    # Statistics that never arrive by polling, and no optimizer step to judge
    # them: past kMaxGroupsInFlight (64) queued groups, each new one waits for
    # the oldest.
    p = run_ovf_child(
        ["-m", "ovf", "--ops", OPS_WAITS, "30", "forward"],
        OVF_TEST_DEFER=NEVER,
        OVF_DEVICE_MODE="fast",
    )
    assert p.returncode == 0, p.stderr[-3000:]
    counted = p.stdout.splitlines()[-1].split()
    n_waits, n_groups = int(counted[1]), int(counted[3])
    assert n_groups >= 124  # 124 with torch 2.14, 195 with 2.6
    assert n_waits == n_groups - 64


@pytest.mark.parametrize("defer", [None, "3", NEVER])
def test_a_backward_nan_gets_the_same_verdict_however_late_its_statistics(defer):
    # The backward's ops and gradient lines are judged late (NEVER: only when
    # the optimizer step's check waits, which judges what ran before it first):
    # the verdict is the backward op's, not the step's write of its result.
    env = {"OVF_TEST_DEFER": defer} if defer else {}
    p = run_ovf_child(
        [
            "-m",
            "ovf",
            "--backward",
            os.path.join(REPO, "tests", "python", "scripts", "backward_nan.py"),
            "2",
            "4",
        ],
        **env,
    )
    assert p.returncode == 1, p.stderr[-3000:]
    assert [line for line in p.stdout.splitlines() if line.startswith(("ovf:", "step"))] == [
        "step 0: loss 12",
        "step 1: loss 12",
        "ovf: the first non-finite value was produced in the backward pass by aten::div, the"
        " gradient of aten::sqrt in <root Linear> at backward_nan.py:15 in forward (batch 2)",
        "ovf: why: aten::div: the divisor has 12 zeros: x/0 in 12 elements (inf)",
        # re-run on the inputs kept however late the judging: the same verdict
        "ovf: verdict: non-finite in float64 too (0 nan and 12 inf): the math itself on these"
        " inputs, not this op's precision",
    ]


def test_the_optimizer_check_waits_once_per_step():
    # 10 layers, 20 parameters, 3 steps in exact mode: each forward's 11 frames
    # wait once each, and each step's check of the 20 parameters once.
    p = run_ovf_child(
        [os.path.join(REPO, "tests", "python", "scripts", "optimizer_waits.py"), "10", "3"],
        OVF_TEST_DEFER=NEVER,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.splitlines()[-1] == f"waits {3 * 11 + 3}"
