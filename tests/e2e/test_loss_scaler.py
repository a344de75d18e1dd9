"""GradScaler (torch.amp, CPU, float16 autocast) under ovf (scripts/amp_scaler.py).

A scaler makes infinities on purpose: a run whose first steps overflow and then
recover must run to its end in every mode; a run whose every step is skipped
(sqrt of an exact 0 in the loss) must stop when the scaler gives up, naming the
first skip's parameter and, under --ops --backward, the op that made the value,
its forward line and why, the same op and batch as the dispatch oracle. The
debuggers stop there too and show the scaler's history, live and from a core."""

import os
import re
import subprocess

import pytest
from harness import PACKAGE_PARENT, PYTHON, TOP, clean_env, run_bounded, run_python

SCRIPT = os.path.join(TOP, "tests", "e2e", "scripts", "amp_scaler.py")

def _line_of(marker):
    with open(SCRIPT) as f:
        return next(n for n, line in enumerate(f, 1) if marker in line)


BORN = f"amp_scaler.py:{_line_of('# born: collapse')} in pairwise_loss"
BACKWARD_LINE = f"amp_scaler.py:{_line_of('.backward()')}"
GAVE_UP = (
    "ovf: GradScaler skipped 17 steps in a row (batch 0 to 16): the gradients were non-finite"
    " each time, and its scale went from 65536 to 0.5, below the floor 1 (--scale-floor)"
)
UNSEEN = (
    "ovf: the first skip found 0.weight's gradient non-finite; the op that made it ran unseen:"
    " --ops --backward names it and its forward line"
)
MADE_BY = (
    "ovf: the first skip's first non-finite value (0.weight's gradient held one) was produced in"
    " the backward pass by aten::div, the gradient of aten::sqrt in no module at "
    + BORN
    + " (batch 0)"
)
WHY = "ovf: why: aten::div: the divisor has 2 zeros: x/0 in 2 elements (inf)"


