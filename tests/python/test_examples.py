"""Each example goes non-finite where its docstring says, and ovf names it."""

import os
import subprocess

import pytest
from build_paths import PACKAGE_PARENT, PYTHON, REPO

CASES = [
    # script, batch in the report, last frame's header, the non-finite line's label
    ("diverge_lr.py", 5, "shared Embedding", "weight"),
    ("log_negative.py", 3, "features.log_scale LogScale", "output"),
    ("div_zero.py", 2, "pooler MaskedMeanPool", "output"),
]


@pytest.mark.parametrize("script,batch,header,label", CASES)
def test_example_diverges_where_documented(script, batch, header, label):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OVF_")}
    env.update(PYTHONPATH=PACKAGE_PARENT, OPENBLAS_NUM_THREADS="1")
    p = subprocess.run(
        [PYTHON, "-m", "ovf", os.path.join(REPO, "examples", script)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert p.returncode == 1, p.stderr[-2000:]
    lines = p.stdout.splitlines()
    assert f"Detected inf/nan during batch_number={batch}" in lines
    frames = [i for i, line in enumerate(lines) if line == " " * 18 + header]
    assert frames, f"no frame {header!r} in the report"
    last = lines[frames[-1] + 1 :]
    bad = [
        line
        for line in last
        if line.endswith(" " + label) and ("nan" in line[:17] or "inf" in line[:17])
    ]
    assert bad, f"{label} of {header} is not non-finite in the last frame"
    assert p.stderr.rstrip().splitlines()[-1].startswith("ovf.NonFiniteError: ")


def test_fp16_example_explains_itself_without_a_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: this test checks the message printed without one")
    p = subprocess.run(
        [PYTHON, os.path.join(REPO, "examples", "fp16_autocast_overflow.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=PACKAGE_PARENT),
    )
    assert p.returncode == 0
    assert "GPU" in (p.stdout + p.stderr)
