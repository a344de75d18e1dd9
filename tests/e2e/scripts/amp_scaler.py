"""GradScaler on the CPU with float16 autocast, as a user writes it.

  recover   a too-large initial scale: the first steps overflow on purpose, the
            scaler backs off and training goes on (nothing is wrong)
  collapse  the loss takes sqrt of an exact 0 (two identical rows): every
            gradient is non-finite, every step is skipped, the scale collapses
  healthy   a sane initial scale: no skip

`--oracle` runs it under the dispatch oracle and prints its verdict.
"""

import os
import sys

import torch
from torch import nn

torch.manual_seed(0)
case = sys.argv[1]
steps = {"recover": 14, "collapse": 20, "healthy": 5}[case]
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0**26 if case == "recover" else 2.0**16)
x = torch.randn(8, 8)
if case == "collapse":
    x[1] = x[0]  # two identical rows: their distance is an exact 0


def pairwise_loss(out):
    d = out[:, None, :] - out[None, :, :]
    dist = (d.pow(2).sum(-1) + torch.eye(len(out))).sqrt()  # born: collapse
    return -dist.mean()


def train():
    for batch in range(steps):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            out = model(x)
        loss = pairwise_loss(out.float())
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        print(f"batch {batch} loss {loss.item():.4f} scale {scaler.get_scale():g}", flush=True)


if "--oracle" in sys.argv:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from dispatch_oracle import FirstNonFinite

    with FirstNonFinite(__file__) as oracle:
        train()
    print(f"oracle: {oracle.verdict()}")
else:
    train()
