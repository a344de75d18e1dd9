"""ovf on training code in the styles people write (tests/e2e/scripts/real_models.py:
torchvision's resnet18 and VisionTransformer, a GPT-style decoder with a causal -inf
mask, nn.MultiheadAttention with a key padding mask, word_language_model's Transformer
with its log(tril(ones)) mask, minGPT left padding, hand-written losses, BatchNorm,
AdamW with eps=0), checked against an independent oracle run in the same test: a
TorchDispatchMode that names the first ATen op whose output is non-finite while its
inputs were finite (scripts/dispatch_oracle.py). ovf must name the same op, module,
batch and line, and never stop a healthy run."""

import functools
import os
import re
import subprocess

import pytest
from harness import PACKAGE_PARENT, PYTHON, TOP, clean_env, run_bounded

SCRIPT = os.path.join(TOP, "tests", "e2e", "scripts", "real_models.py")
HEALTHY = ["gpt_healthy", "mha_padding", "transformer_log_mask"]
DIVERGING = [
    "gpt_log_loss",
    "attention_fp16",
    "left_padding",
    "hand_scaler",
    "resnet_batchnorm",
    "vit_adamw_eps0",
    "normalised_distance",
    "gan_two_optimizers",
    "siamese_pairs",
    "loader_transforms",
    "segmentation_ignore",
    "rnn_relu_explodes",
]
# Where ovf and the oracle see an op at different levels of the dispatcher: ovf's
# RecordFunction sees the op the program called (Tensor.half() is aten::to), the
# dispatch mode sees what it becomes below autograd (aten::_to_copy).
# A composite op (aten::linear, aten::cross_entropy_loss) is what the dispatch mode
# sees inside it; ovf's why-line names that op (WHY).
SAME_OP = {
    "aten::to": "aten::_to_copy",
    "aten::softmax": "aten::_softmax",
    "aten::linear": "aten::addmm",
    "aten::cross_entropy_loss": "aten::nll_loss2d_forward",
}
# ovf names the buffer an op made non-finite; the oracle the op that wrote it.
BUFFER_WRITERS = {"aten::native_batch_norm"}
OVERFLOW_MESSAGE = (
    "DebugUnderflowOverflow: inf/nan detected, aborting as there is no point running further. "
    "Please scroll up above this traceback to see the activation values prior to this event."
)


