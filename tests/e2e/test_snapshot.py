"""`ovf py-bt` and `ovf py-locals`: the Python stack and the producing frame's locals,
with each tensor's statistics, from the runtime's event snapshot: under gdb and LLDB,
live and from the core file gcore writes, and in python3 -m ovf.postmortem."""

import os
import re

from harness import PYTHON, TOP, between, run_python

SCRIPT = os.path.join(TOP, "tests", "e2e", "scripts", "real_models.py")
PROGRAM = [PYTHON, SCRIPT, "gpt_log_loss"]


def born_line():
    with open(SCRIPT) as f:
        return next(
            i for i, text in enumerate(f, 1) if text.rstrip().endswith("# born: gpt_log_loss")
        )


def check_stack_and_locals(out):
    line = born_line()
    stack = between(out, "Traceback (most recent call first):")
    frames = re.findall(r'^  File "(.*)", line (\d+), in (\S+)(.*)$', stack, re.M)
    assert frames[0] == (
        SCRIPT,
        str(line),
        "gpt_log_loss",
        "    <- the program's code (ovf py-locals)",
    ), stack
    # the case, the scripts' command line (dispatch_oracle.case_main), the script
    assert [f[2] for f in frames] == ["gpt_log_loss", "case_main", "<module>"]
    lines = between(out, "ovf: locals of gpt_log_loss").splitlines()
    assert lines[:2] == [
        f'ovf: locals of gpt_log_loss ("{SCRIPT}", line {line}):',
        "abs min  abs max  metadata",
    ]
    # in the frame's order; the tensor log() was given holds only zeros (the softmax
    # underflowed); a number shows its value
    wanted = [
        "                  batch: int = 1",
        "0.00e+00 1.00e+00 probs: Tensor float32[4, 8, 32] cpu",
        "0.00e+00 0.00e+00 picked: Tensor float32[4, 8, 1] cpu",
    ]
    assert [text for text in lines if text in wanted] == wanted, lines
    assert lines[-1] == "ovf: why: aten::log of 32 zeros (-inf)", lines


def test_py_bt_and_py_locals_at_an_op_stop_live_and_from_a_core(debugger, tmp_path):
    core = tmp_path / "core.gpt"
    out = debugger.run(
        [
            "ovf break-on-nan --ops",
            "run",
            "ovf py-bt",
            debugger.cut(),
            "ovf py-locals probs picked batch",
            debugger.cut(),
            debugger.gcore(core),
            "kill",
        ],
        program=PROGRAM,
        cwd=TOP,
    )
    check_stack_and_locals(out)
    out = debugger.run(
        ["ovf py-bt", debugger.cut(), "ovf py-locals probs picked batch", debugger.cut()], core=core
    )
    check_stack_and_locals(out)


def test_a_script_started_by_a_relative_path_is_named_absolute_in_a_core(debugger, tmp_path):
    """`python3 tests/.../real_models.py` names its code by a relative path: the snapshot
    keeps the absolute one, so a core read from another directory shows the source line."""
    core = tmp_path / "core.relative"
    relative = os.path.relpath(SCRIPT, TOP)
    debugger.run(
        ["ovf break-on-nan --ops", "run", debugger.gcore(core), "kill"],
        program=[PYTHON, relative, "gpt_log_loss"],
        cwd=TOP,
    )
    out = debugger.run(["ovf py-bt", debugger.cut()], core=core, cwd=tmp_path)
    stack = between(out, "Traceback (most recent call first):")
    frames = re.findall(r'^  File "(.*)", line (\d+), in (\S+)', stack, re.M)
    assert frames[0] == (SCRIPT, str(born_line()), "gpt_log_loss"), stack
    source = open(SCRIPT).read().splitlines()[born_line() - 1].strip()
    assert source in stack, stack


def test_postmortem_shows_the_snapshot(debugger, tmp_path):
    if debugger.name != "gdb":
        return  # one core is enough: ovf.postmortem reads it without a debugger
    core = tmp_path / "core.gpt"
    debugger.run(
        ["ovf break-on-nan --ops", "run", debugger.gcore(core), "kill"], program=PROGRAM, cwd=TOP
    )
    out = run_python(["-m", "ovf.postmortem", "--python", "--frames", "0", str(core)])
    assert out.returncode == 0, out.stderr
    # the listing's two parts, cut where the e2e harness cuts a debugger's output
    check_stack_and_locals(
        out.stdout.replace("ovf: locals of", "----8<----\novf: locals of") + "----8<----\n"
    )
