"""The plugin's formatter against the runtime's own, on a real run: the ring of
a live process read through /proc/PID/mem must print byte for byte what the
runtime prints (its detection report, and _ovf.report)."""

import json
import os
import subprocess
import sys

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("OVF_BUILD_DIR", os.path.join(TOP, "build"))

CHILD = r"""
import contextlib, io, json, os, sys
sys.path[:0] = [os.path.join(TOP, "plugin"), os.path.join(TOP, "tests", "e2e", "scripts")]
import ovf, ovf._auto
from ovf import _ovf
from ovf_ring import report
from ovf_ring.frames import walk_back
from ovf_ring.proc_target import ProcTarget
from ovf_ring.ring import locate
import diverge

# replay=False: the reference's report alone (the replay's lines follow it: test_replay.py)
ovf._auto.enable(on_nan="raise", replay=False)
printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    try:
        diverge.main(["--inf-at", "blocks.1.amp:2", "--nan-after", "--steps", "4"])
    except ovf.NonFiniteError:
        pass
ring = locate(ProcTarget(os.getpid(), {"ovf_state": _ovf.state_address()}))
text = printed.getvalue()
result = {"runtime_report": text[text.index("\nDetected"):],
          "plugin_report": report.format_detection_report(
              ring.header.batch, walk_back(ring, ring.header.max_frames_to_save).frames, ring.text),
          "listings": [[_ovf.report(n), report.format_frames(walk_back(ring, n).frames, ring.text)]
                       for n in (1, 2, 7, 21, 500)]}
print(json.dumps(result))
"""


def run_child(capacity):
    env = dict(
        os.environ, PYTHONPATH=os.path.join(BUILD, "python"), OVF_RING_CAPACITY=str(capacity)
    )
    out = subprocess.run(
        [sys.executable, "-c", f"TOP = {TOP!r}\n" + CHILD],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.parametrize("capacity", [65536, 64])  # 64: the ring has wrapped many times
def test_plugin_prints_what_the_runtime_prints(capacity):
    result = run_child(capacity)
    assert result["plugin_report"] == result["runtime_report"]
    for runtime, plugin in result["listings"]:
        assert plugin == runtime
    if capacity == 64:
        assert (
            result["listings"][-1][0].count("\n                  ") < 64
        )  # really cut by the wrap
