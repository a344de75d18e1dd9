"""The device engine on a CUDA GPU: the CUDA backend and the portable one give the
CPU engine's numbers on every dtype and layout, and the first-use self-check
rejects a backend that disagrees. Every test skips, saying why, without a GPU
(no GPU has been lent to ovf's builds yet: these have not run)."""

import os
import subprocess

import pytest
import torch
from build_paths import PACKAGE_PARENT, PYTHON
from ovf import _ovf
from test_device_engine import DTYPES, _bit_patterns, _views

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device (torch.cuda.is_available() is False)"
)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cuda_statistics_are_the_cpu_engines(dtype):
    generator = torch.Generator().manual_seed(5)
    x = _bit_patterns(dtype, 4099, generator)
    on_gpu = x.cuda()
    for name, view in _views(on_gpu).items():
        expected = _ovf.stats(view.cpu())
        assert _ovf.device_stats(view) == expected, f"{dtype} {name}"


SELF_CHECK = """
import torch, ovf
from ovf import _ovf
net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).cuda()
debug = ovf.DebugUnderflowOverflow(net, device_mode="exact")
for _ in range(3):
    net(torch.randn(4, 8, device="cuda"))
print(_ovf.report(2))
"""


def test_the_self_check_rejects_a_cuda_backend_that_disagrees():
    env = {k: v for k, v in os.environ.items() if not k.startswith("OVF_")}
    env.update(PYTHONPATH=PACKAGE_PARENT, OVF_TEST_CUDA_DISAGREE="1")
    p = subprocess.run(
        [PYTHON, "-c", SELF_CHECK],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert p.returncode == 0, p.stderr
    if not _ovf.cuda_backend_built():
        pytest.skip("this build has no CUDA backend (its torch is not a CUDA build)")
    warnings = [line for line in p.stderr.splitlines() if "disagreed with the portable" in line]
    assert warnings == [
        "ovf: warning: the CUDA statistics backend disagreed with the portable one on cuda:0's "
        "first frame; ovf uses the portable backend there from now on"
    ]
    assert "pending" not in p.stdout
