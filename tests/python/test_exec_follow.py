"""python3 -m ovf follows a program that execs itself (issue 23 item 9): a script that
replaces itself with `os.execv(sys.executable, ...)` lost ovf without a word and its
NaN went by with exit status 0. The new image runs under ovf with this run's options,
and one line says that its ring starts empty."""

from build_paths import run_ovf_child

RESTART = """\
import os, sys
import torch
from torch import nn

if sys.argv[1:] == ["first"]:
    print("first image", flush=True)
    os.execv(sys.executable, [sys.executable, __file__, "second"])

class Log(nn.Module):
    def forward(self, x):
        return torch.log(x)

net = nn.Sequential(nn.Linear(3, 3), Log())
with torch.no_grad():
    net[0].weight.fill_(0.1)
    net[0].bias.zero_()
for batch in range(3):
    net(torch.ones(2, 3) + (-100.0 if batch == 1 else 100.0))  # batch 1: log(-29.7)
    print(f"batch {batch} done", flush=True)
"""


def test_an_exec_goes_on_under_ovf_with_the_same_options(tmp_path):
    script = tmp_path / "restart.py"
    script.write_text(RESTART)
    out = run_ovf_child(["-m", "ovf", str(script), "first"])
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:3] == ["first image", "batch 0 done", "output has nans"]
    assert "Detected inf/nan during batch_number=1" in lines
    errors = out.stderr.splitlines()
    assert errors[0].startswith("ovf: the program execs ")
    assert errors[0].endswith(": ovf goes on in the new program (its ring starts empty)")
    assert errors[-1].startswith("ovf.NonFiniteError: DebugUnderflowOverflow")
    warn = run_ovf_child(["-m", "ovf", "--on-nan", "warn", str(script), "first"])
    assert warn.returncode == 0, warn.stderr
    assert warn.stdout.splitlines()[-1] == "batch 2 done"  # warn, not raise: the option went on
