"""Trains a small model for argv[1] steps, with ovf's op level and backward on
(run under `python3 -m ovf --ops --backward`), or only runs its forward
(argv[2] "forward"), and prints how often ovf waited for op statistics:
"waits W groups G" (op_groups.h). tests/python/test_device_engine.py
runs it with OVF_TEST_DEFER set, so its CPU tensors take the device engine."""

import sys

import torch
from ovf import _ovf

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(int(sys.argv[1])):
    if sys.argv[2:] == ["forward"]:
        with torch.no_grad():
            model(torch.randn(4, 8))
        continue
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(torch.randn(4, 8)), torch.randn(4, 1))
    loss.backward()
    optimizer.step()
waits, groups = _ovf._op_group_counts()
print(f"waits {waits} groups {groups}", flush=True)
