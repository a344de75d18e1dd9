"""What ovf says about torch.compile'd code, under gdb and LLDB: at a stop inside a compiled
graph and from the kernel core of the same run, `ovf status` and `ovf frames` say once that
the ops Inductor fused were not seen, as the runtime's own report does; for an eager run of
the same script they say nothing of it."""

import os
import re

from harness import CUT_MARK, PACKAGE_PARENT, PYTHON, TOP, abort_core, clean_env, stop_summary

SCRIPT = os.path.join(TOP, "tests", "e2e", "scripts", "compiled.py")
UNSEEN = (
    "module frames are recorded there; the ATen ops Inductor fuses into its kernels are not "
    "seen without --ops (its checks enter the graphs)"
)
# Batch 0 eager, batch 1 compiled (4 frames each: 0, 1, 2 and the root), batch 2 compiled up
# to Square's inf in frame "1".
STATUS = f"torch.compile: 6 of the last 10 frames ran in compiled graphs: {UNSEEN}\n"
NOTE = f"ovf: 6 of 10 frames listed ran in torch.compile'd graphs: {UNSEEN}\n"
TIMEOUT = 600  # the first compile of a process takes a while on 2 cores


def _says_it_once(status, frames):
    """`ovf status` and `ovf frames` (their outputs) each say it once."""
    assert STATUS in status and status.count(UNSEEN) == 1, status
    assert NOTE + "Last 10 forward frames:\n" in frames and frames.count(UNSEEN) == 1, frames


ARGV = [PYTHON, SCRIPT, "--reference", "--on-nan", "abort"]


def test_a_stop_inside_a_compiled_graph(debugger):
    cut = debugger.cut()
    out = debugger.run(
        ["run", cut, "ovf status", cut, "ovf frames", cut, "kill"],
        program=ARGV,
        timeout=TIMEOUT,
        env=clean_env(PYTHONPATH=PACKAGE_PARENT),
        inferior_traceback=True,
    )
    stop, status, frames, _ = out.split(CUT_MARK)
    # the runtime's report said it, once, after its frames
    assert stop.count(UNSEEN) == 1 and f"\n\n\n\n{NOTE}" in stop, stop
    _says_it_once(status, frames)


# The eager replay's answer where only the compiled code makes the inf (compiled.py's
# --compiler-fault: a test lowering of Softplus), after "replay: " or "ovf: ".
COMPILER = re.compile(
    r"replayed the forward of Sequential eagerly \(torch\.compile set aside\), its ops observed"
    r" \(\d+\.\d\d s\): eager is finite here: the compiled code differs \(Inductor\): 1"
    r" \(Softplus\) outputs 14 \+inf compiled, none eagerly \(abs max 1\.50e\+03\);"
    r" --ops names the compiled graph's op that makes it\n"
)


def test_a_kernel_core_of_a_compiled_run(debugger, tmp_path):
    # auto mode this time (python3 -m ovf --on-nan abort): the same frames as explicit mode,
    # and the eager replay's verdict on the compiler, in the run's report and in the core
    core, stdout = abort_core(tmp_path, args=["--compiler-fault"], script=SCRIPT, timeout=TIMEOUT)
    assert stdout.count(UNSEEN) == 1 and f"\n\n\n\n{NOTE}" in stdout, stdout
    assert re.search(re.escape(NOTE) + "ovf: " + COMPILER.pattern, stdout), stdout
    cut = debugger.cut()
    out = debugger.run(["ovf status", cut, "ovf frames", cut], core=core)
    status, frames, _ = out.split(CUT_MARK)
    _says_it_once(status, frames)
    assert re.search("\n  replay: " + COMPILER.pattern, status), status


def test_break_on_nan_stops_inside_a_compiled_graph_with_the_eager_name(debugger):
    # Auto mode (the debugger's run): the script only calls torch.compile's wrapper
    # after its first, eager, call; the stop is in the compiled graph, at Square.
    out = debugger.run(
        ["ovf break-on-nan", "run", "kill"],
        program=[PYTHON, SCRIPT],
        timeout=TIMEOUT,
        env=clean_env(PYTHONPATH=PACKAGE_PARENT),
    )
    assert stop_summary(out) == ("first non-finite value (inf)", 2, "1", "Square")
    assert re.search(r"^ovf: \d+ of \d+ frames listed ran in torch.compile'd graphs: ", out, re.M)
    # the eager replay makes the same inf: Square's own math, named as eager --ops names it
    assert re.search(
        r"\n     replay: replayed the forward of Sequential eagerly \(torch\.compile set aside\),"
        r" its ops observed \(\d+\.\d\d s\): eager makes the same value: the model's own math,"
        r" not the compiler\n"
        r"       produced by aten::mul in 1 at compiled\.py:\d+ in forward\n"
        r"       why: aten::mul overflow: results exceed float32's max 3\.40e\+38 \(largest input"
        r" abs max 1\.50e\+20\)\n"
        r"       verdict: finite in float64 \(abs max 2\.24e\+40\): float32's range or precision"
        r" here\n",
        out,
    ), out
    assert "_orig_mod" not in out and "OptimizedModule" not in out, out


def test_an_eager_run_says_nothing_of_compiled_code(debugger):
    out = debugger.run(
        ["run", "ovf status", "ovf frames", "kill"],
        program=[*ARGV, "--eager"],
        timeout=TIMEOUT,
        env=clean_env(PYTHONPATH=PACKAGE_PARENT),
        inferior_traceback=True,
    )
    assert "                  1 Square\n" in out and "inf output" in out, out
    assert "torch.compile" not in out and "Inductor" not in out, out


def test_break_on_nan_ops_stops_at_the_op_inside_a_compiled_graph(debugger):
    # --ops inside the graph (_compile_ops.py): the stop comes at Square's x * x, named as
    # an eager --ops stop names it, with its line and why; py-bt shows the script's lines
    out = debugger.run(
        ["ovf break-on-nan --ops", "run", "ovf py-bt", debugger.cut(), "kill"],
        program=[PYTHON, SCRIPT],
        timeout=TIMEOUT,
        env=clean_env(PYTHONPATH=PACKAGE_PARENT),
    )
    assert debugger.hits(out) == 1, out
    with open(SCRIPT) as f:
        line = next(i for i, t in enumerate(f, 1) if t.rstrip().endswith("# made: square"))
    assert (
        "\novf: first non-finite value (inf) at batch 2, op aten::mul in 1, produced here\n"
        f"     at compiled.py:{line} in forward\n" in out
    ), out
    assert (
        "\n     why: aten::mul overflow: results exceed float32's max 3.40e+38 (largest input"
        " abs max 1.50e+20)\n" in out
    ), out
    # the program's own frame is the script's, not the code Inductor generated
    assert re.search(
        r'^  File ".*compiled\.py", line \d+, in main    <- the program\'s code', out, re.M
    ), out
    assert "torchinductor" not in out.split("<- the program's code")[0].splitlines()[-1], out
