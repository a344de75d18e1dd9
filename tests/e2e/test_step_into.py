"""`ovf step-into`, `ovf next`, `ovf step`, `ovf finish` in gdb and LLDB: at a module-mode
event the step is replayed and stops at the producing module's lines, in the same call
of it as in the run, with its live locals; `continue` ends the replay and the event's
stop comes again, the run's state as it was."""

import os
import re

import pytest
from harness import PYTHON, TOP, clean_env

SCRIPT = os.path.join(TOP, "tests", "python", "scripts", "replays.py")
ENV = clean_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")


def line_of(mark):
    with open(SCRIPT) as f:
        return next(i for i, t in enumerate(f, 1) if t.rstrip().endswith(mark))


def stepping(debugger, case, commands, arm="ovf break-on-nan"):
    """gdb's or LLDB's output for `commands` after `arm` and `run` (to the event's stop)
    on replays.py's `case`."""
    return debugger.run(
        [arm, "run", *commands],
        program=[PYTHON, SCRIPT, case],
        env=ENV,
        cwd=TOP,
        timeout=300,
    )


def step_stops(out):
    """The `ovf: step: ...` lines, in order."""
    return re.findall(r"^ovf: step: (.*)$", out, re.M)


def test_step_into_then_next_reaches_the_producing_line_with_its_locals(debugger):
    out = stepping(
        debugger,
        "dropout_divides",
        [
            "ovf step-into",
            "ovf next",
            "ovf next",
            "ovf next",
            "ovf py-locals",
            "continue",
            "ovf status",
            "kill",
        ],
    )
    first = line_of("CALLS[0] += 1")
    made = line_of("# made: dropout_divides")
    call = "(block, call 1 of the replayed step)"
    assert step_stops(out) == [
        f"replays.py:{first} in forward {call}",
        f"replays.py:{first + 1} in forward {call}",
        f"replays.py:{first + 2} in forward {call}",
        f"replays.py:{made} in forward {call}",
    ], out
    # The producing line, marked, with its source as the file has it.
    assert re.search(
        rf"\n\s+{made}  return h / self\.drop\(torch\.ones_like\(h\)\)  # made: dropout_divides"
        r"    <- aten::div here made the value\n",
        out,
    ), out
    # The live locals at that line: h is the block's finite output so far (before the div).
    locals_at = out[out.index(f'ovf: locals of forward ("{SCRIPT}", line {made})') :]
    assert "\n5.52e-03 2.69e+00 h: Tensor float32[16, 8] cpu\n" in locals_at, out
    assert "                  case: str = 'dropout_divides'\n" in locals_at, out
    # `continue` ends the replay: the event's stop again.
    assert (
        "ovf: the replay ended: back at the event, the process's state as it was before"
        " step-into\n" in out
    ), out
    assert debugger.hits(out) == 4 + 2, out  # four lines, the event, the event again
    assert "replay: replayed the forward of Net with its ops observed" in out, out


def test_step_into_stops_in_the_call_that_made_the_value_and_finish_returns(debugger):
    """Scale runs twice a step; the second call overflows: step-into stops in that call
    (its input already ~1e30), `ovf finish` runs to where the forward returns, and a
    move from there ends the replay."""
    out = stepping(
        debugger,
        "second_call",
        [
            "ovf step-into",
            "ovf py-locals x",
            "ovf next",
            "ovf finish",
            "ovf next",
            "kill",
        ],
    )
    made = line_of("# made: second_call")
    call = "(scale, call 2 of the replayed step"
    stops = step_stops(out)
    assert stops == [
        f"replays.py:{made} in forward {call})",
        f"replays.py:{made + 1} in forward {call})",
        f"replays.py:{made + 1} in forward {call}; it returns: a move from here ends the replay)",
    ], out
    # call 2's input is call 1's output (block's output times 1e30), finite
    assert "\n5.52e+27 2.69e+30 x: Tensor float32[16, 8] cpu\n" in out, out
    assert "ovf: the replay ended: back at the event" in out, out


