"""ovf inside torch.compile: ovf's hooks enter the
graph instead of breaking it, the compiled model's frames carry the eager names, the
first non-finite module output inside the compiled region stops the run there, and
ovf changes no number the compiled model computes. Each case runs in a child process
(Dynamo's caches and the custom operators are per process)."""

import os
import re
import subprocess
import textwrap

import pytest
from build_paths import PACKAGE_PARENT, PYTHON, REPO

MODEL = """
import torch, ovf
from torch import nn
torch.manual_seed(0)
class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.act = nn.GELU()
        self.norm = nn.LayerNorm(d)
    def forward(self, x):
        return self.norm(x + self.act(self.fc(x)))
model = nn.Sequential(*[Block(16) for _ in range(2)])
x = torch.randn(4, 16)
bad = x.clone()
bad[0, 0] = float("inf")
"""


def child_env():
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "PYTHONPATH": PACKAGE_PARENT,
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
    }


def run(body):
    return subprocess.run(
        [PYTHON, "-c", MODEL + textwrap.dedent(body)],
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env(),
    )


def test_no_graph_break_and_the_eager_names():
    p = run(
        """
        import torch._dynamo as dynamo
        plain = dynamo.explain(model)(x)
        compiled = torch.compile(model)
        d = ovf.DebugUnderflowOverflow(compiled)   # the wrapper: names stay the eager ones
        watched = dynamo.explain(model)(x)
        print("breaks", plain.graph_break_count, watched.graph_break_count,
              "graphs", plain.graph_count, watched.graph_count)
        print("names", sorted(n for n in d.module_names.values()))
        model[1] = torch.compile(model[1])
        d = ovf.DebugUnderflowOverflow(model)
        print("submodule", sorted(n for n in d.module_names.values()))
        """
    )
    assert p.returncode == 0, p.stderr
    assert "breaks 0 0 graphs 1 1" in p.stdout, p.stdout + p.stderr
    names = "['', '0', '0.act', '0.fc', '0.norm', '1', '1.act', '1.fc', '1.norm']"
    assert f"names {names}" in p.stdout
    # a compiled submodule keeps its eager name too (no `_orig_mod`, no wrapper of its own)
    assert f"submodule {names}" in p.stdout


def test_auto_mode_with_the_replay_armed_breaks_no_graph():
    # python3 -m ovf's way: the replay holds each step's forward through hooks on the
    # model, which torch.compile traces: they must trace to nothing
    p = run(
        """
        import torch._dynamo as dynamo
        from ovf import _auto, _held_step, _replay
        _auto.enable()
        model(x)  # found eagerly: the batch root; its forwards are held from the next one
        model(x)
        assert _replay.armed() and _held_step.latest() is not None
        explained = dynamo.explain(model)(x)
        print("breaks", explained.graph_break_count, "graphs", explained.graph_count)
        """
    )
    assert p.returncode == 0, p.stderr
    assert "breaks 0 graphs 1" in p.stdout, p.stdout + p.stderr


def test_the_compiled_run_stops_at_the_same_module_as_the_eager_one():
    eager = run(
        """
        d = ovf.DebugUnderflowOverflow(model)
        model(x)
        model(bad)
        """
    )
    compiled = run(
        """
        d = ovf.DebugUnderflowOverflow(model)
        c = torch.compile(model)
        c(x)
        c(bad)
        """
    )
    for p in (eager, compiled):
        assert p.returncode == 1 and "ovf.NonFiniteError: DebugUnderflowOverflow" in p.stderr
        assert "Detected inf/nan during batch_number=1" in p.stdout, p.stdout
    report = eager.stdout[eager.stdout.index("Detected inf/nan") :]
    again = compiled.stdout[compiled.stdout.index("Detected inf/nan") :]
    # the same frames (Inductor's fused arithmetic may differ in the last bits of a value,
    # so the frames' modules are compared): the first non-finite output is 0.fc's
    modules = [line for line in report.splitlines() if line.startswith(" " * 18)]
    assert modules == [line for line in again.splitlines() if line.startswith(" " * 18)]
    last = report.rstrip().splitlines()
    assert last[-5] == "                  0.fc Linear", last
    assert last[-1].endswith("      inf output"), last
    # said once: what a compiled region hides (on stderr when it first runs, and in the
    # report after its frames, all 10 of them compiled: batch 0's 9 and 0.fc's)
    assert compiled.stderr.count("ovf: torch.compile: module frames inside compiled graphs") == 1
    note = (
        "ovf: 10 of 10 frames listed ran in torch.compile'd graphs: module frames are recorded "
        "there; the ATen ops Inductor fuses into its kernels are not seen without --ops "
        "(its checks enter the graphs)\n"
    )
    assert compiled.stdout.count("torch.compile") == 1 and "\n\n\n\n" + note in again, again
    assert "torch.compile" not in eager.stdout + eager.stderr


