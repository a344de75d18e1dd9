"""Op-level stops under real gdb and real LLDB (each test body runs under both): the
stop lands right after the op that produced the NaN/Inf, inside the forward (ovf
py-bt shows the line, ovf py-locals its live locals), names producer vs carrier;
backward NaNs are named by their forward op; an optimizer step that writes NaN/Inf
stops at the step; and the Python report says the same."""

import os
import re

import pytest
from harness import PACKAGE_PARENT, PYTHON, TOP, between, clean_env, run_python

CASES = os.path.join(TOP, "tests", "e2e", "scripts", "op_cases.py")


def born_line(case):
    with open(CASES) as f:
        return next(line.strip() for line in f if line.rstrip().endswith(f"# born: {case}"))


def stop(out):
    """The summary's first line: 'ovf: ...'."""
    return re.search(r"^ovf: (?:first )?non-finite value .*$", out, re.M).group(0)


@pytest.mark.parametrize(
    "case,title,local",
    [
        ("log", "non-finite value (nan) at batch 1, op aten::log in body, produced here", "moved"),
        (
            "div",
            "non-finite value (inf) at batch 1, op aten::div in body, produced here",
            "denominator",
        ),
        ("exp", "non-finite value (inf) at batch 1, op aten::exp in body, produced here", "scaled"),
    ],
)
def test_ops_stop_after_the_producing_op_with_its_line_and_locals(debugger, case, title, local):
    # the innermost Python frame evaluating: the forward (py-up would skip it
    # when the op was an operator such as `/`, with no built-in call frame)
    out = debugger.run(
        [
            "ovf break-on-nan --ops",
            "run",
            "ovf py-bt",
            debugger.cut(),
            "ovf py-locals",
            debugger.cut(),
            "kill",
        ],
        program=[PYTHON, CASES, case],
    )
    assert stop(out) == f"ovf: first {title}"
    assert debugger.hits(out) == 1
    backtrace = between(out, "Traceback (most recent call first):")
    # the program's innermost frame is the forward, at the op's line
    frames = re.findall(
        r'File "([^"]+)", line \d+, in (\w+)    <- the program\'s code.*\n\s+(.*)', backtrace
    )
    assert frames[0] == (CASES, "forward", born_line(case)), backtrace
    locals_text = between(out, "ovf: locals of forward")
    # the forward's local the op was given (its result is not assigned yet): a tensor with
    # its statistics; the last line says why the op made the value
    assert re.search(
        rf"^\d\.\d\de[+-]\d\d \d\.\d\de[+-]\d\d {local}: Tensor float32\[[0-9, ]+\] cpu$",
        locals_text,
        re.M,
    ), locals_text
    assert locals_text.rstrip().splitlines()[-1].startswith("ovf: why: aten::"), locals_text


def test_multihead_attention_functional_out_proj_is_seen(debugger):
    # nn.MultiheadAttention runs its projections functionally (out_proj is not
    # called as a module): only the op observer sees inside it.
    out = debugger.run(
        ["ovf break-on-nan --ops", "run", "ovf py-bt", debugger.cut(), "kill"],
        program=[PYTHON, CASES, "mha"],
    )
    title = stop(out)
    assert re.fullmatch(
        r"ovf: first non-finite value \((nan|inf)\) at batch 1, op aten::bmm in body\.attn, "
        r"produced here",
        title,
    ), title
    assert born_line("mha") in between(out, "Traceback (most recent call first):")


def test_carriers_are_skipped_by_default_and_shown_with_carriers(debugger):
    out = debugger.run(
        ["ovf break-on-nan --ops", "run", "continue", "kill"], program=[PYTHON, CASES, "log"]
    )
    # after the log, the next producer is the log of the next batch: carriers in between do not stop
    stops = re.findall(
        r"^ovf: (?:first )?non-finite value \((\w+)\) at batch (\d+), op (\S+) in (\S+), (.*)$",
        out,
        re.M,
    )
    assert stops == [
        ("nan", "1", "aten::log", "body", "produced here"),
        ("nan", "2", "aten::log", "body", "produced here"),
    ]
    out = debugger.run(
        ["ovf break-on-nan --ops --carriers", "run", "continue", "kill"],
        program=[PYTHON, CASES, "log"],
    )
    stops = re.findall(
        r"^ovf: (?:first )?non-finite value \(\w+\) at batch \d+, op (\S+) in (\S+), (.*)$",
        out,
        re.M,
    )
    assert stops == [("aten::log", "body", "produced here"), ("aten::mul", "body", "carried in")]


def test_backward_nan_is_named_by_its_forward_op(debugger):
    out = debugger.run(
        ["ovf break-on-nan --backward", "run", "ovf py-bt", debugger.cut(), "kill"],
        program=[PYTHON, CASES, "sqrt"],
    )
    assert re.search(
        r"^ovf: first non-finite value \(inf\) in the backward pass at batch 1, op aten::\w+ in"
        r" body, "
        r"produced here$",
        out,
        re.M,
    ), out
    # the forward line it differentiates, noted when the forward op ran
    assert re.search(
        r"grad = aten::\w+ for aten::sqrt in body at op_cases\.py:56 in forward \(produced here\)"
        r"    <- this op$",
        out,
        re.M,
    ), out
    assert "loss.backward()" in between(out, "Traceback (most recent call first):")


def test_optimizer_step_that_writes_nan_stops_at_the_step(debugger):
    out = debugger.run(
        ["ovf break-on-nan", "run", "ovf py-bt", debugger.cut(), "kill"],
        program=[PYTHON, CASES, "step"],
    )
    assert (
        "ovf: first non-finite value (nan and inf) at batch 0" in out
        or "ovf: first non-finite value (inf) at batch 0" in out
        or "ovf: first non-finite value (nan) at batch 0" in out
    ), out
    assert re.search(
        r"^     optimizer\.step \(SGD\): body\.proj\.(weight|bias) abs max (inf|nan)", out, re.M
    ), out
    assert born_line("step") in between(out, "Traceback (most recent call first):")


@pytest.mark.parametrize(
    "case,flag,line",
    [
        (
            "log",
            "--ops",
            (
                "ovf: the first non-finite value was produced by aten::log in body at"
                " op_cases.py:21 in forward (batch 1)"
            ),
        ),
        (
            "sqrt",
            "--backward",
            (
                "ovf: the first non-finite value was produced in the backward pass by aten::div, "
                "the gradient of aten::sqrt in body at op_cases.py:56 in forward (batch 1)"
            ),
        ),
        (
            "step",
            None,
            (
                "ovf: the first non-finite value was written by optimizer.step (SGD) into"
                " body.proj.weight (after batch 0)"
            ),
        ),
    ],
)
def test_the_python_report_names_the_same_origin(case, flag, line):
    out = run_python(
        ["-m", "ovf", *([flag] if flag else []), CASES, case],
        env=clean_env(PYTHONPATH=PACKAGE_PARENT),
    )
    assert out.returncode == 1, out.stderr
    assert line in out.stdout.splitlines()
