"""--ops inside torch.compile'd graphs (_compile_ops.py): the op, module, line, why and
verdict an eager --ops run gives, at both granularities (--compiled-ops kept / every),
in forward and (--backward) backward graphs, with no graph break, and no stop and no
changed number on a healthy compiled model.
Each case is a child process (Dynamo's caches are per process)."""

import os
import subprocess

import pytest
from build_paths import PYTHON, REPO
from test_compile import child_env

SCRIPTS = os.path.join(REPO, "tests", "e2e", "scripts")


def run(script, *args, ovf=("--ops",)):
    """`script` with `args` under python3 -m ovf `ovf` (None: without ovf)."""
    prefix = ["-m", "ovf", *ovf] if ovf is not None else []
    return subprocess.run(
        [PYTHON, *prefix, os.path.join(SCRIPTS, script), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env(),
    )


def line_of(mark, script="compiled.py"):
    """The line of `script` that ends with "# made: MARK"."""
    with open(os.path.join(SCRIPTS, script)) as f:
        return next(i for i, text in enumerate(f, 1) if text.rstrip().endswith(f"# made: {mark}"))


def verdict(p):
    """The first value's three lines (op, module, line; why; verdict) of a run."""
    out = p.stdout + p.stderr
    lines = [
        line
        for line in out.splitlines()
        if line.startswith(("ovf: the first non-finite value", "ovf: why: ", "ovf: verdict: "))
    ]
    assert p.returncode == 1 and len(lines) == 3, out
    return lines


@pytest.fixture(scope="module")
def eager_square():
    return verdict(run("compiled.py", "--eager"))


@pytest.mark.parametrize("granularity", ["kept", "every"])
def test_a_compiled_graph_names_the_op_and_line_as_eager_ops_does(eager_square, granularity):
    # Square's x * x, fused into Inductor's kernel (kept: its output is the module's);
    # --on-nan warn: the run goes on to print Dynamo's counts
    p = run("compiled.py", ovf=("--ops", "--on-nan", "warn", "--compiled-ops", granularity))
    assert verdict(p) == eager_square
    assert eager_square[0] == (
        f"ovf: the first non-finite value was produced by aten::mul in 1 at"
        f" compiled.py:{line_of('square')} in forward (batch 2)"
    )
    assert "graph breaks 0, graphs 1\n" in p.stdout, p.stdout


def test_a_fused_groups_op_is_named_from_the_outputs_inductor_keeps():
    # nanoGPT's float16 attention: q @ k^T overflows float16 in blocks.0.attn (eager's
    # aten::matmul is aten::bmm in the graph Inductor lowers); kept checks its output
    eager = verdict(run("compiled_gpt.py", "fp16_attention", "--eager"))
    compiled = verdict(run("compiled_gpt.py", "fp16_attention"))
    with open(os.path.join(REPO, "tests", "e2e", "scripts", "real_models.py")) as f:
        scores = next(i for i, t in enumerate(f, 1) if "scores = (q @ k.transpose(-2, -1))" in t)
    assert eager[0] == (
        "ovf: the first non-finite value was produced by aten::matmul in blocks.0.attn at"
        f" real_models.py:{scores} in forward (batch 1)"
    )
    assert [line.replace("aten::bmm", "aten::matmul") for line in compiled] == eager


def test_a_compiled_backward_graph_names_the_gradient_as_eager_backward_does():
    # sqrt's gradient at 0 in AOTAutograd's backward graph: the same op, forward op,
    # module, line and batch (the user's step: each backward() ends one) as eager code
    args = ("--ops", "--backward")
    eager = verdict(run("compiled.py", "--backward-nan", "--eager", ovf=args))
    assert eager[0] == (
        "ovf: the first non-finite value was produced in the backward pass by aten::div, the"
        f" gradient of aten::sqrt in 1 at compiled.py:{line_of('root')} in forward (batch 2)"
    )
    assert verdict(run("compiled.py", "--backward-nan", ovf=args)) == eager


def test_a_healthy_compiled_model_runs_to_the_end_with_its_own_numbers():
    # the causal mask's -inf (masked_fill, run again where a check sees it) is deliberate;
    # the losses are the compiled model's own, bit for bit, with the checks in its graph
    plain = run("compiled_gpt.py", "healthy", ovf=None)
    assert plain.returncode == 0, plain.stderr
    for granularity in ("kept", "every"):
        ovf = ("--ops", "--backward", "--compiled-ops", granularity)
        p = run("compiled_gpt.py", "healthy", ovf=ovf)
        assert p.returncode == 0 and "Detected inf/nan" not in p.stdout, p.stdout + p.stderr
        assert "graph breaks 0, graphs 1\n" in p.stdout, p.stdout
        if granularity == "kept":
            assert p.stdout.splitlines()[-4:] == plain.stdout.splitlines()[-4:], p.stdout


def test_a_bad_granularity_is_one_line():
    p = run("compiled.py", "--eager", ovf=("--ops", "--compiled-ops", "all"))
    assert p.returncode == 2
    assert "argument --compiled-ops: invalid choice: 'all'" in p.stderr, p.stderr
