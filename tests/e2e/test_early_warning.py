"""The early warning (--early): a stop before the first inf/nan, on runs that head for one
(scripts/early_warning.py: examples/diverge_lr.py as it is, a float16 regression whose
SGD step overshoots), checked against the dispatch oracle's first non-finite op; none on
healthy real code (the tests' GPT trained by its own loop, a transformers Trainer run).
Python mode raises EarlyWarningError; gdb and LLDB stop there, live and from cores."""

import importlib.util
import os
import re
import subprocess

import pytest
from harness import PACKAGE_PARENT, PYTHON, TOP, clean_env, run_bounded, run_python

SCRIPTS = os.path.join(TOP, "tests", "e2e", "scripts")
SCRIPT = os.path.join(SCRIPTS, "early_warning.py")

# diverge_lr at --early's defaults: SGD at lr 200 moves the weights by 4x their size at
# once (|dw|/|w| estimated from up to 4096 elements of each parameter)
RATIO_LINE = (
    "ovf: early warning at batch 0: SGD.step() changed the weights by 3.95 times their size"
    " (|dw|/|w| over its parameters, above 1: --update-ratio); the largest change:"
    " decoder.block.0.layer.0.SelfAttention.q.weight (|dw|/|w| = 126)"
)
# ... and by the growth rule alone: the residual stream grows x2e7 a batch. The run amplifies
# the last bits in which torch 2.14's and 2.6's float32 kernels differ: 1.11e+12 / 1.1e+12.
GROWTH_LINE = re.escape(
    "ovf: early warning at batch 2: decoder.block.0.layer.2.DenseReluDense.wo (Linear)'s output"
    " abs max grew from 5.15e+04 to 1.1@e+12 in one batch (x2.1@e+07); at that growth it passes"
    " float32's largest value 3.40282e+38 in 4 batches (batch 6)"
).replace("@", r"\d?")
# fp16_growth: the prediction triples each batch; float16 overflows in batch 11, as predicted
FP16_LINE = (
    "ovf: early warning at batch 7: 0 (Linear)'s output abs max grew from 776 to 2.33e+03 in"
    " one batch (x3.01); at that growth it passes float16's largest value 65504 in 4 batches"
    " (batch 11)"
)


