"""GradScaler on the CPU with float16 autocast, as a user writes it.

  recover   a too-large initial scale: the first steps overflow on purpose, the
            scaler backs off and training goes on (nothing is wrong)
  recover_bf16  the same in bfloat16 autocast: its range is float32's, so the scale
            starts at 2**127 and the loss is weighted by 1e3
  recover_then_nan  recover, then a NaN in the data at batch 11 (a real fault)
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
# case: training steps, initial scale, autocast dtype, loss weight (the step is the same: lr
# is divided by it)
CASES = {
    "recover": (14, 2.0**26, torch.float16, 1.0),
    "recover_then_nan": (14, 2.0**26, torch.float16, 1.0),
    "recover_bf16": (12, 2.0**127, torch.bfloat16, 1e3),
    "collapse": (20, 2.0**16, torch.float16, 1.0),
    "healthy": (5, 2.0**16, torch.float16, 1.0),
}
steps, init_scale, dtype, weight = CASES[case]
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=1e-2 / weight)
scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
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
        if case == "recover_then_nan" and batch == 11:
            x[3, 5] = float("nan")  # a bad sample
        with torch.autocast("cpu", dtype=dtype):
            out = model(x)
        loss = weight * pairwise_loss(out.float())
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
