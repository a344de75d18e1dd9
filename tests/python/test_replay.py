"""The replay at a module event (module mode, no --ops): the batch root's forward runs
again inside the step with its ops observed, and the report names the op that made the
first NaN/Inf exactly as --ops does -- or says in one line why it did not run
(tests/python/scripts/replays.py; each case's comment says what it does). Nothing of
the replay reaches the run: its state is bit for bit what --no-replay leaves."""

import os
import re
import subprocess

import pytest
from build_paths import PACKAGE_PARENT, PYTHON

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts", "replays.py")
ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("OVF_")},
    "PYTHONPATH": PACKAGE_PARENT,
    "OMP_NUM_THREADS": "1",
}
REPLAYED = re.compile(r"ovf: replayed the forward of Net with its ops observed \(\d+\.\d\d s\)")


def run_ovf(*args, stdin=""):
    return subprocess.run(
        [PYTHON, "-m", "ovf", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
        input=stdin,
    )


def born(case):
    with open(SCRIPT) as f:
        return next(i for i, text in enumerate(f, 1) if text.rstrip().endswith(f"# made: {case}"))


def ovf_lines(out):
    return [line for line in out.splitlines() if line.startswith("ovf: ")]


@pytest.mark.parametrize("case", ["dropout_divides", "overflow"])
def test_module_mode_names_the_op_as_ops_does(case):
    module_mode, ops = run_ovf(SCRIPT, case), run_ovf("--ops", SCRIPT, case)
    assert (module_mode.returncode, ops.returncode) == (1, 1), module_mode.stderr
    replay = ovf_lines(module_mode.stdout)
    assert REPLAYED.fullmatch(replay[0]), module_mode.stdout
    # what --ops says of the op, word for word: op, module, line, why (how many of the
    # divisor's values the step's dropout mask made 0: the generator's state at the
    # step's start came back), verdict
    assert replay[1:] == ovf_lines(ops.stdout), (module_mode.stdout, ops.stdout)
    op = {"dropout_divides": "aten::div", "overflow": "aten::mul"}[case]
    assert replay[1] == (
        f"ovf: the first non-finite value was produced by {op} in block at"
        f" replays.py:{born(case)} in forward (batch 1)"
    )
    assert module_mode.stdout.count("Detected inf/nan during batch_number=1") == 1


@pytest.mark.parametrize("case", ["dropout_divides", "overflow"])
def test_the_runs_state_is_bit_for_bit_what_no_replay_leaves(case):
    # warn goes on training: parameters, gradients, BatchNorm's running statistics,
    # the momentum buffers and the generator's state after three steps
    replayed, plain = (
        run_ovf("--on-nan", "warn", *flag, SCRIPT, case) for flag in ([], ["--no-replay"])
    )
    assert REPLAYED.search(replayed.stdout), replayed.stdout
    assert "replay" not in plain.stdout, plain.stdout
    digests = [re.findall(r"^state (\w+)$", p.stdout, re.M) for p in (replayed, plain)]
    assert len(digests[0]) == 1 and digests[0] == digests[1], (replayed.stdout, plain.stdout)
    assert (replayed.returncode, plain.returncode) == (1, 1)  # warn: a NaN was reported


NOT_REPLAYED = {
    "input_in_place": "not replayed: the step changed input[0] in place since its forward began",
    "loss_module": (
        "not replayed: the event came outside the forward of Net in batch 1 (a module called"
        " after it, or judged after it returned); ovf replays the model's forward"
    ),
    "sync_batchnorm": (
        "not replayed: the model's forward talks to the other ranks (SyncBatchNorm): a replay"
        " on this rank alone would wait for them"
    ),
    "data_nan": (
        "not replayed: the model's input[0] held the non-finite value already (it came from the"
        " data or from code before the model)"
    ),
}


@pytest.mark.parametrize("case", sorted(NOT_REPLAYED))
def test_a_step_that_would_not_replay_the_same_values_says_why(case):
    p = run_ovf(SCRIPT, case)
    assert p.returncode == 1, p.stderr
    assert ovf_lines(p.stdout) == [f"ovf: {NOT_REPLAYED[case]}"], p.stdout


NO_OP_NAMED = {
    # Block makes inf on the run's second call only: the replay (its third) does not;
    # the first module whose output statistics differ from the run's records is named
    "outside_noise": (
        r"ovf: the replay of the forward of Net made no non-finite value \(\d+\.\d\d s\): it"
        r" diverged from the run at block \(first difference: output \+inf count 64 in the"
        r" run, 0 in the replay\): nondeterministic kernels, state the step changes, or a"
        r" hardware fault"
    ),
    # Block scales by 1e30 on the run's call only (finite): Scale overflowed after it in
    # the run, not in the replay; the divergence is at Block, not at the event's module
    "upstream_noise": (
        r"ovf: the replay of the forward of Net made no non-finite value \(\d+\.\d\d s\): it"
        r" diverged from the run at block \(first difference: output abs max 2\.69e\+30 in"
        r" the run, 2\.69e\+00 in the replay\): nondeterministic kernels, state the step"
        r" changes, or a hardware fault"
    ),
    # the other ranks are not replaying: an all_reduce would wait for them forever
    "all_reduce_in_forward": (
        r"ovf: the replay of the forward of Net stopped at torch\.distributed\.all_reduce, which"
        r" the other ranks would not join, before any op made a non-finite value"
        r" \(\d+\.\d\d s\)"
    ),
    # the same through the dispatcher's op, which no torch.distributed attribute reaches
    "functional_all_reduce_in_forward": (
        r"ovf: the replay of the forward of Net stopped at"
        r" torch\.ops\._c10d_functional\.all_reduce, which the other ranks would not join,"
        r" before any op made a non-finite value"
        r" \(\d+\.\d\d s\)"
    ),
}


@pytest.mark.parametrize("case", sorted(NO_OP_NAMED))
def test_a_replay_that_names_no_op_says_why_in_one_line(case):
    p = run_ovf(SCRIPT, case)
    assert p.returncode == 1, p.stderr
    lines = ovf_lines(p.stdout)
    assert len(lines) == 1 and re.fullmatch(NO_OP_NAMED[case], lines[0]), p.stdout


def test_a_replay_that_left_the_run_before_its_op_says_so():
    """Block's output is 1e30 times larger in the run than in the replay; Scale, called
    twice, overflows in its first call in the run and in its second in the replay: the
    op is named, with the module where the replay left the run before it."""
    p = run_ovf(SCRIPT, "noise_then_overflow")
    assert p.returncode == 1, p.stderr
    lines = ovf_lines(p.stdout)
    assert re.fullmatch(
        r"ovf: replayed the forward of Net with its ops observed \(\d+\.\d\d s\); but it"
        r" diverged from the run at block \(first difference: output abs max 2\.69e\+30 in the"
        r" run, 2\.69e\+00 in the replay\) before that op: nondeterministic kernels, state the"
        r" step changes, or a hardware fault",
        lines[0],
    ), p.stdout
    assert lines[1] == (
        "ovf: the first non-finite value was produced by aten::mul in scale at"
        f" replays.py:{born('second_call')} in forward (batch 1)"
    ), p.stdout


def test_no_replay_leaves_module_mode_as_it_was():
    p = run_ovf("--no-replay", SCRIPT, "overflow")
    assert p.returncode == 1 and ovf_lines(p.stdout) == [], p.stdout


def test_on_nan_pdb_stops_at_the_ops_line_in_the_same_call_then_raises():
    # Scale runs twice a step; its second call passes float32's max: pdb stops in that
    # call, before the multiplication, with its input at hand; `n` runs the line
    line = born("second_call")
    p = run_ovf(
        "--on-nan",
        "pdb",
        SCRIPT,
        "second_call",
        stdin="p bool(x.abs().max() > 1e20)\nn\np bool(big.isinf().any())\nc\n",
    )
    assert p.returncode == 1, p.stderr
    out = p.stdout
    said = (
        f"ovf: pdb at replays.py:{line} in forward, in call 2 of scale in the step replayed once"
        " more, before aten::mul runs; 'c' ends the replay, then the run raises as it would"
        " have\n"
    )
    assert said in out, out
    after = out[out.index(said) + len(said) :]
    assert after.startswith(f"> {SCRIPT}({line})forward()\n-> big = x * 1e30"), after
    # the second call's input (~1e30), then the line's result: inf
    assert "(Pdb) True\n(Pdb) > " in after and f"({line + 1})forward()" in after, after
    assert after.count("(Pdb) True\n") == 2, after
    # then the run goes on as without pdb: the report, then the raise
    assert after.index("Detected inf/nan during batch_number=1") > after.index("(Pdb) True")
    assert p.stderr.rstrip().splitlines()[-1].startswith("ovf.NonFiniteError: "), p.stderr


def test_on_nan_pdb_without_the_replay_is_refused_in_one_line():
    p = run_ovf("--on-nan", "pdb", "--no-replay", SCRIPT, "overflow")
    assert (p.returncode, p.stdout) == (2, ""), p.stdout
    assert p.stderr == (
        "ovf: --on-nan pdb stops in the replay of the failing step: drop --no-replay\n"
    ), p.stderr


def test_on_nan_pdb_in_the_explicit_api_is_refused_in_one_line():
    code = "import torch, ovf\novf.DebugUnderflowOverflow(torch.nn.Linear(2, 2), on_nan='pdb')"
    p = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=120, env=ENV)
    assert p.returncode == 1, p.stderr
    assert p.stderr.rstrip().splitlines()[-1] == (
        "ovf._options.OptionError: ovf: on_nan pdb stops in the replay of the failing step,"
        " which is off here (--no-replay, or DebugUnderflowOverflow(model), which keeps the"
        " reference's behaviour): use python3 -m ovf --on-nan pdb or"
        " ovf.enable(on_nan='pdb')"
    ), p.stderr


