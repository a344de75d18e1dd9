"""A stack of argv[1] Linear layers trained for argv[2] steps under
DebugUnderflowOverflow(device_mode="exact"); prints how often ovf waited for
device statistics: "waits W". tests/python/test_device_engine.py runs it with
OVF_TEST_DEFER set, so its CPU tensors take the device engine: each of the
forward's frames waits once, and each optimizer step's check once."""

import sys

import ovf
import torch
from ovf import _ovf

layers, steps = int(sys.argv[1]), int(sys.argv[2])
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(layers)])
ovf.DebugUnderflowOverflow(model, device_mode="exact", optimizers=True)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
before = _ovf._device_waits()
for _ in range(steps):
    optimizer.zero_grad()
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
print(f"waits {_ovf._device_waits() - before}", flush=True)
