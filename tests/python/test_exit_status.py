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
from build_paths import PACKAGE_PARENT, PYTHON, run_ovf_child

NEVER = "1000000"
LATE = (
    "ovf: non-finite values were found after the program's last check (the report above); "
    "exit status 1, as the raise would have given"
)

TRAIN = """\
import sys
import torch
from torch import nn

class Log(nn.Module):
    def forward(self, x):
        return torch.log(x)

net = nn.Sequential(nn.Linear(3, 3), Log())
with torch.no_grad():
    net[0].weight.fill_(0.1)
    net[0].bias.zero_()
if "--api" in sys.argv:
    import ovf
    ovf.DebugUnderflowOverflow(net, device_mode="fast")
last = int(sys.argv[1])
for batch in range(last + 1):
    net(torch.ones(2, 3) + (-100.0 if batch == last else 100.0))  # log(-29.7): NaN
    print(f"batch {batch} done", flush=True)
print("training finished", flush=True)
if "--exit-0" in sys.argv:
    sys.exit(0)
"""


@pytest.fixture
def train(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    return str(path)


def _lines_after_training(out):
    lines = out.stdout.splitlines()
    return lines[lines.index("training finished") :]


@pytest.mark.parametrize("ending", [[], ["--exit-0"]], ids=["falls-off-its-end", "sys-exit-0"])
def test_a_nan_in_the_last_batch_found_at_exit_gives_status_1(train, ending):
    out = run_ovf_child(["-m", "ovf", train, "3", *ending], OVF_TEST_DEFER=NEVER)
    assert out.returncode == 1, out.stderr
    after = _lines_after_training(out)
    assert after[1:4] == ["output has nans", "", "Detected inf/nan during batch_number=3"]
    assert "     nan      nan output" in after
    assert out.stderr.splitlines() == [LATE]


def test_the_api_in_a_plain_script_gives_status_1_too(train):
    out = run_ovf_child([train, "3", "--api"], OVF_TEST_DEFER=NEVER)
    assert out.returncode == 1, out.stderr
    assert _lines_after_training(out)[3] == "Detected inf/nan during batch_number=3"
    assert out.stderr.splitlines() == [LATE]


def test_warn_mode_and_a_healthy_run_still_exit_0(train):
    warn = run_ovf_child(["-m", "ovf", "--on-nan", "warn", train, "3"], OVF_TEST_DEFER=NEVER)
    assert (warn.returncode, warn.stderr) == (0, "")
    assert _lines_after_training(warn)[3] == "Detected inf/nan during batch_number=3"
    healthy = run_ovf_child(["-m", "ovf", train, "-1"], OVF_TEST_DEFER=NEVER)
    assert (healthy.returncode, healthy.stderr) == (0, "")
    assert healthy.stdout.splitlines() == ["training finished"]


def test_without_deferral_the_raise_comes_in_the_batch(train):
    out = run_ovf_child(["-m", "ovf", train, "3"])
    assert out.returncode == 1
    assert "training finished" not in out.stdout
    assert out.stderr.splitlines()[-1].startswith("ovf.NonFiniteError: DebugUnderflowOverflow")


def test_ctrl_c_in_the_wait_at_exit_gives_130_and_no_ignored_exception(train):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OVF_")}
    env.update(PYTHONPATH=PACKAGE_PARENT, OVF_TEST_DEFER=NEVER)
    child = subprocess.Popen(
        [PYTHON, "-m", "ovf", "--on-nan", "wait", train, "3"],
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
        rest, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 130, err
    assert "training finished\n" in seen
    assert "Exception ignored" not in err
    assert err.splitlines() == [
        "ovf: the wait for a debugger was interrupted (Ctrl-C); exit status 130"
    ]


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