def env():
    return clean_env(PYTHONPATH=PACKAGE_PARENT, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")


def run(script, *args, options=("--early",)):
    done = subprocess.run(
        [PYTHON, "-m", "ovf", *options, script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
        env=env(),
        cwd=TOP,
    )
    return done.returncode, done.stdout


def early_lines(out):
    return [line for line in out.splitlines() if line.startswith("ovf: early warning")]


def oracle(case):
    out = run_bounded([PYTHON, SCRIPT, case, "--oracle"], timeout=600, env=env(), cwd=TOP)
    return out.splitlines()[-1]


def test_the_oracle_places_the_first_non_finite_values_after_the_warnings():
    # diverge_lr: the layer norm's variance overflows in batch 4 (warned at 0, or 2);
    # fp16_growth: the prediction in batch 11 (warned at 7)
    # (torch 2.6 meets it one layer norm later, in the same batch)
    assert re.fullmatch(
        r"oracle: aten::pow in encoder\.block\.\d\.layer\.\d\.layer_norm at batch 4,"
        r" diverge_lr\.py:48",
        oracle("diverge_lr"),
    )
    assert oracle("fp16_growth") == "oracle: aten::mm in 0 at batch 11, early_warning.py:31"


def test_a_step_that_moves_the_weights_by_their_size_stops_at_once():
    status, out = run(SCRIPT, "diverge_lr")
    assert status == 1 and "batch 0: loss 6.462" in out and "batch 1: loss" not in out, out
    assert early_lines(out) == ["ovf: early warning during batch_number=0", RATIO_LINE], out
    assert "ovf.EarlyWarningError: " + RATIO_LINE in out, out


@pytest.mark.parametrize(
    "case, pattern, last",
    [
        ("diverge_lr", GROWTH_LINE, "batch 1: loss 16.36"),
        ("fp16_growth", re.escape(FP16_LINE), "batch 6 prediction -776.5"),
    ],
)
def test_growth_toward_the_dtypes_limit_stops_batches_before_it(case, pattern, last):
    status, out = run(SCRIPT, case, options=("--early", "--update-ratio", "0"))
    assert status == 1 and last in out, out
    (line,) = early_lines(out)[1:]
    assert re.fullmatch(pattern, line), out
    assert "ovf.EarlyWarningError: " + line in out, out


def test_a_shorter_horizon_waits_for_nearer_trouble():
    status, out = run(
        SCRIPT, "fp16_growth", options=("--early", "--update-ratio", "0", "--early-horizon", "2")
    )
    assert status == 1 and "batch 8 prediction -6992" in out, out
    assert early_lines(out)[1] == (
        "ovf: early warning at batch 9: 0 (Linear)'s output abs max grew from 6.99e+03 to"
        " 2.1e+04 in one batch (x3); at that growth it passes float16's largest value 65504 in"
        " 2 batches (batch 11)"
    ), out


def test_a_warning_the_filters_drop_leaves_the_next_its_chance():
    status, out = run(
        SCRIPT, "fp16_growth", options=("--early", "--update-ratio", "0", "--after-batch", "8")
    )
    assert status == 1 and "batch 7 prediction 2334" in out, out
    assert early_lines(out)[1] == (
        "ovf: early warning at batch 8: 0 (Linear)'s output abs max grew from 2.33e+03 to"
        " 6.99e+03 in one batch (x3); at that growth it passes float16's largest value 65504 in"
        " 3 batches (batch 11)"
    ), out


def test_in_warn_mode_the_warning_comes_first_and_the_nan_is_still_reported():
    status, out = run(
        SCRIPT, "fp16_growth", options=("--early", "--update-ratio", "0", "--on-nan", "warn")
    )
    assert status == 1, out  # a NaN was seen: never 0
    assert out.index(FP16_LINE) < out.index("batch 7 prediction 2334"), out
    assert out.index("batch 10 prediction") < out.index("Detected inf/nan during batch_number=11")


@pytest.mark.parametrize(
    "script, args, end",
    [
        ("real_models.py", ["gpt_healthy"], "batch 2 loss"),
        pytest.param(
            "hf_trainer.py",
            ["--blow-up-at", "1000", "--steps", "12"],
            "training finished",
            marks=pytest.mark.skipif(
                importlib.util.find_spec("transformers") is None,
                reason="transformers is not installed here (the trixie leg): the main leg runs it",
            ),
        ),
    ],
)
def test_healthy_real_code_is_never_warned(script, args, end):
    status, out = run(os.path.join(SCRIPTS, script), *args)
    assert status == 0 and end in out, out
    assert "ovf" not in out.replace("ovf.", ""), out


@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None,
    reason="transformers is not installed here (the trixie leg): the main leg runs it",
)
def test_a_trainer_whose_learning_rate_wrecks_the_model_is_warned_at_its_first_step():
    # transformers' Trainer steps AdamW through accelerate's wrapper: the step hook sees it
    status, out = run(
        os.path.join(SCRIPTS, "hf_trainer.py"),
        *("--blow-up-at", "1000", "--steps", "3", "--learning-rate", "1"),
    )
    assert status == 1 and "training finished" not in out, out
    assert early_lines(out)[1] == (
        "ovf: early warning at batch 0: AdamW.step() changed the weights by 13.1 times their"
        " size (|dw|/|w| over its parameters, above 1: --update-ratio); the largest change:"
        " transformer.h.0.mlp.c_proj.weight (|dw|/|w| = 101)"
    ), out


@pytest.mark.parametrize(
    "options, message",
    [
        (
            ["--early", "--early-horizon", "0"],
            "ovf: --early-horizon must be a number of batches >= 1; got 0",
        ),
        (
            ["--early", "--update-ratio", "-1"],
            "ovf: --update-ratio must be a finite number >= 0 (0: steps not measured); got -1.0",
        ),
        (
            ["--early-horizon", "3"],
            "ovf: --early-horizon and --update-ratio tune --early: add --early",
        ),
    ],
)
def test_bad_early_options_are_refused_in_one_line(options, message):
    status, out = run(SCRIPT, "fp16_growth", options=options)
    assert status == 2 and out.strip() == message, out


def test_a_bad_ovf_early_variable_is_refused_in_one_line():
    done = subprocess.run(
        [PYTHON, "-m", "ovf", SCRIPT, "fp16_growth"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**env(), "OVF_EARLY": "yes"},
        cwd=TOP,
    )
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.strip() == (
        "ovf: environment variable OVF_EARLY must be 1 (on) or 0 (off); got 'yes'"
    )


def test_the_debuggers_stop_at_the_warning_then_at_the_inf(debugger, tmp_path):
    core = tmp_path / "core"
    out = debugger.run(
        [
            "ovf break-on-nan --early --update-ratio 0",
            "run",
            "ovf status",
            "ovf frames 1",
            debugger.gcore(core),
            "continue",
            "kill",
        ],
        program=[PYTHON, SCRIPT, "fp16_growth"],
        env=clean_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"),
        cwd=TOP,
        timeout=300,
    )
    assert (
        "stop early: a module's output that passes its dtype's largest value within 4 batches"
        " at its growth" in out
    ), out
    assert debugger.hits(out) == 2, out
    stop = out.index("ovf: early warning at batch 7, before any inf/nan")
    assert out.index("batch 6 prediction") < stop < out.index("batch 7 prediction"), out
    assert "     " + FP16_LINE.split(": ", 2)[2] in out, out  # the summary's second line
    assert (
        "stops on: nan, inf, producer_only, scaler, early, scale floor 1, growth within 4 batches"
        in out
    ), out
    assert "\n" + FP16_LINE.removeprefix("ovf: ") + "\n" in out, out  # ovf status
    assert "\n" + FP16_LINE + "\nLast 1 forward frames:" in out, out  # a note of ovf frames
    assert out.index("batch 10 prediction") < out.index("first non-finite value (inf) at batch 11")
    if debugger.name == "gdb":  # an ELF core: python3 -m ovf.postmortem reads it too
        summary = run_python(["-m", "ovf.postmortem", str(core)]).stdout
        assert FP16_LINE.removeprefix("ovf: ") in summary, summary
    post = debugger.run(["ovf status"], core=core, timeout=120)
    assert FP16_LINE.removeprefix("ovf: ") in post, post
    assert "last event: early at record" in post, post
