"""Fast and exact device mode under gdb and LLDB, on the host: OVF_TEST_DEFER makes
the CPU tensors of tests/python/scripts/deferred_nan.py take the device engine
(portable backend) with their statistics arriving 3 polls late, so a stop in
fast mode comes at a later hook, still naming the frame that made the NaN."""

import os

from harness import PACKAGE_PARENT, PYTHON, TOP, clean_env, stop_summary

SCRIPT = os.path.join(TOP, "tests", "python", "scripts", "deferred_nan.py")
LATE = (
    "ovf: fast device mode: this frame's statistics arrived after its forward had returned, "
    "so the process stopped at a later hook (`ovf py-bt` shows where it was then); "
    "--device-mode exact (OVF_DEVICE_MODE=exact) stops inside the frame"
)
STATUS = "device statistics: {} mode; backends used: portable (ATen ops on the device)"


def _stop(debugger, mode):
    # The debugger's session takes the mode from OVF_DEVICE_MODE (the script's own
    # DebugUnderflowOverflow joins it, as any second activation does).
    env = clean_env(PYTHONPATH=PACKAGE_PARENT, OVF_TEST_DEFER="3", OVF_DEVICE_MODE=mode)
    return debugger.run(
        ["ovf break-on-nan", "run", "ovf status", debugger.cut(), "kill"],
        program=[PYTHON, SCRIPT, mode, "2", "5", "raise"],
        env=env,
    )


def test_fast_mode_stops_late_and_names_the_frame_that_made_the_nan(debugger):
    out = _stop(debugger, "fast")
    assert stop_summary(out) == ("first non-finite value (nan)", 2, "mid", "Mid")
    assert LATE in out.splitlines()
    # the process ran on into batch 3 before the statistics of batch 2 arrived
    assert "batch 3" in out.splitlines()
    # the frames that ran after mid are still on their way
    assert any(line.startswith(STATUS.format("fast") + "; ") for line in out.splitlines()), out
    assert debugger.hits(out) == 1


def test_exact_mode_stops_inside_the_frame(debugger):
    out = _stop(debugger, "exact")
    assert stop_summary(out) == ("first non-finite value (nan)", 2, "mid", "Mid")
    assert LATE not in out.splitlines()
    assert "batch 3" not in out.splitlines()
    assert STATUS.format("exact") in out.splitlines(), out


LATE_OP = (
    "ovf: fast device mode: this op's statistics arrived after it had returned, so the process "
    "stopped at a later op or hook (`ovf py-bt` shows where it was then; the line named above "
    "is the op's own); --device-mode exact (OVF_DEVICE_MODE=exact) stops right after the op"
)


def test_fast_mode_names_a_late_ops_own_line(debugger):
    # --ops: mid's x / 0.0 judged a poll late, at a later op, still names aten::div
    # at its own line; exact mode stops right after it.
    for mode, late in (("fast", True), ("exact", False)):
        env = clean_env(PYTHONPATH=PACKAGE_PARENT, OVF_TEST_DEFER="1", OVF_DEVICE_MODE=mode)
        out = debugger.run(
            ["ovf break-on-nan --ops", "run", "kill"],
            program=[PYTHON, SCRIPT, mode, "2", "5", "raise"],
            env=env,
        )
        lines = out.splitlines()
        title = "ovf: first non-finite value (inf) at batch 2, op aten::div in mid, produced here"
        assert lines[lines.index(title) + 1] == "     at deferred_nan.py:20 in forward", out
        assert (LATE_OP in lines) == late, out
        assert debugger.hits(out) == 1
