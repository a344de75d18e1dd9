"""What ovf says about torch.compile'd code, under gdb and LLDB: at a stop inside a compiled
graph and from the kernel core of the same run, `ovf status` and `ovf frames` say once that
the ops Inductor fused were not seen, as the runtime's own report does; for an eager run of
the same script they say nothing of it. torch.compile with ovf needs torch >= 2.5 (the
trixie leg runs these)."""

import os
import re

import pytest
import torch

from harness import CUT_MARK, PYTHON, TOP, abort_core

VERSION = tuple(
    int("".join(c for c in part if c.isdigit()) or 0) for part in torch.__version__.split(".")[:2]
)
pytestmark = pytest.mark.skipif(
    VERSION < (2, 5),
    reason=(
        f"torch.compile with ovf needs torch >= 2.5 (here {torch.__version__}): "
        "the trixie leg runs these"
    ),
)

SCRIPT = os.path.join(TOP, "tests", "e2e", "scripts", "compiled.py")
UNSEEN = (
    "module frames are recorded there; the ATen ops Inductor fuses into its kernels are not "
    "seen (--ops names eager ops only)"
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


def test_a_stop_inside_a_compiled_graph(debugger):
    cut = debugger.cut()
    out = debugger.run(
        ["ovf break-on-nan", "run", cut, "ovf status", cut, "ovf frames", cut, "kill"],
        program=[PYTHON, SCRIPT],
        timeout=TIMEOUT,
    )
    stop, status, frames, _ = out.split(CUT_MARK)
    assert re.search(
        r"^ovf: first non-finite value \(inf\) at batch 2, frame 9\n     1 \(Square\)", stop, re.M
    ), out
    # the stop's summary shows that frame and the one before, both compiled
    assert f"ovf: 2 of 2 frames listed ran in torch.compile'd graphs: {UNSEEN}\n" in stop, stop
    _says_it_once(status, frames)


def test_a_kernel_core_of_a_compiled_run(debugger, tmp_path):
    core, stdout = abort_core(tmp_path, args=[], script=SCRIPT, timeout=TIMEOUT)
    # the runtime's report said it, once, after its frames
    assert stdout.count(UNSEEN) == 1 and f"\n\n\n\n{NOTE}" in stdout, stdout
    cut = debugger.cut()
    status, frames, _ = debugger.run(["ovf status", cut, "ovf frames", cut], core=core).split(
        CUT_MARK
    )
    _says_it_once(status, frames)


def test_an_eager_run_says_nothing_of_compiled_code(debugger):
    out = debugger.run(
        ["ovf break-on-nan", "run", "ovf status", "ovf frames", "kill"],
        program=[PYTHON, SCRIPT, "--eager"],
        timeout=TIMEOUT,
    )
    assert re.search(r"^     1 \(Square\): output abs max inf", out, re.M), out
    assert "torch.compile" not in out and "Inductor" not in out, out