@pytest.mark.parametrize(
    "activate",
    [
        "d = ovf.DebugUnderflowOverflow(model)\nc = torch.compile(model)",
        # auto mode (python3 -m ovf, a debugger's run): only the wrapper is called
        "from ovf import _auto\n_auto.enable()\nc = torch.compile(model)",
    ],
    ids=["explicit", "auto"],
)
@pytest.mark.parametrize("grad", ["enable_grad", "no_grad"])
def test_a_compiled_forward_is_seen_with_its_eager_names(activate, grad):
    # no_grad compiles an inference graph, whose effect tokens are sunk, not
    # returned; auto mode meets torch.compile's wrapper (OptimizedModule) first.
    p = run(
        activate
        + f"""
        with torch.{grad}():
            c(x)
            c(bad)
        """.replace("\n        ", "\n")
    )
    assert p.returncode == 1 and "ovf.NonFiniteError: DebugUnderflowOverflow" in p.stderr, (
        p.stdout + p.stderr
    )
    report = p.stdout[p.stdout.index("Detected inf/nan during batch_number=1") :].splitlines()
    headers = [i for i, line in enumerate(report) if line.startswith(" " * 18)]
    assert report[headers[-1]] == " " * 18 + "0.fc Linear", report
    assert report[headers[-1] + 4].endswith("      inf output"), report
    assert "_orig_mod" not in p.stdout and "OptimizedModule" not in p.stdout


def test_ovf_changes_no_number_of_the_compiled_model():
    p = run(
        """
        c = torch.compile(model)
        before = c(x)
        d = ovf.DebugUnderflowOverflow(model)
        c2 = torch.compile(model)
        after = c2(x)
        print("identical", torch.equal(before, after))
        """
    )
    assert p.returncode == 0, p.stderr
    assert "identical True" in p.stdout


COMPILED_SCRIPT = os.path.join(REPO, "tests", "e2e", "scripts", "compiled.py")
REPLAYED = (
    r"ovf: replayed the forward of Sequential eagerly \(torch\.compile set aside\), its ops"
    r" observed \(\d+\.\d\d s\): "
)


def run_compiled(*args):
    """compiled.py under python3 -m ovf (auto mode: the replay armed) with `args`; --on-nan
    warn lets it run on past the event, its compiled steps after it included."""
    ovf_args = [a for a in args if a == "--no-replay"]
    script_args = [a for a in args if a != "--no-replay"]
    return subprocess.run(
        [
            PYTHON,
            "-m",
            "ovf",
            "--on-nan",
            "warn",
            *ovf_args,
            COMPILED_SCRIPT,
            "--steps",
            "4",
            *script_args,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env(),
    )


def test_is_it_the_compiler_eager_makes_the_same_value_the_models_own_math():
    # Square makes inf of 1e20-scaled inputs, compiled or not: the eager replay names its op
    p = run_compiled()
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    assert re.search(
        "^" + REPLAYED + "eager makes the same value: the model's own math, not the compiler\n"
        r"ovf: the first non-finite value was produced by aten::mul in 1 at compiled\.py:\d+ in"
        r" forward \(batch 2\)\n"
        r"ovf: why: aten::mul overflow: results exceed float32's max 3\.40e\+38 \(largest input"
        r" abs max 1\.50e\+20\)\n",
        out,
        re.M,
    ), out
    assert "graph breaks 0, graphs 1\n" in p.stdout, p.stdout  # the wrapper's holding breaks none


def test_is_it_the_compiler_eager_is_finite_the_compiled_code_differs():
    # the test lowering: Inductor's softplus overflows where eager's returns x
    p = run_compiled("--compiler-fault")
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    assert re.search(
        "^" + REPLAYED + r"eager is finite here: the compiled code differs \(Inductor\): 1"
        r" \(Softplus\) outputs 14 \+inf compiled, none eagerly \(abs max 1\.50e\+03\);"
        r" --ops names the compiled graph's op that makes it\n",
        out,
        re.M,
    ), out
    assert "produced by" not in out, out  # eager made no op's value to name
    # Nothing of the replay stays: the steps after it ran compiled as before (their inf and
    # nan are the test lowering's), no graph added or broken, as without the replay.
    plain = run_compiled("--compiler-fault", "--no-replay")
    assert plain.returncode == 1, plain.stdout + plain.stderr
    steps = _steps_and_graphs(p.stdout)
    assert steps == _steps_and_graphs(plain.stdout)
    assert steps[-2:] == ["step 3 out nan", "graph breaks 0, graphs 1"], steps


def _steps_and_graphs(stdout):
    return [line for line in stdout.splitlines() if line.startswith(("step ", "graph "))]
