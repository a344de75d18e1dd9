"""The replay at a module event in gdb's and LLDB's stop summary and `ovf status`, live
and from the core, and on the real-model cases whose first NaN/Inf a module sees: the op
the replay names is the one --ops and the independent oracle name
(tests/python/test_replay.py has every outcome in Python mode)."""

import os
import re

import pytest
from harness import PYTHON, TOP, clean_env
from test_real_models import agrees, oracle, python_mode_verdict, run_case

SCRIPT = os.path.join(TOP, "tests", "python", "scripts", "replays.py")
WHY = "aten::div: the divisor has 71 zeros: x/0 in 71 elements (inf)"


def replay_block(prefix):
    with open(SCRIPT) as f:
        line = next(i for i, t in enumerate(f, 1) if t.rstrip().endswith("# made: dropout_divides"))
    return re.compile(
        rf"\n{prefix}replay: replayed the forward of Net with its ops observed \(\d+\.\d\d s\)\n"
        rf"{prefix}  produced by aten::div in block at replays\.py:{line} in forward\n"
        rf"{prefix}  why: {re.escape(WHY)}\n"
        rf"{prefix}  verdict: non-finite in float64 too \(0 nan and 71 inf\): the math itself on"
        r" these inputs, not this op's precision\n"
    )


def test_the_debuggers_show_what_the_replay_found_live_and_from_the_core(debugger, tmp_path):
    core = tmp_path / "core"
    out = debugger.run(
        ["ovf break-on-nan", "run", "ovf status", debugger.gcore(core), "kill"],
        program=[PYTHON, SCRIPT, "dropout_divides"],
        env=clean_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"),
        cwd=TOP,
        timeout=300,
    )
    assert debugger.hits(out) == 1, out
    assert "\n     block (Block): output abs max inf  (input[0] abs max 2.42e+00)\n" in out, out
    assert replay_block("     ").search(out), out  # the stop summary, under the module's line
    assert replay_block("  ").search(out), out  # ovf status, under its first non-finite
    post = debugger.run(["ovf status"], core=core, timeout=120)
    assert replay_block("  ").search(post), post


# The real-model cases whose first NaN/Inf module mode sees in a module's frame: made in
# a functional softmax of blocks.0.attn's forward (seen first as blocks.0.attn.proj's
# input), in the generator's own forward, inside aten::rnn_relu.
REPLAYED_CASES = ["gan_two_optimizers", "left_padding", "rnn_relu_explodes"]


@pytest.mark.parametrize("case", REPLAYED_CASES + ["vit_adamw_eps0"])
def test_module_mode_names_what_the_oracle_names_by_replaying(case):
    """torchvision's ViT under AdamW(eps=0) writes 0/0 into a weight in the optimizer's
    step: replayed from the copy --capture optimizer keeps."""
    truth = oracle(case)
    stepping = case == "vit_adamw_eps0"
    out = run_case(case, "-m", "ovf", *(["--capture", "optimizer"] if stepping else []))
    replayed = r"replayed AdamW\.step\(\) from" if stepping else r"replayed the forward of \w+ with"
    assert re.search(rf"^ovf: {replayed}", out, re.M), out
    verdict = python_mode_verdict(out)
    assert agrees(verdict, truth), f"ovf {verdict} vs oracle {truth}\n{out}"
    assert out.count("Detected inf/nan during batch_number=") == 1, out


# What the replay at an optimizer step's event names (--capture optimizer): Adam(eps=0)'s
# 0/0 in a weight, made by the step; sqrt's gradient at 0 inside the model, made by the
# backward (module mode observes none) and written into the weights by SGD's step.
STEP_REPLAYS = {
    "adam_eps0": (
        r"replayed Adam\.step\(\) from the parameters and state it began with",
        r"produced by aten::addcdiv_ in no module at replays\.py:{line} in <module>",
        "aten::addcdiv_: the divisor has 2 zeros: 0/0 in 2 elements (nan)",
    ),
    "backward_in_model": (
        r"replayed the forward and the backward of Net from the parameters SGD\.step\(\)"
        r" began with, their ops observed",
        r"produced in the backward pass by aten::div, the gradient of aten::sqrt in <root Net>"
        r" at replays\.py:{line} in forward",
        "aten::div: the divisor has 128 zeros: x/0 in 128 elements (inf)",
    ),
}


@pytest.mark.parametrize("case", sorted(STEP_REPLAYS))
def test_an_optimizer_steps_replay_armed_from_the_debugger_live_and_from_the_core(
    debugger, tmp_path, case
):
    """`ovf break-on-nan --capture optimizer`: the step's event is replayed; the stop,
    `ovf status` and the core name the op and its line; step-into is for module events."""
    core = tmp_path / "core"
    out = debugger.run(
        [
            "ovf break-on-nan --capture optimizer",
            "run",
            "ovf status",
            "ovf step-into",
            debugger.gcore(core),
            "kill",
        ],
        program=[PYTHON, SCRIPT, case],
        env=clean_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"),
        cwd=TOP,
        timeout=300,
    )
    assert debugger.hits(out) == 1, out
    assert step_replay_block(case, "     ").search(out), out  # the stop summary
    assert step_replay_block(case, "  ").search(out), out  # ovf status
    assert "optimizer steps captured" in out, out
    assert (
        "ovf step-into: the value was written by an optimizer's step, not in a module's"
        " forward: nothing to step into" in out
    ), out
    post = debugger.run(["ovf status"], core=core, timeout=120)
    assert step_replay_block(case, "  ").search(post), post


def step_replay_block(case, prefix):
    with open(SCRIPT) as f:
        line = next(i for i, t in enumerate(f, 1) if t.rstrip().endswith(f"# made: {case}"))
    said, produced, why = STEP_REPLAYS[case]
    return re.compile(
        rf"\n{prefix}replay: {said} \(\d+\.\d\d s\)\n"
        rf"{prefix}  {produced.format(line=line)}\n"
        rf"{prefix}  why: {re.escape(why)}\n"
    )
