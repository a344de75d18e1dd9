"""The session the README promises on a GPU: examples/fp16_autocast_overflow.py under
`ovf break-on-nan`, in both device modes, stops at the fp16 overflow of
encoder.block.2.layer.1.dropout in batch 0. Skips without a CUDA GPU. Passed under
cuda-gdb on a lent NVIDIA H200 (tools/gpu-check.sh puts a `gdb` running it in /usr/bin)."""

import os
import subprocess

import pytest
from harness import PACKAGE_PARENT, PYTHON, TOP, clean_env, stop_summary

EXAMPLE = os.path.join(TOP, "examples", "fp16_autocast_overflow.py")


def _cuda_available():
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    return subprocess.run([PYTHON, "-c", probe], capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(
    not _cuda_available(), reason="no CUDA device (torch.cuda.is_available() is False)"
)


@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_fp16_autocast_overflow_stops_at_the_dropout(debugger, mode):
    env = clean_env(PYTHONPATH=PACKAGE_PARENT, OVF_DEVICE_MODE=mode)
    out = debugger.run(
        ["ovf break-on-nan", "run", "ovf status", debugger.cut(), "kill"],
        program=[PYTHON, EXAMPLE],
        env=env,
        timeout=600,
    )
    assert stop_summary(out)[1:] == (0, "encoder.block.2.layer.1.dropout", "Dropout")
    assert f"device statistics: {mode} mode; backends used:" in out
