"""A model whose loss takes sqrt of an exact 0 in step argv[1] of argv[2]: the
forward is finite, the backward makes an inf (d sqrt(u) / du at 0). Run under
`python3 -m ovf --backward`; tests/python/test_device_engine.py runs it with
OVF_TEST_DEFER set, so the backward's ops and gradient lines take the device
engine and are judged late."""

import sys

import torch


class Head(torch.nn.Module):
    def forward(self, x, same):
        spread = (x - x.detach()) if same else (x - x.detach() + 1.0)
        return torch.sqrt(spread * spread).sum()


torch.manual_seed(0)
body = torch.nn.Linear(4, 4)
head = Head()
optimizer = torch.optim.SGD(body.parameters(), lr=0.1)
bad, steps = int(sys.argv[1]), int(sys.argv[2])
for step in range(steps):
    optimizer.zero_grad()
    loss = head(body(torch.randn(3, 4)), step == bad)
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4g}", flush=True)
