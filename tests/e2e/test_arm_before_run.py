"""`ovf trace-batches` and `ovf abort-after` armed before `run` on an unmodified script.

Before `run` these reach the runtime only through the inferior's environment
(OVF_TRACE_BATCHES, OVF_ABORT_AFTER and the stop bits in OVF_STOP): no ring
exists yet whose control block the debugger could write. The reference for the
same run is ovf.DebugUnderflowOverflow(model, trace_batch_nums=[1], ...) wrapped
around the same script's model.
"""

import re

from harness import PYTHON, SCRIPT, run_python

RUN = ["--steps", "4"]  # finite throughout: only the armed trace and abort-after can stop it
TRACE_START = "\n\n                  *** Starting batch number=1 ***\n"
ABORT_MESSAGE = (
    "ValueError: DebugUnderflowOverflow: aborting after 2 batches due to"
    " `abort_after_batch_num=1` arg"
)

# diverge.py --reference calls ovf.DebugUnderflowOverflow(model); give that call the
# reference's knobs.
_REFERENCE = """
import functools, runpy, sys
import ovf
ovf.DebugUnderflowOverflow = functools.partial(ovf.DebugUnderflowOverflow, **eval(sys.argv[1]))
sys.argv = [sys.argv[2], "--reference", *sys.argv[3:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def reference_run(**kwargs):
    return run_python(["-c", _REFERENCE, repr(kwargs), SCRIPT, *RUN])


def test_trace_batches_armed_before_run_prints_the_reference_trace(debugger):
    ref = reference_run(trace_batch_nums=[1])
    assert ref.returncode == 0, ref.stderr
    out = debugger.run(["ovf trace-batches 1", "run"], program=[PYTHON, SCRIPT, *RUN])
    assert "ovf: armed: trace batches 1\n" in out
    assert debugger.exit_code(out) == 0
    assert debugger.hits(out) == 0  # traced frames are printed, the run never stops
    # Everything the script and the tracer printed, from step 0's loss to the last step's:
    # the reference's whole stdout is the losses with batch 1's frames between steps 0 and 1.
    start = out.index("step 0 loss ")
    end = out.index("\n", out.index(f"step {int(RUN[1]) - 1} loss ")) + 1
    assert out[start:end] == ref.stdout
    trace = out[out.index(TRACE_START) : out.index("step 1 loss ")]
    assert trace.count("*** Starting batch number=") == 1
    assert (
        len(re.findall(r"^ {17} \S* ?\S+$", trace, re.M)) == 14
    )  # 3 x (fc, amp, center, block), head, Net
    assert out.count("*** Starting batch number=") == 1  # batch 1 only


def test_abort_after_armed_before_run_stops_at_the_end_of_that_batch(debugger):
    ref = reference_run(trace_batch_nums=[1], abort_after_batch_num=1)
    assert ref.returncode == 1 and ref.stderr.rstrip().endswith(ABORT_MESSAGE), ref.stderr
    # The inferior ends in a Python traceback of its own: that one is allowed.
    out = debugger.run(
        [
            "ovf trace-batches 1",
            "ovf abort-after 1",
            "run",
            *debugger.py_bt,
            "ovf status",
            "continue",
        ],
        program=[PYTHON, SCRIPT, *RUN],
        inferior_traceback=True,
    )
    assert "ovf: armed: trace batches 1; stop after batch 1 (abort-after)\n" in out
    assert debugger.hits(out) == 1  # the traced frames did not stop
    # Up to the stop the inferior printed what the reference prints before raising: step 0's
    # loss, then every frame of batch 1 (the last one the root module's); and then, as batches
    # are the user's training steps under a debugger, the rest of step 1: its backward, its
    # optimizer step and its loss. Step 1 is over when step 2's forward begins: the stop is at
    # its first frame. The stop begins with gdb's "hit Breakpoint" line, or with ovf's summary
    # under LLDB (which prints its own report after).
    summary_at = out.index("\novf: batch 1 finished") + 1
    stop_at = min(summary_at, debugger.HIT.search(out).start())
    printed = out[out.index("step 0 loss ") : stop_at]
    assert printed.startswith(ref.stdout), printed
    assert re.fullmatch(r"step 1 loss \S+\n\n?", printed[len(ref.stdout) :]), printed
    assert re.search(debugger.stop_report(event=32), out), out
    summary = out[summary_at:]
    # Batch 1's last frame, the root module's, is the reference's last traced frame, as it was
    # traced; batch 2's first frame is the one the stop came in.
    last_frame = ref.stdout[ref.stdout.rindex("                   Net\n") :]
    assert summary.startswith(
        "ovf: batch 1 finished (abort-after 1); `continue` raises the reference's ValueError\n"
        "abs min  abs max  metadata\n"
        "                   Net    <- previous frame\n"
        + last_frame.split("\n", 1)[1]
        + "                  blocks.0.fc Linear    <- this frame\n"
    ), summary
    # The stop is in the first module's forward hook, inside batch 2's `model(data)` call:
    # the script has not printed batch 2's loss.
    assert debugger.python_line(out, "main", "loss = model(data).pow(2).mean()"), out
    assert "step 2 loss" not in out
    assert re.search(
        r"^detection: watching; batch 2; 29 frames, \d+ records written; the ring keeps 65536$",
        out,
        re.M,
    )
    assert re.search(
        r"^runtime: enabled, on event: continue, stops on: traced, abort_after, trace batches 1, "
        r"abort after batch 1$",
        out,
        re.M,
    )
    assert re.search(r"^last event: abort_after at record \d+, batch 2, blocks.0.fc ", out, re.M)
    # `continue`: the runtime raises the reference's ValueError, which ends the script.
    after = out[out.index("debugger: trace batches 1; stop after batch 1 (abort-after)\n") :]
    assert after.count("Traceback (most recent call last):") == 1
    assert ABORT_MESSAGE + "\n" in after
    assert debugger.exit_code(after) == 1
