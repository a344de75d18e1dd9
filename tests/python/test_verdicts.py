"""The verdict on the op that produced the first NaN/Inf (--ops): the op run again on
its own inputs, twice on its device and once in float64 on the CPU, tells the math
(float64 makes the value too), the dtype's range (float64 does not) and a fault (the
same inputs give another result) apart, in one line of the report
(tests/python/scripts/verdicts.py; its comments give each case's arithmetic)."""

import os
import subprocess

import pytest
from build_paths import PACKAGE_PARENT, PYTHON

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts", "verdicts.py")
ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("OVF_")},
    "PYTHONPATH": PACKAGE_PARENT,
    "OMP_NUM_THREADS": "1",
}

VERDICTS = {
    # log(h - h): 8 zeros, -inf in float64 as in float32
    "log_of_zero": (
        "non-finite in float64 too (0 nan and 8 inf): the math itself on these inputs, not this"
        " op's precision"
    ),
    # 3e38 * (|lin(x)| + 1), whose largest value is 2.21: 6.64e+38 > float32's 3.40e+38
    "float32_overflow": "finite in float64 (abs max 6.64e+38): float32's range or precision here",
    # 1e5 * 2.21 > float16's 65504
    "float16_cast": "finite in float64 (abs max 2.21e+05): float16's range or precision here",
    # the op's first call wrote one inf; the two re-runs (its second and third) none
    "flaky_op": (
        "does not reproduce on the same inputs: a re-run on cpu made 0 nan and 0 inf where the"
        " run made 0 nan and 1 inf: suspect the hardware or a racy kernel"
    ),
    # h.div_(h - h): the divided values are gone when the op ends
    "in_place": "no verdict: aten::div_ writes its input (not re-run)",
    # batch norm in evaluation writes no running statistics: re-run; 2.21 * 4e4 > 65504
    "batch_norm_eval": "finite in float64 (abs max 8.86e+04): float16's range or precision here",
    # in training it updates them (unmarked in its schema): not re-run
    "batch_norm_training": "no verdict: aten::batch_norm writes its input (not re-run)",
}
OPS = {
    "log_of_zero": "aten::log",
    "float32_overflow": "aten::mul",
    "float16_cast": "aten::to",
    "flaky_op": "aten::hypot",
    "in_place": "aten::div_",
    "batch_norm_eval": "aten::batch_norm",
    "batch_norm_training": "aten::batch_norm",
}


def run_ovf(*args):
    return subprocess.run(
        [PYTHON, "-m", "ovf", *args], capture_output=True, text=True, timeout=120, env=ENV
    )


@pytest.mark.parametrize("case", sorted(VERDICTS))
def test_the_report_gives_the_producing_ops_verdict(case):
    p = run_ovf("--ops", SCRIPT, case)
    assert p.returncode == 1, p.stderr
    lines = p.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("ovf: the first non-finite"))
    assert lines[first].startswith(
        f"ovf: the first non-finite value was produced by {OPS[case]} in <root Net> at verdicts.py:"
    ), lines[first]
    assert lines[first + 1].startswith("ovf: why: "), lines[first + 1]
    assert lines[first + 2] == f"ovf: verdict: {VERDICTS[case]}", p.stdout


def test_module_mode_gives_the_verdict_through_its_replay():
    # the module event's replay observes the ops and re-runs the producer as --ops does
    p = run_ovf(SCRIPT, "float16_cast")
    assert p.returncode == 1, p.stderr
    assert p.stdout.count("ovf: verdict: ") == 1, p.stdout
    assert f"ovf: verdict: {VERDICTS['float16_cast']}\n" in p.stdout, p.stdout


def test_module_mode_without_its_replay_gives_no_verdict():
    # no op was observed: nothing to re-run
    p = run_ovf("--no-replay", SCRIPT, "float16_cast")
    assert p.returncode == 1 and "ovf: verdict" not in p.stdout + p.stderr, p.stdout
