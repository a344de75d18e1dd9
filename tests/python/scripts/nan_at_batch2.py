"""An unmodified training script (no ovf import): log of a negative number in
batch 2 makes `net.1` (a Log module) produce NaN."""

import sys

import torch
from torch import nn


class Log(nn.Module):
    def forward(self, x):
        return torch.log(x)


torch.manual_seed(0)
net = nn.Sequential(nn.Linear(3, 3), Log())
with torch.no_grad():
    net[0].weight.fill_(0.1)  # inputs of +101 give 30.3, inputs of -99 give -29.7
    net[0].bias.zero_()
for batch in range(4):
    shift = -100.0 if batch == 2 else 100.0
    out = net(torch.ones(2, 3) + shift)
    print(f"batch {batch} done", flush=True)
print("training finished", flush=True)
sys.exit(0)
