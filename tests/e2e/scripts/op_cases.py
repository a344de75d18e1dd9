"""Unmodified training loops (no ovf import) where a NaN/Inf is born in
functional code inside a forward, in the backward pass only, or in the
optimizer step. One case per run: op_cases.py CASE. Each goes non-finite in
batch 1 (batch 0 is healthy), at the line marked `# born: CASE`."""

import sys

import torch
from torch import nn
from torch.nn import functional as F


class LogFeatures(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x, shift):
        h = self.proj(x)
        moved = h.abs() + 1.0 - shift
        logged = torch.log(moved)  # born: log
        return logged * 2


class Ratio(nn.Module):
    def forward(self, x, shift):
        denominator = x.sum(dim=1, keepdim=True) * (shift == 0)
        ratio = x / denominator  # born: div
        return ratio + 1


class Softplus(nn.Module):
    def forward(self, x, shift):
        scaled = x * (1.0 + shift * 100.0)
        grown = torch.exp(scaled)  # born: exp
        return F.relu(grown)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(4, 2, batch_first=True)

    def forward(self, x, shift):
        query = x * (1.0 + shift * 1e36)  # large but finite: the attention scores overflow
        out, _ = self.attn(query, query, x)  # born: mha
        return out


class Root(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x, shift):
        return torch.sqrt(self.proj(x).abs() * (1.0 - shift)).sum(dim=1, keepdim=True)  # born: sqrt


class Model(nn.Module):
    def __init__(self, case):
        super().__init__()
        self.body = {
            "log": LogFeatures,
            "div": Ratio,
            "exp": Softplus,
            "mha": Attention,
            "sqrt": Root,
            "step": LogFeatures,
        }[case]()
        self.head = nn.Linear(4 if case != "sqrt" else 1, 1)

    def forward(self, x, shift):
        return self.head(self.body(x, shift))


def main(case):
    torch.manual_seed(0)
    model = Model(case)
    lr = 0.0 if case != "step" else float("inf")
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x = torch.rand(2, 4) + 0.5  # positive, so log/sqrt are fine in batch 0
    for batch in range(3):
        shift = torch.tensor(0.0 if batch == 0 or case == "step" else 10.0)
        if case == "sqrt":
            shift = torch.tensor(1.0 if batch == 1 else 0.0)  # sqrt(0) in batch 1: d/dx = inf
        loss = model(x, shift).pow(2).mean()
        print(f"batch {batch} loss {loss.item():.4g}", flush=True)
        optimizer.zero_grad()
        loss.backward()
        if torch.isfinite(loss):  # skip a step on a non-finite loss, as AMP's GradScaler does
            optimizer.step()  # born: step
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
