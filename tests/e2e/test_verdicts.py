"""The producing op's verdict (the op re-run on its own inputs, on its device and in
float64) in gdb's and LLDB's stop summary and `ovf status`, live and from the core
(tests/python/scripts/verdicts.py; tests/python/test_verdicts.py has every kind)."""

import os

from harness import PYTHON, TOP, clean_env

SCRIPT = os.path.join(TOP, "tests", "python", "scripts", "verdicts.py")
WHY = "aten::to to float16: input abs max 2.21e+05 > 65504"
VERDICT = "finite in float64 (abs max 2.21e+05): float16's range or precision here"


def test_the_debuggers_show_the_verdict_live_and_from_the_core(debugger, tmp_path):
    core = tmp_path / "core"
    out = debugger.run(
        ["ovf break-on-nan --ops", "run", "ovf status", debugger.gcore(core), "kill"],
        program=[PYTHON, SCRIPT, "float16_cast"],
        env=clean_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"),
        cwd=TOP,
        timeout=300,
    )
    assert debugger.hits(out) == 1, out
    assert f"\n     why: {WHY}\n     verdict: {VERDICT}\n" in out, out  # the stop summary
    assert f"\n  verdict: {VERDICT}\n" in out, out  # ovf status, under its first non-finite
    post = debugger.run(["ovf status"], core=core, timeout=120)
    assert f"\n  verdict: {VERDICT}\n" in post, post
