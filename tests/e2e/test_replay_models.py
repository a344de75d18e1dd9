"""The replay at a module event on models nobody here wrote, at their real configs
(scripts/replay_models.py: torchvision's resnet18 and vit_b_16 and a transformers Llama,
each in float16, and a minGPT-style decoder's left padding): module mode sees the module;
the replay names the op, module, line and batch that --ops names and that the
dispatch-mode oracle names, in Python mode, and in gdb's and LLDB's stop summary;
`ovf step-into` reaches the producing line with its locals."""

import functools
import importlib.metadata
import importlib.util
import os
import re

import pytest
from harness import PACKAGE_PARENT, PYTHON, TOP, clean_env, run_bounded

SCRIPT = os.path.join(TOP, "tests", "e2e", "scripts", "replay_models.py")
ENV = clean_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
TORCH = importlib.metadata.version("torch")  # the interpreter under test's (it runs pytest)
# What each case's replay says (a run of the case gives the rest): the root it replays,
# and the why-line and float64 verdict of the op it names.
CASES = {
    "resnet18_fp16": (
        "ResNet",
        "aten::batch_norm overflow: results exceed float16's max 6.55e+04 (largest input abs"
        " max 4.58e+02)",
        "finite in float64 (abs max 6.87e+04): float16's range or precision here",
    ),
    "vit_b_16_fp16": (
        "VisionTransformer",
        "aten::linear overflow: results exceed float16's max 6.55e+04 (largest input abs max"
        " 1.30e+03)",
        # torchvision 0.21 (torch 2.6) draws other initial weights than 0.29 (torch 2.14)
        "finite in float64 (abs max {}): float16's range or precision here".format(
            "7.74e+04" if TORCH.startswith("2.6.") else "6.73e+04"
        ),
    ),
    "nanogpt_left_padding": (
        "GPT",
        "aten::softmax of rows that are -inf throughout (masked whole): 32 nan",
        "non-finite in float64 too (32 nan and 0 inf): the math itself on these inputs, not this"
        " op's precision",
    ),
    "llama_fp16": (
        "LlamaForCausalLM",
        "aten::mul overflow: results exceed float16's max 6.55e+04 (largest input abs max"
        " 3.64e+02)",
        "finite in float64 (abs max 7.50e+04): float16's range or precision here",
    ),
}
# ovf's RecordFunction sees the op the program called, the oracle what it runs below
# autograd (batch norm's kernel: its name differs between torch versions).
SAME_OP = {
    "aten::linear": ("aten::addmm",),
    "aten::softmax": ("aten::_softmax",),
    "aten::batch_norm": ("aten::native_batch_norm", "aten::_native_batch_norm_legit_no_training"),
}
# The trixie leg has torchvision, not transformers: its Llama case is the main leg's.
without_transformers = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None,
    reason="transformers is not installed here (the trixie leg): the main leg runs it",
)
HERE = [pytest.param(c, marks=without_transformers) if c == "llama_fp16" else c for c in CASES]
PRODUCED = re.compile(
    r"^ovf: the first non-finite value was produced by (\S+) in (\S+) at (\S+:\d+) in \S+"
    r" \(batch (\d+)\)$",
    re.M,
)


def run(case, *ovf_args):
    env = {**ENV, "PYTHONPATH": PACKAGE_PARENT}
    return run_bounded(
        [PYTHON, "-m", "ovf", *ovf_args, SCRIPT, case], timeout=300, env=env, cwd=TOP
    )


@functools.cache
def oracle(case):
    """(op, module, batch, file:line) the dispatch-mode oracle names."""
    out = run_bounded([PYTHON, SCRIPT, case, "--oracle"], timeout=300, env=ENV, cwd=TOP)
    m = re.search(r"^oracle: (\S+) in (\S+) at batch (\d+), (\S+:\d+)$", out, re.M)
    assert m, out
    return m.group(1), m.group(2), int(m.group(3)), m.group(4)


def produced(out):
    """(op, module, batch, file:line) of the report's 'produced by' line."""
    m = PRODUCED.search(out)
    assert m, out
    return m.group(1), m.group(2), int(m.group(4)), m.group(3)


@pytest.mark.parametrize("case", HERE)
def test_module_mode_replays_to_the_op_ops_and_the_oracle_name(case):
    root, why, verdict = CASES[case]
    truth = oracle(case)
    out = run(case)
    assert re.search(rf"^ovf: replayed the forward of {root} with its ops observed", out, re.M)
    op, module, batch, line = produced(out)
    assert truth[0] in SAME_OP.get(op, (op,)), f"{out}\noracle: {truth}"
    assert (module, batch, line) == truth[1:], f"{out}\noracle: {truth}"
    assert f"\novf: why: {why}\n" in out, out
    assert f"\novf: verdict: {verdict}\n" in out, out
    assert f"batch {batch} " not in out, out  # the run stopped in the batch it names
    ops = run(case, "--ops")
    assert "replayed" not in ops, ops  # --ops names the op itself
    assert PRODUCED.search(ops).group(0) == PRODUCED.search(out).group(0), ops
    assert f"\novf: why: {why}\n" in ops, ops


@pytest.mark.parametrize("case", HERE)
def test_the_debuggers_stop_summary_names_the_replayed_op(debugger, case):
    root, why, verdict = CASES[case]
    op, module, batch, line = produced(run(case))
    out = debugger.run(
        ["ovf break-on-nan", "run", "ovf status", "kill"],
        program=[PYTHON, SCRIPT, case],
        env=ENV,
        cwd=TOP,
        timeout=300,
    )
    assert debugger.hits(out) == 1, out
    said = rf"replay: replayed the forward of {root} with its ops observed \(\d+\.\d\d s\)"
    where = rf"produced by {re.escape(op)} in {re.escape(module)} at {re.escape(line)} in forward"
    block = (
        rf"\n(?P<p> +){said}\n(?P=p)  {where}\n"
        rf"(?P=p)  why: {re.escape(why)}\n(?P=p)  verdict: {re.escape(verdict)}\n"
    )
    assert len(re.findall(block, out)) == 2, out  # the stop summary and ovf status
    assert f"batch {batch} " not in out.split("ovf break-on-nan")[-1], out


@without_transformers
def test_step_into_the_llama_mlp_stops_at_the_producing_line_with_its_locals(debugger):
    out = debugger.run(
        ["ovf break-on-nan", "run", "ovf step-into", "ovf py-locals", "continue", "kill"],
        program=[PYTHON, SCRIPT, "llama_fp16"],
        env=ENV,
        cwd=TOP,
        timeout=300,
    )
    _, module, _, line = produced(run("llama_fp16"))
    stops = re.findall(r"^ovf: step: (.*)$", out, re.M)
    assert stops == [f"{line} in forward ({module}, call 1 of the replayed step)"], out
    assert "<- aten::mul here made the value" in out, out
    # The live locals of LlamaMLP.forward: its input, finite, in float16.
    assert re.search(r"\n\S+ \S+ x: Tensor float16\[2, 8, 32\] cpu\n", out), out
    assert "ovf: the replay ended: back at the event" in out, out
