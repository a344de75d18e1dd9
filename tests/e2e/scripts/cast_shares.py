"""A run whose values outgrow a narrow type, for the cast shares (ovf watch --cast).

  fp8_regression  a float32 MLP regressing targets in the hundreds (a sum of squares
                  times 8) with plain SGD: as it learns, its head's output passes
                  float8_e4m3fn's largest value (448) in batch 17 for 8 of 256 rows
                  (torch 2.14.1), and no value is ever inf or NaN (status 0)

`--oracle` prints, instead of training quietly, where a direct cast first loses more
than 0.1% of a tensor's values to overflow: every module's own parameters, inputs and
outputs when its forward returns (ovf's frame order), cast with torch and compared.
"""

import sys

import torch
from torch import nn
from torch.nn import functional as F

LIMIT = 0.001
HALF_ULP_AT_448 = 16  # e4m3fn's values near 448 are 32 apart: a larger miss is saturation


def e4m3_overflow(t):
    """How many of t's finite values a cast to float8_e4m3fn loses to overflow:
    torch saturates them to 448 (or makes NaN, which e4m3fn has for inf)."""
    t = t.detach().float()
    finite = torch.isfinite(t)
    cast = t.to(torch.float8_e4m3fn).float()
    return int((finite & (cast.isnan() | (t.abs() - cast.abs() > HALF_ULP_AT_448))).sum())


class Oracle:
    """Forward hooks that name the first module whose tensors lose more than LIMIT."""

    def __init__(self, model):
        self.batch = 0
        self.found = None
        self.names = {m: n for n, m in model.named_modules()}
        for module in self.names:
            module.register_forward_hook(self.check)

    def check(self, module, inputs, output):
        if self.found is not None:
            return
        tensors = [("weight " + n, p) for n, p in module.named_parameters(recurse=False)]
        tensors += [(f"input[{i}]", t) for i, t in enumerate(inputs) if torch.is_tensor(t)]
        tensors += [("output", output)] if torch.is_tensor(output) else []
        for label, t in tensors:
            lost = e4m3_overflow(t)
            if lost > LIMIT * t.numel():
                name = self.names[module] or "<root>"
                self.found = f"{name} {label} at batch {self.batch}: {lost} of {t.numel()}"
                return


def fp8_regression(oracle=False):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1)
    )
    watch = Oracle(model) if oracle else None
    optimizer = torch.optim.SGD(model.parameters(), lr=3e-4)
    x = torch.randn(256, 32)
    y = x.pow(2).sum(1, keepdim=True) * 8
    for batch in range(20):
        if watch is not None:
            watch.batch = batch
        prediction = model(x)
        loss = F.mse_loss(prediction, y)
        print(
            f"batch {batch} loss {loss.item():.4g} max {prediction.abs().max().item():.4g}",
            flush=True,
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if watch is not None:
        print(f"oracle: {watch.found}")
    return 0


CASES = {"fp8_regression": fp8_regression}

if __name__ == "__main__":
    sys.exit(CASES[sys.argv[1]](oracle="--oracle" in sys.argv))
