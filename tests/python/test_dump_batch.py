"""--dump-batch: the step that made the first inf/nan is saved (inputs, parameters, random
state) and ovf.replay_batch runs it again in a fresh process, where it makes the same
non-finite values in the same rows (the loop's own printed indices are the oracle); a
NaN made in the backward pass is saved at the process's exit, before any step wrote the
parameters; a healthy run saves nothing; a file is never replaced; bad options are
refused in one line."""

import json
import os
import re

import pytest
from build_paths import REPO, run_ovf_child

SCRIPTS = os.path.join(REPO, "tests", "python", "scripts")
SCRIPT = os.path.join(SCRIPTS, "loader_samples.py")
BAD = 37

# A fresh process: the script's own model, the dump's step run again; prints the rows
# of the output that hold NaN/Inf and what the dump says of itself.
REPLAY = (
    """
import json, sys, torch, ovf
sys.path.insert(0, %r)
from loader_samples import Square
model = torch.nn.Sequential(torch.nn.Linear(4, 4), Square())
out = ovf.replay_batch(model, sys.argv[1])
saved = torch.load(sys.argv[1])
print(json.dumps({
    "rows": (~torch.isfinite(out)).flatten(1).any(1).nonzero().flatten().tolist(),
    "batch": saved["batch"],
    "samples": saved["samples"],
    "changed": saved["changed_in_place"],
}))
"""
    % SCRIPTS
)


def failing_batch(stdout):
    for step, listed in re.findall(r"^epoch 0 step (\d+) indices (\[.*\])$", stdout, re.M):
        if BAD in json.loads(listed):
            return int(step), json.loads(listed)
    raise AssertionError(stdout)


def dumped(tmp_path):
    (name,) = os.listdir(tmp_path)
    assert re.fullmatch(r"ovf-batch-.+-\d+\.pt", name), name
    return str(tmp_path / name)


@pytest.mark.parametrize("level", [[], ["--ops"]])
def test_the_failing_step_is_saved_and_replays_its_nan_in_a_fresh_process(tmp_path, level):
    out = run_ovf_child(
        ["-m", "ovf", *level, "--dump-batch", str(tmp_path), SCRIPT, "--bad", str(BAD)],
        timeout=180,
    )
    assert out.returncode == 1, out.stderr
    step, indices = failing_batch(out.stdout)
    path = dumped(tmp_path)
    assert (
        f"ovf: saved batch {step}'s inputs, parameters and random state to {path}"
        " (ovf.replay_batch(model, path) runs it again)\n" in out.stderr
    ), out.stderr
    replay = run_ovf_child(["-c", REPLAY, path], timeout=180)
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout) == {
        "rows": [indices.index(BAD)],
        "batch": step,
        "samples": [{"dataset": "Squares", "total": 8, "indices": indices}],
        "changed": [],
    }


BACKWARD = """
import torch
torch.manual_seed(0)
model = torch.nn.Linear(3, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    x = torch.ones(2, 3) * (step - 2)  # step 2: all zeros
    y = model(x)
    loss = (y * 0 + x).pow(2).sum().sqrt() + y.sum()
    optimizer.zero_grad()
    loss.backward()  # sqrt's gradient at 0: inf
    optimizer.step()
    print("step", step, flush=True)
"""


def test_a_nan_of_the_backward_pass_is_saved_before_any_step_writes_the_weights(tmp_path):
    script = tmp_path / "backward_nan.py"
    script.write_text(BACKWARD)
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    out = run_ovf_child(
        ["-m", "ovf", "--ops", "--backward", "--dump-batch", str(dumps), str(script)], timeout=180
    )
    assert out.returncode == 1, out.stderr
    assert "step 1\n" in out.stdout and "step 2" not in out.stdout, out.stdout
    path = dumped(dumps)
    assert f"ovf: saved batch 2's inputs, parameters and random state to {path}" in out.stderr
    check = run_ovf_child(
        [
            "-c",
            "import sys, torch; torch.manual_seed(0); m = torch.nn.Linear(3, 3);"
            "o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "for step in range(2):\n"
            "    x = torch.ones(2, 3) * (step - 2)\n"
            "    y = m(x); loss = (y * 0 + x).pow(2).sum().sqrt() + y.sum()\n"
            "    o.zero_grad(); loss.backward(); o.step()\n"
            "saved = torch.load(sys.argv[1])\n"
            "print(all(torch.equal(saved['state_dict'][k], v) for k, v in m.state_dict().items()),"
            " saved['args'][0].abs().max().item())",
            path,
        ]
    )
    # the weights two steps trained, not a third step's (which would be NaN/Inf)
    assert check.stdout == "True 0.0\n", check.stderr


