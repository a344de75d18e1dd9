"""python3 -m ovf follows a program that execs itself (issue 23 item 9): a script that
replaces itself with `os.execv(sys.executable, ...)` lost ovf without a word and its
NaN went by with exit status 0. The new image runs under ovf with this run's options,
and one line says that its ring starts empty."""

import os

from build_paths import REPO, run_ovf_child

LOG_NAN = os.path.join(REPO, "tests", "python", "scripts", "log_nan.py")


def test_an_exec_goes_on_under_ovf_with_the_same_options():
    out = run_ovf_child(["-m", "ovf", LOG_NAN, "1", "3", "--exec"])
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:3] == ["first image", "batch 0 done", "output has nans"]
    assert "Detected inf/nan during batch_number=1" in lines
    errors = out.stderr.splitlines()
    assert errors[0].startswith("ovf: the program execs ")
    assert errors[0].endswith(": ovf goes on in the new program (its ring starts empty)")
    assert errors[-1].startswith("ovf.NonFiniteError: DebugUnderflowOverflow")
    warn = run_ovf_child(["-m", "ovf", "--on-nan", "warn", LOG_NAN, "1", "3", "--exec"])
    assert warn.returncode == 0, warn.stderr
    # warn, not raise: the option went on into the new program
    assert warn.stdout.splitlines()[-2:] == ["batch 2 done", "training finished"]
