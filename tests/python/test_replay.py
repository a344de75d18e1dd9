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


def run_ovf(*args):
    return subprocess.run(
        [PYTHON, "-m", "ovf", *args], capture_output=True, text=True, timeout=120, env=ENV
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


def test_a_module_that_draws_from_outside_the_generators_diverges():
    # Block makes inf on the run's second call only: the replay (its third) does not
    p = run_ovf(SCRIPT, "outside_noise")
    assert p.returncode == 1, p.stderr
    lines = ovf_lines(p.stdout)
    assert len(lines) == 1 and re.fullmatch(
        r"ovf: the replay of the forward of Net made no non-finite value \(\d+\.\d\d s\): it"
        r" diverged from the run \(nondeterministic kernels, state the step changes, or a"
        r" hardware fault\)",
        lines[0],
    ), p.stdout


def test_no_replay_leaves_module_mode_as_it_was():
    p = run_ovf("--no-replay", SCRIPT, "overflow")
    assert p.returncode == 1 and ovf_lines(p.stdout) == [], p.stdout