def run_case(case, *prefix):
    env = clean_env(PYTHONPATH=PACKAGE_PARENT, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    return run_bounded([PYTHON, *prefix, SCRIPT, case], timeout=300, env=env, cwd=TOP)


@functools.cache  # a case's verdict is the oracle's, whichever test asks (gdb, LLDB, Python)
def oracle(case):
    """(op, module, batch, line) of the oracle's verdict, or None."""
    out = run_bounded(
        [PYTHON, SCRIPT, case, "--oracle"],
        timeout=300,
        cwd=TOP,
        env=clean_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"),
    )
    last = out.rstrip().splitlines()[-1]
    if last == "oracle: none":
        return None
    m = re.fullmatch(r"oracle: (\S+) in (.+) at batch (\d+), real_models\.py:(\d+)", last)
    assert m, out
    return m.group(1), m.group(2), int(m.group(3)), int(m.group(4))


def python_mode_verdict(out):
    """(op or 'buffer NAME', module, batch, line) from python3 -m ovf's report and traceback."""
    m = re.search(
        r"^ovf: the first non-finite value was (?:produced by (\S+) in (.+?)"
        r"(?: at real_models\.py:(\d+) in \S+)?|produced in the"
        r" backward "
        r"pass by (\S+), the gradient of \S+ in (.+?) at real_models\.py:\d+ in \S+|written into"
        r" the "
        r"buffer (\S+) by the forward of (.+)) \(batch (\d+)\)$",
        out,
        re.M,
    )
    assert m, out
    op = m.group(1) or m.group(4) or f"buffer {m.group(6)}"
    module = m.group(2) or m.group(5) or m.group(7)
    # the op's own line where the report names it (the error may come from a later hook)
    traceback_line = re.findall(r'File ".*real_models\.py", line (\d+), in ', out)[-1]
    line = int(m.group(3) or traceback_line)
    return op, "(no module)" if module == "no module" else module, int(m.group(8)), line


def born_line(case, mark="born"):
    with open(SCRIPT) as f:
        return next(i for i, text in enumerate(f, 1) if text.rstrip().endswith(f"# {mark}: {case}"))


def agrees(ovf_verdict, truth):
    op, module, batch, line = ovf_verdict
    t_op, t_module, t_batch, t_line = truth
    if op.startswith("buffer "):
        same_op = t_op in BUFFER_WRITERS and op.split(".")[0] == f"buffer {t_module}"
    else:
        same_op = SAME_OP.get(op, op) == t_op
    return same_op and (module, batch, line) == (t_module, t_batch, t_line)


# Why each value was made, as ovf says it (diagnosis.cpp), checked against the case's own
# arithmetic.
WHY = {
    "gpt_log_loss": "aten::log of 32 zeros (-inf)",  # 4 x 8 picked probabilities underflowed to 0
    "attention_fp16": "aten::to to float16: input abs max 3.19e+07 > 65504",
    # sequence 0 padded by 2: queries 0 and 1 see only padded keys, x 2 heads x 8 keys
    "left_padding": "aten::softmax of rows that are -inf throughout (masked whole): 32 nan",
    # gradients scaled by 2**120, cast to float16
    "hand_scaler": "aten::to to float16: input abs max 2.05e+35 > 65504",
    "normalised_distance": (
        "aten::div: the divisor has 1 zero: 0/0 in 1 element (nan)"
    ),  # sample 0 is zeros
    # AdamW's denominator sqrt(v) + eps is 0 where a gradient was 0 (eps=0): 16 of them
    "vit_adamw_eps0": "aten::addcdiv_: the divisor has 16 zeros: 0/0 in 16 elements (nan)",
    # iteration 2's generator noise has one zero row of 8 latent values
    "gan_two_optimizers": "aten::div: the divisor has 1 zero: 0/0 in 8 elements (nan)",
    # one blank image of 16 pixels in step 2's pairs
    "siamese_pairs": "aten::div: the divisor has 1 zero: 0/0 in 16 elements (nan)",
    # image 9 (row 1 of step 2) is 10200 times too bright: its class probability is 0
    "loader_transforms": "aten::log of 1 zero (-inf)",
    # the op inside cross_entropy that divides by the total weight of no target
    "segmentation_ignore": (
        "aten::nll_loss2d_forward: the targets' total weight is 0 (every target is ignore_index"
        " or weighs 0): 0/0 in the mean (nan)"
    ),
    # the hidden state's matmul inside aten::rnn_relu (the exact input magnitude varies)
    "rnn_relu_explodes": "aten::linear overflow: results exceed float32's max 3.40e+38 (...",
}


def why_matches(case, whys):
    """WHY[case] exactly, or as a prefix where it ends with "..." """
    if case not in WHY:
        return whys == []
    want = f"ovf: why: {WHY[case]}"
    if want.endswith("..."):
        return len(whys) == 1 and whys[0].startswith(want[:-3])
    return whys == [want]


# Module level alone, and every op with its gradient.
MODES = {"modules": [], "ops": ["--ops", "--backward"]}


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("case", HEALTHY)
def test_healthy_runs_with_masks_go_to_the_end(case, mode):
    if mode == "ops":
        assert oracle(case) is None
    out = run_case(case, "-m", "ovf", *MODES[mode])
    assert "batch 2 loss" in out and "ovf:" not in out and "Traceback" not in out, out


@pytest.mark.parametrize("case", DIVERGING)
def test_python_mode_names_what_the_oracle_names(case):
    truth = oracle(case)
    assert truth is not None
    out = run_case(case, "-m", "ovf", "--ops", "--backward")
    verdict = python_mode_verdict(out)
    assert agrees(verdict, truth), f"ovf {verdict} vs oracle {truth}\n{out}"
    # one event, one report, one error: raised where the value was made
    assert out.count("Detected inf/nan during batch_number=") == 1, out
    if case == "normalised_distance":  # a backward NaN names the forward line it differentiates
        born = born_line(case)
        assert (
            f"the gradient of aten::sqrt in no module at real_models.py:{born} in {case} (batch 1)"
            in out
        )
    whys = [line for line in out.splitlines() if line.startswith("ovf: why: ")]
    assert why_matches(case, whys), out
    errors = [line for line in out.splitlines() if line.startswith("ovf.NonFiniteError: ")]
    assert errors == ["ovf.NonFiniteError: " + OVERFLOW_MESSAGE], out


def debugger_verdict(out):
    """(op or 'buffer NAME', module, batch, line) from a debugger's stop summary and
    `ovf py-bt` (the script's innermost frame)."""
    m = re.search(
        r"^ovf: first non-finite value \([a-z ]+\)(?: in the backward pass)? at batch (\d+),"
        r" (?:op (\S+) in (.+?)(?:, produced here)?|buffer (\S+), made non-finite by the"
        r" forward of (.+))$",
        out,
        re.M,
    )
    assert m, out
    # the script's innermost line (torchvision's own code may be nearer the op)
    frames = re.findall(r'^  File ".*real_models\.py", line (\d+), in \S+', out, re.M)
    assert frames, out
    op = m.group(2) or f"buffer {m.group(4)}"
    module = m.group(3) or m.group(5)
    module = "(no module)" if module == "no module" else module
    return op, module, int(m.group(1)), int(frames[0])


@pytest.mark.parametrize("case", DIVERGING)
def test_the_debuggers_stop_where_the_oracle_names(debugger, case):
    truth = oracle(case)
    assert truth is not None
    out = debugger.run(
        ["ovf break-on-nan --ops --backward", "run", "ovf py-bt", debugger.cut(), "kill"],
        program=[PYTHON, SCRIPT, case],
        env=clean_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"),
        cwd=TOP,
        timeout=300,
    )
    assert debugger.hits(out) == 1, out
    verdict = debugger_verdict(out)
    assert agrees(verdict, truth), f"ovf {verdict} vs oracle {truth}\n{out}"
    # the stop summary tells the same why as Python mode, and the op's line
    whys = [f"ovf: {line.strip()}" for line in out.splitlines() if line.startswith("     why: ")]
    assert why_matches(case, whys), out
    # a backward op's line is the forward line it differentiates (the case's "born" line)
    line = born_line(case) if " in the backward pass at " in out else truth[3]
    if not verdict[0].startswith("buffer "):
        assert f"\n     at real_models.py:{line} in " in out, out


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("case", HEALTHY)
def test_the_debuggers_never_stop_a_healthy_run_with_masks(debugger, case, mode):
    out = debugger.run(
        [" ".join(["ovf break-on-nan", *MODES[mode]]), "run"],
        program=[PYTHON, SCRIPT, case],
        env=clean_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"),
        cwd=TOP,
        timeout=300,
    )
    assert debugger.hits(out) == 0 and "batch 2 loss" in out, out
    assert debugger.exit_code(out) == 0, out


def test_an_overflow_the_code_expects_runs_to_the_end_with_stop_nan():
    out = run_case("hand_scaler", "-m", "ovf", "--ops", "--backward", "--stop", "nan")
    assert "batch 0 overflow, scale 1024" in out and "batch 2 loss" in out, out
    assert "ovf:" not in out and "Traceback" not in out, out


def test_the_debuggers_let_an_expected_overflow_run_with_nan_only(debugger):
    out = debugger.run(
        ["ovf break-on-nan --nan --ops --backward", "run"],
        program=[PYTHON, SCRIPT, "hand_scaler"],
        env=clean_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"),
        cwd=TOP,
        timeout=300,
    )
    assert debugger.hits(out) == 0 and "batch 2 loss" in out, out
    assert debugger.exit_code(out) == 0, out


# A NaN the backward pass makes, with the backward pass unwatched (--ops alone): the first
# op that meets it is the optimizer's update, which carries it in through a gradient.
UNWATCHED_BACKWARD = (
    "by the gradient of weight: it was made in the backward pass, which ovf did not watch"
    " (--backward names the op that made it and its forward line)"
)


def test_a_backward_nan_without_backward_is_told_so_in_python_mode():
    out = run_case("normalised_distance", "-m", "ovf", "--ops")
    line = born_line("normalised_distance", "carried")
    assert (
        "ovf: the first non-finite value was carried into aten::add_ in no module at"
        f" real_models.py:{line} in normalised_distance (batch 1) {UNWATCHED_BACKWARD}\n"
    ) in out, out


def test_the_debuggers_tell_a_backward_nan_without_backward_alike(debugger):
    out = debugger.run(
        ["ovf break-on-nan --ops", "run", "kill"],
        program=[PYTHON, SCRIPT, "normalised_distance"],
        env=clean_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"),
        cwd=TOP,
        timeout=300,
    )
    assert debugger.hits(out) == 1, out
    line = born_line("normalised_distance", "carried")
    assert (
        "ovf: first non-finite value (nan) at batch 1, op aten::add_ in no module, carried in\n"
        f"     at real_models.py:{line} in normalised_distance\n"
        f"     carried in {UNWATCHED_BACKWARD}\n"
    ) in out, out


def test_the_users_steps_are_what_after_batch_counts():
    """siamese_pairs calls its encoder twice a step and goes non-finite at step 2:
    counted in forwards that would be forward 5, past --after-batch 3."""
    out = run_case("siamese_pairs", "-m", "ovf", "--after-batch", "3")
    assert "batch 2 loss nan" in out and "ovf:" not in out and "Traceback" not in out, out
    out = run_case("siamese_pairs", "-m", "ovf", "--after-batch", "2")
    assert "Detected inf/nan during batch_number=2\n" in out and "batch 2 loss" not in out, out


def test_the_users_steps_are_what_trace_batches_traces():
    """loader_transforms: a Normalize module called per sample by the DataLoader and two
    evaluations under no_grad after each step. Batch 1 is the model's forward of step 1,
    its two evaluations, and the four Normalize calls that fetch step 2's samples."""
    out = run_case("loader_transforms", "-m", "ovf", "--trace-batches", "1")
    traced = out[out.index("batch 0 loss") : out.index("batch 1 loss")]
    assert traced.count("*** Starting batch number=1 ***") == 1, traced
    traced = out[out.index("batch 0 loss") : out.index("Detected inf/nan")]
    roots = re.findall(r"^ +(Sequential|Normalize)$", traced, re.M)
    assert roots == ["Sequential"] * 3 + ["Normalize"] * 4, out


def test_if_decides_events_in_python_mode_as_in_the_debuggers():
    """hand_scaler's deliberate overflow is a float16 cast: an --if that excludes
    float16 lets the run go to the end, one that names the op stops at it."""
    out = run_case("hand_scaler", "-m", "ovf", "--ops", "--backward", "--if", "dtype != 'float16'")
    assert "batch 0 overflow, scale 1024" in out and "batch 2 loss" in out, out
    assert "ovf:" not in out and "Traceback" not in out, out
    out = run_case("hand_scaler", "-m", "ovf", "--ops", "--backward", "--if", "op == 'aten::to'")
    assert "ovf: why: aten::to to float16: input abs max 2.05e+35 > 65504" in out, out
    assert out.count("Detected inf/nan during batch_number=0") == 1, out


def test_a_bad_if_is_one_line_and_exit_2():
    env = clean_env(PYTHONPATH=PACKAGE_PARENT)
    p = subprocess.run(
        [PYTHON, "-m", "ovf", "--if", "__import__('os')", SCRIPT, "hand_scaler"],
        env=env,
        cwd=TOP,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2 and p.stdout == "", p
    assert p.stderr.splitlines() == [
        "ovf: --if \"__import__('os')\" uses __import__; it may use absmax, absmin, nan, inf,"
        " module, cls, batch, kind, label, dtype, event, numel, op, producer"
    ], p.stderr
