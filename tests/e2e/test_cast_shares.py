"""What a cast would lose (ovf watch --cast): a float32 regression whose head's output
outgrows float8_e4m3fn (scripts/cast_shares.py) stops in gdb and LLDB where a direct
cast first loses more than 0.1% of a tensor's values (the script's own oracle), live and
from cores; `ovf frames --headroom` shows every line's losses; a healthy run and a run
without --cast never stop; bad limits are refused in one line."""

import json
import os

from harness import PACKAGE_PARENT, PYTHON, TOP, clean_env, run_bounded, run_python

SCRIPT = os.path.join(TOP, "tests", "e2e", "scripts", "cast_shares.py")
ENV = dict(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
ARMED = "stop at a cast to fp8_e4m3 that would overflow > 0.1% of a tensor's values"
TITLE = (
    "ovf: cast loss: a cast to fp8_e4m3 that would overflow > 0.1% of a tensor's values"
    " at batch 17, frame 106"
)
CULPRIT = "     4 (Linear): output overflow 3.12% (8 of 256 values) in a cast to fp8_e4m3"
# ovf frames 1 --headroom at the stop: each line's losses, by target
HEADROOM = """\
                  4 Linear
2.51e-03 3.12e+00 weight  [cast: fp8_e4m3 subnormal 1.56%]
2.42e+00 2.42e+00 bias  [cast: lossless]
1.92e-05 2.98e+01 input[0]  [cast: fp16 subnormal <0.01%; fp8_e4m3 flush 0.0366% subnormal 1.07%; \
fp8_e5m2 subnormal <0.01%]
9.75e+01 4.88e+02 output  [cast: fp8_e4m3 overflow 3.12%]"""


def test_the_oracle_names_the_heads_output_at_batch_17():
    out = run_bounded(
        [PYTHON, SCRIPT, "fp8_regression", "--oracle"], timeout=300, env=clean_env(**ENV)
    )
    assert out.splitlines()[-1] == "oracle: 4 output at batch 17: 0.0312", out


def test_the_debuggers_stop_where_the_oracle_does_live_and_from_cores(debugger, tmp_path):
    core = tmp_path / "core"
    out = debugger.run(
        [
            "ovf watch --cast fp8_e4m3 --overflow 0.001",
            "run",
            "ovf status",
            "ovf frames 1 --headroom",
            debugger.gcore(core),
            "kill",
        ],
        program=[PYTHON, SCRIPT, "fp8_regression"],
        env=clean_env(**ENV),
        cwd=TOP,
        timeout=300,
    )
    assert "ovf: armed: " + ARMED in out, out
    assert debugger.hits(out) == 1, out
    stop = out.index(TITLE)
    assert out.index("batch 16 loss") < stop and "batch 17 loss" not in out, out
    assert CULPRIT + "  (input[0] abs max 2.98e+01)\n" in out, out
    assert (
        "stops on: cast, a cast to fp8_e4m3 that would overflow > 0.1% of a tensor's values,"
        " cast losses counted" in out
    ), out
    assert "last event: cast at record 442, batch 17, 4 (Linear)" in out, out
    assert "Last 1 forward frames:\nabs min  abs max  metadata\n" + HEADROOM + "\n" in out, out
    picture = tmp_path / "shares.png"
    post = debugger.run(
        [
            "ovf status",
            "ovf frames 1 --headroom",
            f"ovf plot {picture} --cast fp8_e4m3 --batches --json",
        ],
        core=core,
        timeout=120,
    )
    assert "last event: cast at record 442, batch 17, 4 (Linear)" in post, post
    assert HEADROOM in post, post
    # the plot's cells: each module's largest share lost per batch, the head's 8 of 256 at 17
    drawn = json.loads(next(line for line in post.splitlines() if line.startswith('{"rows"')))
    assert drawn["rows"][4] == "4 (Linear)" and drawn["columns"][-1] == "17", drawn["rows"]
    assert drawn["values"][4] == [0.0] * 17 + [0.03125], drawn["values"][4]
    assert all(v in (0.0, None) for row in drawn["values"][:4] for v in row), drawn["values"]
    assert picture.stat().st_size > 10_000


def test_limits_nothing_passes_and_counting_alone_never_stop(debugger):
    # e5m2 reaches 57344: nothing here overflows it; --cast alone only counts
    for armed in ("ovf watch --cast fp8_e5m2 --overflow 0", "ovf watch --cast fp8_e4m3"):
        out = debugger.run(
            [armed, "run"],
            program=[PYTHON, SCRIPT, "fp8_regression"],
            env=clean_env(**ENV),
            cwd=TOP,
            timeout=300,
        )
        assert debugger.hits(out) == 0 and "batch 19 loss 7567" in out, out


def test_bad_watch_options_are_one_line_errors(debugger):
    out = debugger.run(
        [
            "ovf watch --overflow 0.1",
            "ovf watch --cast fp8_e4m3 --overflow 2",
            "ovf watch --cast fp4 --overflow 0.1",
            "ovf status",
        ]
    )
    assert "ovf watch: --overflow, --flush and --subnormal need --cast TYPE" in out, out
    assert "'2' is not a share (a number from 0 to 1)" in out, out
    assert "invalid choice: 'fp4'" in out, out
    assert "debugger: nothing armed" in out, out


def test_python_mode_counts_the_shares_and_the_run_ends_well():
    # without a debugger the shares are recorded (ovf frames --headroom reads them) and
    # nothing non-finite happened: exit status 0, no ovf line
    done = run_python(
        ["-m", "ovf", "--cast-shares", SCRIPT, "fp8_regression"],
        env=clean_env(PYTHONPATH=PACKAGE_PARENT, **ENV),
    )
    assert done.returncode == 0 and "batch 19 loss 7567" in done.stdout, done
    assert "ovf" not in done.stdout + done.stderr, done
