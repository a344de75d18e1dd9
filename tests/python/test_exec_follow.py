"""python3 -m ovf follows a program that execs itself (issue 23 item 9): a script that
replaces itself with `os.execv(sys.executable, ...)` lost ovf without a word and its
NaN went by with exit status 0. The new image runs under ovf with this run's options,
and one line says that its ring starts empty."""

import os

from build_paths import REPO, WENT_ON, run_ovf_child

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
    # the NaN the first image reported still decides the exit status of the process
    assert (warn.returncode, warn.stderr.splitlines()[-1]) == (1, WENT_ON), warn.stderr
    # warn, not raise: the option went on into the new program
    assert warn.stdout.splitlines()[-2:] == ["batch 2 done", "training finished"]


def test_what_the_old_program_had_on_its_way_is_judged_before_the_exec():
    """Fast device mode's last frames are judged before the image goes: a NaN in
    them ends the process with status 1 instead of vanishing with the old image."""
    out = run_ovf_child(["-m", "ovf", LOG_NAN, "3", "4", "--exec-at-end"], OVF_TEST_DEFER="1000000")
    assert out.returncode == 1, out.stderr
    assert "new image" not in out.stdout
    assert "Detected inf/nan during batch_number=3" in out.stdout.splitlines()
    assert out.stderr.splitlines() == [
        "ovf: non-finite values were found after the program's last check (the report "
        "above); exit status 1, as the raise would have given"
    ]
    healthy = run_ovf_child(["-m", "ovf", LOG_NAN, "-1", "4", "--exec-at-end"])
    assert healthy.returncode == 0, healthy.stderr
    assert healthy.stdout.splitlines()[-1] == "new image"


EXECVP = """\
import os, sys
here = os.path.dirname(sys.executable)
os.environ["PATH"] = os.pathsep.join(["/nonexistent1", "/nonexistent2", here])
os.execvp(os.path.basename(sys.executable), ["python", "-c", "print('exec ok')"])
"""


def test_execvp_through_path_says_it_once(tmp_path):
    script = tmp_path / "execvp.py"
    script.write_text(EXECVP)
    out = run_ovf_child(["-m", "ovf", str(script)])
    assert (out.returncode, out.stdout) == (0, "exec ok\n"), out.stderr
    assert len(out.stderr.splitlines()) == 1
    assert out.stderr.startswith("ovf: the program execs ")


SPAWN = """\
import os, sys
code = "import os; print(os.environ.get('OVF_ENABLE'))"
status = os.spawnv(os.P_WAIT, sys.executable, [sys.executable, "-c", code])
print("child exited", status)
"""


def test_a_forked_child_that_execs_another_program_is_left_alone(tmp_path):
    script = tmp_path / "spawn.py"
    script.write_text(SPAWN)
    out = run_ovf_child(["-m", "ovf", str(script)])
    assert (out.returncode, out.stderr) == (0, "")
    assert out.stdout.splitlines() == ["None", "child exited 0"]
