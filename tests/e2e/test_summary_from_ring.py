"""The event summary a process writes (event_summary.cpp) and the one python3 -m ovf.ranks
reads from its ring in a core (ovf_ring/first_value.py) are the same, field by field, for
each kind of first non-finite value: a module's output, ops that produced it (inside a
composite one too), a backward op with its forward line, an optimizer step.
Two implementations of the same words: a change to one that the other lacks fails here."""

import json
import os
import subprocess

import pytest
from harness import PACKAGE_PARENT, PYTHON, TIMEOUT, TOP, abort_core, clean_env

CASES = os.path.join(TOP, "tests", "e2e", "scripts", "op_cases.py")


@pytest.mark.parametrize(
    "flags, case, kind",
    [
        ((), "log", "module output"),
        (("--ops",), "log", "op"),
        (("--ops",), "div", "op"),
        (("--ops", "--backward"), "sqrt", "op"),
        (("--ops",), "mha", "op"),
        ((), "step", "optimizer step"),
    ],
    ids=["module", "op", "div", "backward-op", "attention", "step"],
)
def test_the_ring_gives_the_summary_the_process_wrote(tmp_path, flags, case, kind):
    events = tmp_path / "events"
    events.mkdir()
    core, _ = abort_core(
        tmp_path, args=[case], script=CASES, ovf_args=[*flags, "--event-dir", str(events)]
    )
    (written,) = events.glob("ovf-event-*.json")
    written = json.loads(written.read_text())
    out = subprocess.run(
        [PYTHON, "-m", "ovf.ranks", str(core), "--json"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=clean_env(PYTHONPATH=PACKAGE_PARENT),
    )
    assert (out.returncode, out.stderr) == (0, ""), out.stderr
    read = json.loads(out.stdout)["first"]
    assert written["kind"] == kind, written
    # module mode's replay named the op, in both (--ops names it itself: no replay)
    replayed = written["replay"]["op"] if written["replay"] else None
    assert replayed == ("aten::log" if kind == "module output" else None), written
    assert read.pop("host") is None  # a core does not say which host wrote it
    written.pop("host")
    if case == "step":
        # The step's event is answered (aborted) at the next forward, whose own event took
        # the snapshot: the ring no longer holds the step's program line, and its latest
        # event is that forward's (nan and inf), where the summary has the step's (inf).
        with open(CASES) as f:
            born = next(i for i, text in enumerate(f, 1) if text.endswith("# born: step\n"))
        assert (written["line"], written["events"]) == (f"op_cases.py:{born} in main", "inf")
        written.update(line=None, events="nan,inf")
    assert read == written