# An optimizer's step that writes NaN/Inf into the weights (Adam with eps=0 and a
# gradient of exact zeros: 0/0) is seen after it returned, its starting point gone.
REPLAYED_STEP = re.compile(
    r"ovf: replayed Adam\.step\(\) from the parameters and state it began with \(\d+\.\d\d s\)"
)
WRITTEN = (
    "ovf: the first non-finite value was written by optimizer.step (Adam) into gate (after batch 1)"
)


def test_with_the_capture_an_optimizer_step_is_replayed_and_names_its_op_as_ops_does():
    captured = run_ovf("--capture", "optimizer", SCRIPT, "adam_eps0")
    ops = run_ovf("--ops", SCRIPT, "adam_eps0")
    assert (captured.returncode, ops.returncode) == (1, 1), captured.stderr
    lines = ovf_lines(captured.stdout)
    assert lines[0] == WRITTEN, captured.stdout
    assert REPLAYED_STEP.fullmatch(lines[1]), captured.stdout
    # the op, its line (the user's opt.step()), why and verdict, word for word as --ops
    assert lines[2:] == ovf_lines(ops.stdout), (captured.stdout, ops.stdout)
    assert lines[2] == (
        "ovf: the first non-finite value was produced by aten::addcdiv_ in no module at"
        f" replays.py:{born('adam_eps0')} in <module> (batch 1)"
    ), captured.stdout