def test_step_goes_into_a_submodule_and_finish_comes_back(debugger):
    """`ovf step` on a line that calls a submodule stops in its forward (torch's
    Linear.forward, its locals shown), past torch's module-call machinery; `ovf finish`
    comes back to the producing forward's next line, over the sibling calls."""
    out = stepping(
        debugger,
        "dropout_divides",
        [
            "ovf step-into",
            "ovf next",
            "ovf step",
            "ovf py-locals",
            "ovf finish",
            "kill",
        ],
    )
    first = line_of("CALLS[0] += 1")
    call = "(block, call 1 of the replayed step)"
    stops = step_stops(out)
    assert len(stops) == 4, out
    assert stops[:2] == [
        f"replays.py:{first} in forward {call}",
        f"replays.py:{first + 1} in forward {call}",
    ], out
    assert re.fullmatch(rf"linear\.py:\d+ in forward {re.escape(call)}", stops[2]), out
    assert stops[3] == f"replays.py:{first + 2} in forward {call}", out
    assert re.search(
        r'ovf: locals of forward \(".*/torch/nn/modules/linear\.py", line \d+\):', out
    ), out
    assert "\n4.26e-03 2.42e+00 input: Tensor float32[16, 8] cpu\n" in out, out
    assert "                  self: Linear\n" in out, out


def test_the_run_after_a_step_into_is_the_run_without_one(debugger):
    """Parameters, gradients, buffers, optimizer state and the generator at the end of the
    run (the script's digest) are the same whether the user stepped into the replay or not."""
    drop = "delete" if debugger.name == "gdb" else "breakpoint delete --force"
    digests = []
    for moves in ([], ["ovf step-into", "ovf next", "ovf next", "continue"]):
        out = stepping(debugger, "dropout_divides", [*moves, drop, "continue"])
        assert "step 2 done" in out, out
        digests.append(re.search(r"^state ([0-9a-f]{64})$", out, re.M).group(1))
    assert digests[0] == digests[1]


def test_step_into_says_why_not_where_there_is_nothing_to_step_into(debugger):
    """A NaN already in the model's input is not replayed: nothing to step into, and
    the moves want step-into first. Nothing runs: the process stays at the event."""
    out = stepping(debugger, "data_nan", ["ovf step-into", "ovf next", "kill"])
    assert re.search(
        r"ovf step-into: nothing to step into at this stop: not replayed: the model's input\[0\]"
        r" held the non-finite value already",
        out,
    ), out
    assert "ovf next: not at a line of a replayed step: `ovf step-into` first" in out, out
    assert debugger.hits(out) == 1, out


def test_step_into_says_ops_stops_have_their_op_already(debugger):
    """--ops stops right after the op: there is no replay to step into."""
    out = stepping(
        debugger, "dropout_divides", ["ovf step-into", "kill"], arm="ovf break-on-nan --ops"
    )
    assert (
        "ovf step-into: this stop came from --ops, which stops after the op that made the value;"
        " stepping replays a module-mode event (break-on-nan without --ops)" in out
    ), out
    assert debugger.hits(out) == 1, out


def test_step_into_wants_the_stop_breakpoint(debugger):
    """Without the breakpoint nothing would stop at the lines: refused, nothing runs."""
    disable = "disable" if debugger.name == "gdb" else "breakpoint disable"
    out = stepping(debugger, "dropout_divides", [disable, "ovf step-into", "kill"])
    assert (
        "ovf step-into: the stop breakpoint on ovf_stop_event is deleted or disabled: the replay"
        " would run through every line without stopping; `ovf break-on-nan` sets it again"
    ) in out, out
    assert "ovf: step:" not in out, out


@pytest.mark.parametrize("move", ["step-into", "next"])
def test_stepping_refuses_a_core(debugger, tmp_path, move):
    core = tmp_path / "core"
    stepping(debugger, "dropout_divides", [debugger.gcore(core), "kill"])
    out = debugger.run([f"ovf {move}"], core=core, timeout=120)
    assert (
        f"ovf {move}: no live process: stepping replays the step in the running process"
        " (a core file has no process to run)" in out
    ), out