def env():
    return clean_env(PYTHONPATH=PACKAGE_PARENT, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")


class Run(str):
    """A run's stdout+stderr, with its exit status."""

    returncode = None


def run(case, *options):
    done = subprocess.run(
        [PYTHON, "-m", "ovf", *options, SCRIPT, case],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        env=env(),
        cwd=TOP,
    )
    out = Run(done.stdout)
    out.returncode = done.returncode
    return out


def ovf_lines(out):
    return [line for line in out.splitlines() if line.startswith("ovf")]


@pytest.mark.parametrize("options", [(), ("--ops",), ("--ops", "--backward")])
@pytest.mark.parametrize("case", ["recover", "recover_bf16", "healthy"])
def test_a_scaler_that_recovers_or_never_skips_runs_to_the_end(case, options):
    out = run(case, *options)
    last = {
        "recover": "batch 13 loss -0.6645 scale 65536",
        "recover_bf16": "batch 11 loss -629.1450 scale 3.32307e+35",  # 9 skips, then trains
        "healthy": "batch 4 loss",
    }[case]
    assert last in out and out.returncode == 0, out
    assert ovf_lines(out) == [], out


def test_a_real_nan_after_skips_says_what_the_scaler_did_before():
    out = run("recover_then_nan")
    assert out.returncode == 1 and "batch 10 loss -0.6109 scale 131072" in out, out
    assert "Detected inf/nan during batch_number=11" in out, out
    assert "ovf: GradScaler had skipped 9 steps (the last at batch 8); its scale is 131072" in out


def test_the_oracle_agrees_on_the_op_and_batch_of_the_collapse():
    out = run_bounded([PYTHON, SCRIPT, "collapse", "--oracle"], timeout=300, env=env(), cwd=TOP)
    # the oracle names the line that called backward(); ovf the forward line of the op
    assert f"oracle: aten::div in (no module) at batch 0, {BACKWARD_LINE}" in out, out
    healthy = run_bounded([PYTHON, SCRIPT, "healthy", "--oracle"], timeout=300, env=env(), cwd=TOP)
    assert "oracle: None" in healthy, healthy


def test_a_collapsing_scale_stops_at_the_floor_and_names_the_parameter():
    out = run("collapse")
    assert out.returncode == 1 and "batch 15 loss -0.5840 scale 1" in out, out
    assert "batch 16 loss" not in out, out
    assert ovf_lines(out)[:2] == [GAVE_UP, UNSEEN], out
    assert "ovf.NonFiniteError" in out, out


def test_with_the_backward_watched_the_stop_names_the_op_line_and_why():
    out = run("collapse", "--ops", "--backward")
    assert out.returncode == 1, out
    assert ovf_lines(out)[:3] == [GAVE_UP, MADE_BY, WHY], out


def test_scaler_skips_stops_sooner_and_a_zero_floor_never_stops():
    out = run("collapse", "--scaler-skips", "3")
    assert out.returncode == 1 and "batch 3 loss" not in out, out
    assert ovf_lines(out)[0] == (
        "ovf: GradScaler skipped 3 steps in a row (batch 0 to 2): the gradients were non-finite"
        " each time, and its scale went from 65536 to 8192 (--scaler-skips 3)"
    ), out
    out = run("collapse", "--scale-floor", "0")
    assert out.returncode == 0 and "batch 19 loss -0.5840 scale 0.0625" in out, out


def test_bad_scaler_options_are_refused_in_one_line():
    out = run("collapse", "--scale-floor", "-1")
    assert out.returncode == 2, out
    assert out.strip() == "ovf: --scale-floor must be a finite number >= 0 (0: no floor); got -1.0"


def test_the_debuggers_stop_when_the_scaler_gives_up(debugger, tmp_path):
    core = tmp_path / "core"
    out = debugger.run(
        [
            "ovf break-on-nan --ops --backward",
            "run",
            "ovf status",
            "ovf frames 1",
            debugger.gcore(core),
            "kill",
        ],
        program=[PYTHON, SCRIPT, "collapse"],
        env=clean_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"),
        cwd=TOP,
        timeout=300,
    )
    assert debugger.hits(out) == 1 and "batch 15 loss" in out and "batch 16 loss" not in out, out
    assert "ovf: GradScaler gave up at batch 16" in out, out
    for line in (GAVE_UP, MADE_BY, WHY):
        assert "     " + line.removeprefix("ovf: ") in out, out
    assert (
        "loss scaler: GradScaler: 17 skipped steps in the ring (last at batch 16); scale now 0.5"
        in out
    )
    assert (
        "ovf: batch 16: GradScaler skipped the step (17 in a row): scale 1 -> 0.5;"
        " 0.weight's gradient non-finite" in out
    ), out
    assert re.search(r"stops on: nan, inf, producer_only, backward, scaler, scale floor 1", out), (
        out
    )
    if debugger.name == "gdb":  # an ELF core: python3 -m ovf.postmortem reads it too
        summary = run_python(["-m", "ovf.postmortem", str(core)]).stdout
        assert "loss scaler: GradScaler: 17 skipped steps in the ring (last at batch 16)" in summary
        assert "loss scaler gave up: " + GAVE_UP.removeprefix("ovf: ") in summary, summary
        assert "  " + MADE_BY.removeprefix("ovf: ") in summary, summary
    post = debugger.run(["ovf status"], core=core, timeout=120)
    assert "loss scaler: GradScaler: 17 skipped steps in the ring (last at batch 16)" in post, post
    assert "last event: scaler at record" in post, post


def test_the_debuggers_take_the_scaler_options_before_run_and_on_a_live_process(debugger):
    out = debugger.run(
        [
            "ovf break-on-nan --scaler-skips 3",
            "run",
            "ovf break-on-nan --scale-floor 0",
            "continue",
        ],
        program=[PYTHON, SCRIPT, "collapse"],
        env=clean_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"),
        cwd=TOP,
        timeout=300,
    )
    assert "ovf: armed: stop on nan and inf (where a value is produced); stop when a loss" in out
    assert "stop when a loss scaler gives up: below scale 1 or after 3 skips in a row" in out, out
    assert debugger.hits(out) == 1, out
    assert out.index("batch 1 loss") < out.index("ovf: GradScaler gave up at batch 2"), out
    assert out.index("ovf: GradScaler gave up at batch 2") < out.index("batch 2 loss"), out
    assert (
        "     GradScaler skipped 3 steps in a row (batch 0 to 2): the gradients were non-finite"
        " each time, and its scale went from 65536 to 8192 (--scaler-skips 3)" in out
    ), out
    # written into the live control block: no more stops, the run ends
    assert "a loss scaler that gives up does not stop (--scale-floor 0)" in out, out
    assert "batch 19 loss -0.5840 scale 0.0625" in out and debugger.exit_code(out) == 0, out