def test_the_replay_of_a_step_that_talks_to_the_other_ranks_ends_before_it_does():
    # AgreedAdam all-reduces a count of non-finite gradients inside its step: the replay,
    # on this rank alone, stops there instead of sending it
    p = run_ovf("--capture", "optimizer", SCRIPT, "agreed_adam_eps0")
    assert p.returncode == 1, p.stderr
    lines = ovf_lines(p.stdout)
    assert lines[0] == WRITTEN.replace("(Adam)", "(AgreedAdam)"), p.stdout
    assert len(lines) == 2 and re.fullmatch(
        r"ovf: the replay of AgreedAdam\.step\(\) stopped at torch\.distributed\.all_reduce,"
        r" which the other ranks would not join, before any op made a non-finite value"
        r" \(\d+\.\d\d s\)",
        lines[1],
    ), p.stdout


def test_without_the_capture_an_optimizer_step_says_how_to_replay_it():
    p = run_ovf(SCRIPT, "adam_eps0")
    assert p.returncode == 1, p.stderr
    assert ovf_lines(p.stdout) == [
        WRITTEN,
        "ovf: not replayed: the value was written by Adam.step(), whose parameters and state"
        " before it are gone (--capture optimizer keeps a copy of them before each step to"
        " replay it)",
    ], p.stdout


