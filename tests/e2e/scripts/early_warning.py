"""Runs that head for a NaN, for the early warning (python3 -m ovf --early).

  diverge_lr   examples/diverge_lr.py as it is: SGD at lr 200 on a T5-style model;
               the first non-finite value is made in batch 4
  fp16_growth  a float16 regression whose SGD step overshoots (the prediction
               error is multiplied by -3 each batch): the prediction overflows
               float16 to inf in batch 11; its loss is taken in float32

`--oracle` runs the case under the dispatch oracle and prints its verdict.
"""

import os
import runpy
import sys

import torch
from torch import nn
from torch.nn import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DIVERGE_LR = os.path.join(HERE, "..", "..", "..", "examples", "diverge_lr.py")


def fp16_growth():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 1, bias=False)).half()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    x = torch.full((4, 8), 0.5, dtype=torch.float16)  # |x|^2 = 2: lr * 2 * 2 = 4, so x(-3)
    y = torch.ones(4, 1)
    for batch in range(12):
        prediction = model(x)
        loss = F.mse_loss(prediction.float(), y)
        print(f"batch {batch} prediction {prediction[0, 0].item():.6g}", flush=True)
        if not torch.isfinite(loss):
            print(f"loss is {loss.item()} at batch {batch}")
            return 1
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return 0


def diverge_lr():
    runpy.run_path(DIVERGE_LR, run_name="__main__")


CASES = {"fp16_growth": fp16_growth, "diverge_lr": diverge_lr}

if __name__ == "__main__":
    case = CASES[sys.argv[1]]
    if "--oracle" in sys.argv:
        sys.path.insert(0, HERE)
        from dispatch_oracle import FirstNonFinite

        script = DIVERGE_LR if case is diverge_lr else __file__
        with FirstNonFinite(script) as oracle:
            try:
                case()
            except SystemExit:
                pass
        print(f"oracle: {oracle.verdict()}")
    else:
        sys.exit(case())
