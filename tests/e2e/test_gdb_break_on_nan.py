"""`ovf break-on-nan` before `run` on an unmodified script."""

import re

from gdb_harness import PYTHON, SCRIPT, reference_report, requires_gdb, run_gdb, stop_summary

pytestmark = requires_gdb

DIVERGE = ["--inf-at", "blocks.1.amp:2"]


def test_stop_names_the_reference_batch_and_module_and_lists_its_frames():
    batch, (module, cls), report = reference_report(DIVERGE)
    out = run_gdb(["ovf break-on-nan", "run", "py-bt", "ovf frames", "kill"], ["--args", PYTHON, SCRIPT, *DIVERGE])
    title, stop_batch, stop_module, stop_cls = stop_summary(out)
    assert (title, stop_batch, stop_module, stop_cls) == ("first non-finite value (inf)", batch, module, cls)
    assert "hit Breakpoint 1, " in out and "ovf_stop_event" in out
    # py-bt: the line of the user's forward that called the module
    assert re.search(r'File ".*diverge.py", line \d+, in forward\n    h = self.amp\(h\)  # ovf-e2e: amp call', out)
    # `ovf frames` prints the reference report's frames, byte for byte
    listing = out[out.index("Last 21 forward frames:"):]
    assert report.split("\n", 2)[2].startswith(listing[: listing.index("\nKill the program")] + "\n")


def test_continue_goes_on_to_the_next_event():
    out = run_gdb(["ovf break-on-nan", "run", "continue", "kill"],
                  ["--args", PYTHON, SCRIPT, *DIVERGE, "--nan-after"])
    stops = re.findall(r"^ovf: (.*) at batch (\d+), frame (\d+)\n     (\S+) ", out, re.M)
    assert stops == [("first non-finite value (inf)", "2", "33", "blocks.1.amp"),
                     ("non-finite value (nan and inf)", "2", "34", "blocks.1.center")]
    assert out.count("hit Breakpoint 1, ") == 2


def test_nan_only_skips_the_inf():
    out = run_gdb(["ovf break-on-nan --nan", "run", "kill"], ["--args", PYTHON, SCRIPT, *DIVERGE, "--nan-after"])
    # only the nan is armed (OVF_STOP=nan), so the event is the nan, though an inf came in
    assert stop_summary(out)[:3] == ("non-finite value (nan)", 2, "blocks.1.center")
    assert out.count("hit Breakpoint 1, ") == 1


def test_module_glob_stops_only_there():
    out = run_gdb(["ovf break-on-nan --module 'blocks.2.*'", "run", "kill"], ["--args", PYTHON, SCRIPT, *DIVERGE])
    assert stop_summary(out)[1:3] == (2, "blocks.2.fc")
    assert out.count("hit Breakpoint 1, ") == 1


def test_after_batch_skips_earlier_batches():
    # inf from batch 1 on; its backward leaves NaN weights, so batch 3 starts non-finite
    out = run_gdb(["ovf break-on-nan --after-batch 3", "run", "kill"],
                  ["--args", PYTHON, SCRIPT, "--inf-at", "blocks.0.amp:1"])
    assert stop_summary(out)[:4] == ("non-finite value (nan)", 3, "blocks.0.fc", "Linear")
    assert out.count("hit Breakpoint 1, ") == 1


def test_if_expression_is_evaluated_over_the_event():
    out = run_gdb(["ovf break-on-nan --if \"nan > 0 and kind == 'output' and module.endswith('center')\"", "run",
                   "kill"], ["--args", PYTHON, SCRIPT, *DIVERGE, "--nan-after"])
    assert stop_summary(out)[1:3] == (2, "blocks.1.center")
    assert out.count("hit Breakpoint 1, ") == 1  # the amp's inf was passed over silently
    assert "ovf: first non-finite" not in out


def test_the_breakpoint_is_an_ordinary_one():
    out = run_gdb(["ovf break-on-nan", "info breakpoints", "disable 1", "run", "info breakpoints", "delete 1",
                   "info breakpoints"], ["--args", PYTHON, SCRIPT, *DIVERGE, "--steps", "3"])
    assert re.search(r"^1\s+breakpoint\s+keep y\s+<PENDING>\s+ovf_stop_event", out, re.M)
    assert "hit Breakpoint" not in out and "exited normally" in out  # disabled: the run goes through
    assert re.search(r"^1\s+breakpoint\s+keep n\s+0x[0-9a-f]+ in ovf_stop_event", out, re.M)
    assert "No breakpoints or watchpoints." in out
