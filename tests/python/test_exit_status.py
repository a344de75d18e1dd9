"""A NaN run never exits 0 (issue 23 items 3 and 9): in fast device mode the last
batch's statistics arrive after the script's last line, and the raise they call for
has no code left to raise in; the exit status says it instead (1, as the raise would
have), whether the script ends by falling off its end, by sys.exit(0), or with ovf
imported by hand. Ctrl-C in the wait at exit ends the program with 130 and no
"Exception ignored". OVF_TEST_DEFER=1000000 makes CPU tensors' statistics arrive only
when waited for, as a GPU's do when the host runs ahead."""

import os
import signal
import subprocess
import textwrap

import pytest
from build_paths import PACKAGE_PARENT, PYTHON, REPO, WENT_ON, run_ovf_child

NEVER = "1000000"
LATE = (
    "ovf: non-finite values were found after the program's last check (the report above); "
    "exit status 1, as the raise would have given"
)

TRAIN = os.path.join(REPO, "tests", "python", "scripts", "log_nan.py")


def _lines_after_training(out):
    lines = out.stdout.splitlines()
    return lines[lines.index("training finished") :]


@pytest.mark.parametrize("ending", [[], ["--exit-0"]], ids=["falls-off-its-end", "sys-exit-0"])
def test_a_nan_in_the_last_batch_found_at_exit_gives_status_1(ending):
    out = run_ovf_child(["-m", "ovf", TRAIN, "3", "4", *ending], OVF_TEST_DEFER=NEVER)
    assert out.returncode == 1, out.stderr
    after = _lines_after_training(out)
    assert after[1:4] == ["output has nans", "", "Detected inf/nan during batch_number=3"]
    assert "     nan      nan output" in after
    assert out.stderr.splitlines() == [LATE]


def test_the_api_in_a_plain_script_gives_status_1_too():
    out = run_ovf_child([TRAIN, "3", "4", "--api"], OVF_TEST_DEFER=NEVER)
    assert out.returncode == 1, out.stderr
    assert _lines_after_training(out)[3] == "Detected inf/nan during batch_number=3"
    assert out.stderr.splitlines() == [LATE]


def test_warn_mode_trains_on_and_exits_1_and_a_healthy_run_exits_0():
    warn = run_ovf_child(["-m", "ovf", "--on-nan", "warn", TRAIN, "3", "4"], OVF_TEST_DEFER=NEVER)
    assert (warn.returncode, warn.stderr) == (1, WENT_ON + "\n")
    assert _lines_after_training(warn)[3] == "Detected inf/nan during batch_number=3"
    assert "training finished" in warn.stdout.splitlines()
    api = run_ovf_child([TRAIN, "3", "4", "--api", "--warn"], OVF_TEST_DEFER=NEVER)
    assert (api.returncode, api.stderr) == (1, WENT_ON + "\n")  # its exit handler judges
    healthy = run_ovf_child(["-m", "ovf", TRAIN, "-1", "4"], OVF_TEST_DEFER=NEVER)
    assert (healthy.returncode, healthy.stderr) == (0, "")
    assert healthy.stdout.splitlines()[-2:] == ["batch 3 done", "training finished"]


LAST_STEP = os.path.join(REPO, "tests", "python", "scripts", "last_step_nan.py")
STEP_LINE = (
    "ovf: the first non-finite value was written by optimizer.step (SGD) into weight "
    "(after batch 1)"
)


@pytest.mark.parametrize("on_nan, last_line", [("raise", LATE), ("warn", WENT_ON)])
def test_a_last_step_that_overflows_is_answered_at_the_exit(on_nan, last_line):
    """No forward comes after the step that made the weights inf: its event is answered
    when the program ends (the report, status 1), not lost with a status of 0."""
    out = run_ovf_child(["-m", "ovf", "--on-nan", on_nan, LAST_STEP])
    assert (out.returncode, out.stderr) == (1, last_line + "\n"), out.stderr
    assert _lines_after_training(out)[1:3] == ["", "Detected inf/nan during batch_number=1"]
    assert out.stdout.splitlines()[-2:] == [
        STEP_LINE,
        "ovf: not replayed: the value was written by SGD.step(), whose parameters and state"
        " before it are gone (--capture optimizer keeps a copy of them before each step to"
        " replay it)",
    ]


def test_without_deferral_the_raise_comes_in_the_batch():
    out = run_ovf_child(["-m", "ovf", TRAIN, "3", "4"])
    assert out.returncode == 1
    assert "training finished" not in out.stdout
    assert out.stderr.splitlines()[-1].startswith("ovf.NonFiniteError: DebugUnderflowOverflow")


def ctrl_c_in_the_wait(*launch):
    """Runs `launch` + ["--on-nan", "wait", TRAIN, "3", "4"], sends Ctrl-C once ovf
    says it waits for a debugger; (exit status, stdout lines up to then, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OVF_")}
    env.update(PYTHONPATH=PACKAGE_PARENT, OVF_TEST_DEFER=NEVER)
    child = subprocess.Popen(
        [PYTHON, *launch, "--on-nan", "wait", TRAIN, "3", "4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        seen = []
        for line in child.stdout:
            seen.append(line)
            if "is waiting for a debugger" in line:
                break
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
    finally:
        child.kill()
    return child.returncode, seen, err


def test_ctrl_c_in_the_wait_at_exit_gives_130_and_no_ignored_exception():
    status, seen, err = ctrl_c_in_the_wait("-m", "ovf")
    assert status == 130, err
    assert "training finished\n" in seen
    assert "Exception ignored" not in err
    assert err.splitlines() == [
        "ovf: the wait for a debugger was interrupted (Ctrl-C); exit status 130"
    ]


SLOW_FLUSH = """
import runpy, sys, time

class SlowFlush:  # a Ctrl-C lands in the flush just before the wait, as it may under load
    def __init__(self, out):
        self.out, self.flushes_after_message = out, None
    def write(self, text):
        self.out.write(text)
        self.out.flush()
        if "is waiting for a debugger" in text:
            self.flushes_after_message = 0
        return len(text)
    def flush(self):
        if self.flushes_after_message is not None:
            self.flushes_after_message += 1
            if self.flushes_after_message == 2:  # the message's own flush, then the wait's
                time.sleep(5)

sys.stdout = SlowFlush(sys.stdout)
sys.argv = ["ovf"] + sys.argv[1:]
runpy.run_module("ovf", run_name="__main__", alter_sys=True)
"""


def test_ctrl_c_during_the_flush_before_the_wait_ends_it():
    status, _, err = ctrl_c_in_the_wait("-c", SLOW_FLUSH)
    assert status == 130, err
    assert err.splitlines()[-1] == (
        "ovf: the wait for a debugger was interrupted (Ctrl-C); exit status 130"
    )


def test_remove_raises_what_its_last_frames_call_for():
    code = textwrap.dedent(
        """
        import torch, ovf
        net = torch.nn.Linear(2, 2)
        debug = ovf.DebugUnderflowOverflow(net, device_mode="fast")
        with torch.no_grad():
            net(torch.full((1, 2), float("nan")))
        try:
            debug.remove()
        except ovf.NonFiniteError:
            print("remove raised")
        """
    )
    out = run_ovf_child(["-c", code], OVF_TEST_DEFER=NEVER)
    assert (out.returncode, out.stderr) == (0, ""), out.stderr
    assert out.stdout.splitlines()[-1] == "remove raised"
