"""What a cast would lose (ovf watch --cast): a float32 regression whose head's output
outgrows float8_e4m3fn (scripts/cast_shares.py) stops in gdb and LLDB where a direct
cast first loses more than 0.1% of a tensor's values (the script's own oracle), live and
from cores; `ovf frames --headroom` shows every line's losses; a healthy run and a run
without --cast never stop; bad limits are refused in one line."""

import functools
import json
import os
import re
import sys

from harness import PACKAGE_PARENT, PYTHON, TOP, clean_env, run_bounded, run_python

sys.path.insert(0, os.path.join(TOP, "plugin"))
from ovf_ring import cast  # noqa: E402 - the debuggers' wording of a share

SCRIPT = os.path.join(TOP, "tests", "e2e", "scripts", "cast_shares.py")
ENV = dict(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
ARMED = "stop at a cast to fp8_e4m3 that would overflow > 0.1% of a tensor's values"
FRAMES_PER_BATCH = 6  # five layers and the root


@functools.cache  # the same run for every test that asks
def oracle():
    """(module, label, batch, values lost, values) where a direct cast first loses more
    than 0.1% to overflow (scripts/cast_shares.py --oracle)."""
    out = run_bounded(
        [PYTHON, SCRIPT, "fp8_regression", "--oracle"], timeout=300, env=clean_env(**ENV)
    )
    found = re.fullmatch(r"oracle: (\S+) (.+) at batch (\d+): (\d+) of (\d+)", out.splitlines()[-1])
    assert found, out
    module, label, batch, lost, numel = found.groups()
    return module, label, int(batch), int(lost), int(numel)


def test_the_oracle_names_the_heads_output():
    # torch 2.14.1: batch 17, 8 of 256 (torch 2.6's float32 kernels may move it a batch)
    module, label, batch, lost, numel = oracle()
    assert (module, label, numel) == ("4", "output", 256) and 15 <= batch <= 19 and lost > 0


def test_the_debuggers_stop_where_the_oracle_does_live_and_from_cores(debugger, tmp_path):
    module, label, batch, lost, numel = oracle()
    share = cast.percent(lost / numel)
    frame = FRAMES_PER_BATCH * batch + int(module)  # the head is the fifth frame of its batch
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
    stop = out.index(
        "ovf: cast loss: a cast to fp8_e4m3 that would overflow > 0.1% of a tensor's values"
        f" at batch {batch}, frame {frame}\n"
    )
    assert out.index(f"batch {batch - 1} loss") < stop and f"batch {batch} loss" not in out, out
    culprit = (
        f"     {module} (Linear): {label} overflow {share} ({lost} of {numel} values) in a cast"
        " to fp8_e4m3  (input[0] abs max "
    )
    assert culprit in out, out
    assert (
        "stops on: cast, a cast to fp8_e4m3 that would overflow > 0.1% of a tensor's values,"
        " cast losses counted" in out
    ), out
    event = re.search(rf"last event: cast at record \d+, batch {batch}, 4 \(Linear\)\n", out)
    assert event, out
    # ovf frames 1 --headroom: each line's losses by target; the head's output only overflows
    headroom = re.search(
        r"Last 1 forward frames:\nabs min  abs max  metadata\n                  4 Linear\n"
        r"(.* weight  \[cast: .*\]\n.* bias  \[cast: .*\]\n.* input\[0\]  \[cast: .*\]\n"
        rf".* output  \[cast: fp8_e4m3 overflow {re.escape(share)}\])\n",
        out,
    )
    assert headroom, out
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
    assert event.group(0) in post, post
    assert headroom.group(1) in post, post
    # the plot's cells: each module's largest share lost per batch; the head's at the stop
    drawn = json.loads(next(line for line in post.splitlines() if line.startswith('{"rows"')))
    assert drawn["rows"][4] == "4 (Linear)" and drawn["columns"][-1] == str(batch), drawn["rows"]
    assert drawn["values"][4] == [0.0] * batch + [lost / numel], drawn["values"][4]
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