# Module mode sees no backward op: a NaN the backward makes inside the model (sqrt's
# gradient at 0) shows when SGD's step writes it into the weights.
REPLAYED_BACKWARD = re.compile(
    r"ovf: replayed the forward and the backward of Net from the parameters SGD\.step\(\)"
    r" began with, their ops observed \(\d+\.\d\d s\)"
)
READ_NAN = "not replayed: SGD.step() read a non-finite gradient of block.fc.weight, made"


def test_with_the_capture_a_backward_nan_is_replayed_and_named_as_ops_backward_does():
    captured = run_ovf("--capture", "optimizer", SCRIPT, "backward_in_model")
    ops = run_ovf("--ops", "--backward", SCRIPT, "backward_in_model")
    assert (captured.returncode, ops.returncode) == (1, 1), captured.stderr
    lines = ovf_lines(captured.stdout)
    assert lines[0].startswith(
        "ovf: the first non-finite value was written by optimizer.step (SGD) into"
        " block.fc.weight (after batch 1) from its gradient"
    ), captured.stdout
    assert REPLAYED_BACKWARD.fullmatch(lines[1]), captured.stdout
    assert lines[2:] == ovf_lines(ops.stdout), (captured.stdout, ops.stdout)
    assert lines[2] == (
        "ovf: the first non-finite value was produced in the backward pass by aten::div, the"
        " gradient of aten::sqrt in <root Net> at"
        f" replays.py:{born('backward_in_model')} in forward (batch 1)"
    ), captured.stdout


def test_a_backward_replay_whose_forward_left_the_run_says_where():
    """Block doubles its output and takes sqrt's gradient at 0 on the run's call only:
    the replayed forward (its third call) makes half the values and a finite backward;
    the first module whose statistics differ from the run's is named."""
    p = run_ovf("--capture", "optimizer", SCRIPT, "backward_noise")
    assert p.returncode == 1, p.stderr
    assert re.fullmatch(
        r"ovf: the replay of the forward and the backward of Net made no non-finite value"
        r" \(\d+\.\d\d s\): it diverged from the run at block \(first difference: output abs"
        r" max 5\.38e\+00 in the run, 2\.69e\+00 in the replay\): nondeterministic kernels,"
        r" state the step changes, or a hardware fault",
        ovf_lines(p.stdout)[1],
    ), p.stdout


@pytest.mark.parametrize(
    "flags, said",
    [
        (
            [],
            READ_NAN + " before the step (by the backward pass, or received by it): --backward"
            " names the op that made it, and --capture optimizer replays the backward",
        ),
        (
            ["--capture", "optimizer"],
            READ_NAN + " before the step: the gradient the backward brought the model's output"
            " was non-finite already (the loss code made it)",
        ),
    ],
    ids=["without-capture", "loss-made-it"],
)
def test_a_step_that_read_a_non_finite_gradient_says_where_it_came_from(flags, said):
    p = run_ovf(*flags, SCRIPT, "backward_nan")  # the NaN is the loss module's backward's
    assert p.returncode == 1, p.stderr
    assert ovf_lines(p.stdout)[-1] == f"ovf: {said}", p.stdout


@pytest.mark.parametrize("case", ["adam_eps0", "backward_in_model"])
def test_the_optimizer_replay_leaves_the_run_bit_for_bit_as_no_replay_does(case):
    # warn goes on training: parameters (the NaN the step wrote included), gradients,
    # BatchNorm's statistics, the optimizer's state, the generator's state after three steps
    replayed, plain = (
        run_ovf("--on-nan", "warn", *flags, SCRIPT, case)
        for flags in (["--capture", "optimizer"], ["--no-replay"])
    )
    expected = REPLAYED_STEP if case == "adam_eps0" else REPLAYED_BACKWARD
    assert expected.search(replayed.stdout), replayed.stdout
    digests = [re.findall(r"^state (\w+)$", p.stdout, re.M) for p in (replayed, plain)]
    assert len(digests[0]) == 1 and digests[0] == digests[1], (replayed.stdout, plain.stdout)
    assert (replayed.returncode, plain.returncode) == (1, 1)


def test_the_capture_without_the_replay_is_refused_in_one_line():
    p = run_ovf("--capture", "optimizer", "--no-replay", SCRIPT, "adam_eps0")
    assert (p.returncode, p.stdout) == (2, ""), p.stdout
    assert p.stderr == (
        "ovf: --capture optimizer is for the replay of an optimizer's step: drop --no-replay\n"
    ), p.stderr
