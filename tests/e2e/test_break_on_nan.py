"""`ovf break-on-nan` before `run` on an unmodified script, under gdb and LLDB."""

import os
import re

from harness import (
    CUT_MARK,
    PYTHON,
    SCRIPT,
    TOP,
    between,
    clean_env,
    reference_report,
    stop_summary,
)

DIVERGE = ["--inf-at", "blocks.1.amp:2"]


def test_stop_names_the_reference_batch_and_module_and_lists_its_frames(debugger):
    batch, (module, cls), report = reference_report(DIVERGE)
    out = debugger.run(
        ["ovf break-on-nan", "run", *debugger.py_bt, "ovf frames", debugger.cut(), "kill"],
        program=[PYTHON, SCRIPT, *DIVERGE],
    )
    title, stop_batch, stop_module, stop_cls = stop_summary(out)
    assert (title, stop_batch, stop_module, stop_cls) == (
        "first non-finite value (inf)",
        batch,
        module,
        cls,
    )
    assert debugger.hits(out) == 1
    # The Python stack: the line of the user's forward that called the module
    # (gdb: py-bt; LLDB: `bt` starts in ovf_stop_event, CPython's frames hold the line).
    assert debugger.python_line(out, "forward", "h = self.amp(h)  # ovf-e2e: amp call"), out
    # `ovf frames` prints the reference report's frames, byte for byte
    listing = between(out, "Last 21 forward frames:")
    assert report.split("\n", 2)[2].startswith(listing), (listing, report)
    assert CUT_MARK not in listing


def test_continue_skips_where_a_nan_is_only_carried(debugger):
    # By default only where a NaN/Inf is made stops: amp makes the inf; center,
    # the head and every later frame (the weights go NaN) only carry it.
    out = debugger.run(
        ["ovf break-on-nan", "run", "continue", "kill"],
        program=[PYTHON, SCRIPT, *DIVERGE, "--nan-after"],
    )
    stops = re.findall(r"^ovf: (.*) at batch (\d+), frame (\d+)\n     (\S+) ", out, re.M)
    assert stops == [("first non-finite value (inf)", "2", "33", "blocks.1.amp")]
    assert debugger.hits(out) == 1


def test_continue_goes_on_to_the_next_event(debugger):
    out = debugger.run(
        ["ovf break-on-nan --carriers", "run", "continue", "kill"],
        program=[PYTHON, SCRIPT, *DIVERGE, "--nan-after"],
    )
    stops = re.findall(r"^ovf: (.*) at batch (\d+), frame (\d+)\n     (\S+) ", out, re.M)
    assert stops == [
        ("first non-finite value (inf)", "2", "33", "blocks.1.amp"),
        ("non-finite value (nan and inf)", "2", "34", "blocks.1.center"),
    ]
    assert debugger.hits(out) == 2


def test_nan_only_skips_the_inf(debugger):
    # (--carriers: the nan is made from the inf center was given)
    out = debugger.run(
        ["ovf break-on-nan --nan --carriers", "run", "kill"],
        program=[PYTHON, SCRIPT, *DIVERGE, "--nan-after"],
    )
    # only the nan is armed (OVF_STOP=nan), so the event is the nan, though an inf came in
    assert stop_summary(out)[:3] == ("non-finite value (nan)", 2, "blocks.1.center")
    assert debugger.hits(out) == 1


def test_module_glob_stops_only_there(debugger):
    out = debugger.run(
        ["ovf break-on-nan --module 'blocks.2.*'", "run", "kill"],
        program=[PYTHON, SCRIPT, *DIVERGE],
    )
    assert stop_summary(out)[1:3] == (2, "blocks.2.fc")
    assert debugger.hits(out) == 1


def test_after_batch_skips_earlier_batches(debugger):
    # inf from batch 1 on; its backward leaves NaN weights, so batch 3 starts non-finite
    out = debugger.run(
        ["ovf break-on-nan --after-batch 3 --carriers", "run", "kill"],
        program=[PYTHON, SCRIPT, "--inf-at", "blocks.0.amp:1"],
    )
    assert stop_summary(out)[:4] == ("non-finite value (nan)", 3, "blocks.0.fc", "Linear")
    assert debugger.hits(out) == 1


def test_if_expression_is_evaluated_over_the_event(debugger):
    out = debugger.run(
        [
            (
                "ovf break-on-nan --carriers --if \"nan > 0 and kind == 'output' and"
                " module.endswith('center')\""
            ),
            "run",
            "kill",
        ],
        program=[PYTHON, SCRIPT, *DIVERGE, "--nan-after"],
    )
    assert stop_summary(out)[1:3] == (2, "blocks.1.center")
    assert debugger.hits(out) == 1  # the amp's inf was passed over silently
    assert "ovf: first non-finite" not in out


def test_the_breakpoint_is_an_ordinary_one(debugger):
    out = debugger.run(
        [
            "ovf break-on-nan",
            debugger.list_breakpoints,
            debugger.disable(1),
            "run",
            debugger.list_breakpoints,
            debugger.delete(1),
            debugger.list_breakpoints,
        ],
        program=[PYTHON, SCRIPT, *DIVERGE, "--steps", "3"],
    )
    assert debugger.breakpoint_listed(out, pending=True, enabled=True), out
    assert (
        debugger.hits(out) == 0 and debugger.exit_code(out) == 0
    )  # disabled: the run goes through
    assert debugger.breakpoint_listed(out, pending=False, enabled=False), out
    assert debugger.no_breakpoints(out)


def test_python_m_ovf_under_the_debugger_keeps_what_break_on_nan_armed(debugger):
    # `gdb --args python -m ovf train.py`: -m ovf's own defaults (module level, raise)
    # replaced the armed --ops, and the bootstrap printed "ovf: not enabled: partially
    # initialized module 'ovf._options'" while -m ovf was importing torch.
    out = debugger.run(
        ["ovf break-on-nan --ops", "run", "kill"],
        program=[PYTHON, "-m", "ovf", os.path.join(TOP, "examples", "div_zero.py")],
        env=clean_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"),
        cwd=TOP,
        timeout=300,
    )
    assert debugger.hits(out) == 1, out
    assert "not enabled" not in out, out
    assert (
        "\novf: first non-finite value (nan) at batch 2, op aten::div in pooler, produced here\n"
        in out
    ), out