def test_a_healthy_run_saves_nothing(tmp_path):
    out = run_ovf_child(["-m", "ovf", "--dump-batch", str(tmp_path), SCRIPT], timeout=180)
    assert out.returncode == 0 and out.stdout.endswith("done\n"), out.stderr
    assert os.listdir(tmp_path) == []
    assert "ovf" not in out.stderr


def test_a_file_in_the_way_is_never_replaced(tmp_path):
    target = tmp_path / "taken.pt"
    target.write_bytes(b"mine")
    code = (
        "from ovf import _dump_batch\n"
        "print(_dump_batch._write_new(%r, {'x': 1}))\n"
        "print(_dump_batch._write_new(%r, {'x': 1}))\n"
    ) % (str(target), str(tmp_path / "new.pt"))
    out = run_ovf_child(["-c", code])
    assert out.stdout == f"{target} exists already; not replaced\n\n", out.stderr
    assert target.read_bytes() == b"mine"
    assert sorted(os.listdir(tmp_path)) == ["new.pt", "taken.pt"]  # no .partial left


@pytest.mark.parametrize(
    "options, message",
    [
        (
            ["--dump-batch", "/nonexistent/dumps"],
            "ovf: --dump-batch '/nonexistent/dumps' is not a directory: make it first (every"
            " rank writes its own file there)",
        ),
        (
            ["--on-nan", "abort", "--dump-batch", "."],
            "ovf: --dump-batch saves the failing step once the event is answered; on_nan abort"
            " ends the process at the event (its core holds the step): choose one",
        ),
    ],
)
def test_bad_dump_options_are_refused_in_one_line(options, message):
    out = run_ovf_child(["-m", "ovf", *options, SCRIPT, "--bad", str(BAD)], timeout=180)
    assert out.returncode == 2 and out.stdout == "", out
    assert out.stderr.strip() == message


def test_inputs_torch_load_refuses_by_default_are_named_in_one_line(tmp_path):
    path = str(tmp_path / "namespace.pt")
    code = (
        "import argparse, sys, torch, ovf\n"
        "torch.save({'format': 'ovf-batch', 'version': 1, 'args': (argparse.Namespace(),)},"
        " sys.argv[1])\n"
        "try:\n"
        "    ovf.replay_batch(torch.nn.Linear(2, 2), sys.argv[1])\n"
        "except ValueError as e:\n"
        "    print(e)\n"
    )
    out = run_ovf_child(["-c", code, path])
    assert out.stdout.startswith(
        f"ovf: {path} holds inputs torch.load does not load with weights_only=True (Unsupported"
        " global: GLOBAL argparse.Namespace was not an allowed global by default."
    ), out
    assert out.stdout.endswith("; pass weights_only=False if you trust the file\n")
    assert out.stdout.count("\n") == 1


INFERENCE = """
import torch
model = torch.nn.Linear(3, 3)
with torch.inference_mode():
    for step in range(3):
        model(torch.ones(2, 3))  # inference tensors keep no version counter
print("evaluated", flush=True)
"""


def test_inputs_made_in_inference_mode_are_held_without_a_word(tmp_path):
    script = tmp_path / "evaluate.py"
    script.write_text(INFERENCE)
    out = run_ovf_child(["-m", "ovf", "--dump-batch", str(tmp_path), str(script)], timeout=180)
    assert (out.returncode, out.stdout, out.stderr) == (0, "evaluated\n", ""), out
    assert os.listdir(tmp_path) == ["evaluate.py"]
