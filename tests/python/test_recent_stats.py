"""Module mode reads a tensor once per forward where a later hook sees it again
(runtime/torch/recent_stats.h), never a stale value: a tensor written in place
between two hooks is read again (its version moved); a tensor rewritten without a
version (a numpy view of a loader's buffer) is read again at the next forward."""

import os
import re
import subprocess

from build_paths import PACKAGE_PARENT, PYTHON

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts", "recent_stats.py")


def test_a_tensor_changed_since_an_earlier_hook_read_it_is_read_again():
    env = {k: v for k, v in os.environ.items() if not k.startswith("OVF_")}
    p = subprocess.run(
        [PYTHON, SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "PYTHONPATH": PACKAGE_PARENT, "OMP_NUM_THREADS": "1"},
    )
    assert p.returncode == 1, p.stderr
    frames = p.stdout[p.stdout.index("*** Starting batch number=2 ***") :]
    # batch 2's buffer holds 3s (batch 1's 2s were read by that forward's hooks)
    assert "\n3.00e+00 3.00e+00 input[0]\n8.23e-01 3.21e+00 output\n" in frames, p.stdout
    # b's input is a's output times 1000, written after a's hook read it (its output: inf
    # or nan, as the BLAS sums infinities of both signs)
    assert re.search(r"\n8\.23e\+02 3\.21e\+03 input\[0\]\n +(nan|inf) +\1 output\n", frames), (
        p.stdout
    )
    # batch 1's root frame: its input as the forward read it
    batch1 = p.stdout[: p.stdout.index("*** Starting batch number=2 ***")]
    assert "                   Net\n2.00e+00 2.00e+00 input[0]\n" in batch1, p.stdout


def test_a_sequentials_inputs_are_its_layers_outputs_read_once():
    import ovf
    import torch
    from ovf import _ovf
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
    watch = ovf.DebugUnderflowOverflow(model)
    try:
        before = _ovf._recent_stats_hits()
        model(torch.ones(2, 4))
        # layers 1 and 2 read the outputs of 0 and 1; the root its input (layer 0's) and
        # its output (layer 2's)
        assert _ovf._recent_stats_hits() - before == 4
        _ovf._use_recent_stats(False)
        model(torch.ones(2, 4))
        assert _ovf._recent_stats_hits() - before == 4
    finally:
        _ovf._use_recent_stats(True)
        watch.remove()
