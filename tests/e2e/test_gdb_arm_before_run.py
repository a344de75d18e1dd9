"""`ovf trace-batches` and `ovf abort-after` armed before `run` on an unmodified script.

Before `run` these reach the runtime only through the inferior's environment
(OVF_TRACE_BATCHES, OVF_ABORT_AFTER and the stop bits in OVF_STOP): no ring
exists yet whose control block gdb could write. The reference for the same run
is ovf.DebugUnderflowOverflow(model, trace_batch_nums=[1], ...) wrapped around
the same script's model.
"""

import re
import subprocess

from gdb_harness import GDB_SCRIPT, PYTHON, SCRIPT, TIMEOUT, clean_env, requires_gdb, run_gdb, run_python

pytestmark = requires_gdb

RUN = ["--steps", "4"]  # finite throughout: only the armed trace and abort-after can stop it
TRACE_START = "\n\n                  *** Starting batch number=1 ***\n"
HIT = '\nThread 1 "python3" hit Breakpoint 1, ovf_stop_event ('
ABORT_MESSAGE = "ValueError: DebugUnderflowOverflow: aborting after 2 batches due to `abort_after_batch_num=1` arg"

# diverge.py --reference calls ovf.DebugUnderflowOverflow(model); give that call the reference's knobs.
_REFERENCE = """
import functools, runpy, sys
import ovf
ovf.DebugUnderflowOverflow = functools.partial(ovf.DebugUnderflowOverflow, **eval(sys.argv[1]))
sys.argv = [sys.argv[2], "--reference", *sys.argv[3:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def reference_run(**kwargs):
    return run_python(["-c", _REFERENCE, repr(kwargs), SCRIPT, *RUN])


def test_trace_batches_armed_before_run_prints_the_reference_trace():
    ref = reference_run(trace_batch_nums=[1])
    assert ref.returncode == 0, ref.stderr
    out = run_gdb(["ovf trace-batches 1", "run"], ["--args", PYTHON, SCRIPT, *RUN])
    assert "ovf: armed: trace batches 1\n" in out
    assert "exited normally" in out
    assert "hit Breakpoint" not in out  # traced frames are printed, the run never stops
    # Everything the script and the tracer printed, from step 0's loss to the last step's:
    # the reference's whole stdout is the losses with batch 1's frames between steps 0 and 1.
    start = out.index("step 0 loss ")
    end = out.index("\n", out.index(f"step {int(RUN[1]) - 1} loss ")) + 1
    assert out[start:end] == ref.stdout
    trace = out[out.index(TRACE_START) : out.index("step 1 loss ")]
    assert trace.count("*** Starting batch number=") == 1
    assert len(re.findall(r"^ {17} \S* ?\S+$", trace, re.M)) == 14  # 3 x (fc, amp, center, block), head, Net
    assert out.count("*** Starting batch number=") == 1  # batch 1 only


def _run_gdb_to_exit(commands, args):
    """Like run_gdb, for a run whose inferior ends in a Python traceback of its own:
    that one traceback is allowed, anything from the debugger side is not."""
    argv = ["gdb", "-batch", "-nx", "-iex", "set debuginfod enabled off", "-x", GDB_SCRIPT]
    for command in commands:
        argv += ["-ex", command]
    text = subprocess.run(argv + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=TIMEOUT, env=clean_env()).stdout
    assert "Python Exception" not in text, text
    assert "ovf_plugin" not in text and "ovf_gdb" not in text and "internal error" not in text, text
    return text


def test_abort_after_armed_before_run_stops_at_the_end_of_that_batch():
    ref = reference_run(trace_batch_nums=[1], abort_after_batch_num=1)
    assert ref.returncode == 1 and ref.stderr.rstrip().endswith(ABORT_MESSAGE), ref.stderr
    out = _run_gdb_to_exit(["ovf trace-batches 1", "ovf abort-after 1", "run", "py-bt", "ovf status", "continue"],
                           ["--args", PYTHON, SCRIPT, *RUN])
    assert "ovf: armed: trace batches 1; stop after batch 1 (abort-after)\n" in out
    # Up to the stop the inferior printed what the reference prints before raising: step 0's
    # loss, then every frame of batch 1 (the last one the root module's).
    assert out[out.index("step 0 loss ") : out.index(HIT)] == ref.stdout
    assert out.count("hit Breakpoint 1, ") == 1  # the traced frames did not stop
    stop = out[out.index(HIT) + 1 :]
    assert re.match(r'Thread 1 "python3" hit Breakpoint 1, ovf_stop_event \(record=0x[0-9a-f]+, event=32\)', stop)
    summary = stop[stop.index("\novf: ") + 1 :]
    assert summary.startswith(
        "ovf: batch 1 finished (abort-after 1); `continue` raises the reference's ValueError\n"
        "abs min  abs max  metadata\n"
        "                  head Linear    <- previous frame\n")
    # The root module's frame is the reference's last traced frame, at the stop as it was traced.
    last_frame = ref.stdout[ref.stdout.rindex("                   Net\n") :]
    assert ("                   Net    <- this frame\n" + last_frame.split("\n", 1)[1]) in summary
    # The stop is in the root module's forward hook, inside batch 1's `model(data)` call:
    # the script has not printed batch 1's loss.
    assert re.search(r'File ".*diverge.py", line \d+, in main\n    loss = model\(data\).pow\(2\).mean\(\)', stop)
    assert "step 1 loss" not in out
    assert re.search(r"^detection: watching; batch 2; 28 frames, \d+ records written; the ring keeps 65536$",
                     stop, re.M)
    assert re.search(r"^runtime: enabled, on event: continue, stops on: traced, abort_after, trace batches 1, "
                     r"abort after batch 1$", stop, re.M)
    assert re.search(r"^last event: abort_after at record \d+, batch 1, ", stop, re.M)
    # `continue`: the runtime raises the reference's ValueError, which ends the script.
    after = stop[stop.index("debugger: trace batches 1; stop after batch 1 (abort-after)\n") :]
    assert after.count("Traceback (most recent call last):") == 1
    assert ABORT_MESSAGE + "\n" in after
    assert re.search(r"\[Inferior 1 \(process \d+\) exited with code 01\]", after)
