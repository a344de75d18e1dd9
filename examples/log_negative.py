"""A regression model takes torch.log of its input; one record is negative.

An ordinary training script (it does not import ovf). The model predicts a price
from transaction amounts, which it log-scales first (amounts span six orders of
magnitude). The data holds one refund recorded as a negative amount, in batch 3:
torch.log of it is nan, the loss of batch 3 is nan, and every weight is nan after
its optimizer step.

    python3 -m ovf examples/log_negative.py

First non-finite value (the examples' tests assert this):
    batch 3, module ``features.log_scale`` (LogScale): ``output`` is nan, its
    ``input[0]`` finite (abs min 1.13e+00, abs max 9.98e+05). It is the first
    module of the batch. The abs columns cannot show a sign: the culprit, -12.5
    (sample 5, feature 2), hides between them; a debugger stop shows it.

Deterministic (seeded), well under a second of compute on one CPU core.
"""

import math
import sys

import torch
from torch import nn

NUM_FEATURES = 8
BATCH_SIZE = 16
NUM_BATCHES = 6
BAD_BATCH, BAD_ROW, BAD_FEATURE, BAD_VALUE = 3, 5, 2, -12.5


class LogScale(nn.Module):
    """log(amount + 1): amounts are assumed >= 0."""

    def forward(self, amounts):
        return torch.log(amounts + 1.0)


class Features(nn.Module):
    def __init__(self):
        super().__init__()
        self.log_scale = LogScale()
        self.norm = nn.LayerNorm(NUM_FEATURES)

    def forward(self, amounts):
        return self.norm(self.log_scale(amounts))


class PriceModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = Features()
        self.mlp = nn.Sequential(
            nn.Linear(NUM_FEATURES, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU()
        )
        self.head = nn.Linear(32, 1)

    def forward(self, amounts):
        return self.head(self.mlp(self.features(amounts))).squeeze(-1)


def make_data(seed=0):
    """Log-uniform amounts in [1, 1e6); the price is a smooth function of them."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for batch in range(NUM_BATCHES):
        amounts = torch.exp(
            torch.rand(BATCH_SIZE, NUM_FEATURES, generator=generator) * math.log(1e6)
        )
        if batch == BAD_BATCH:
            amounts[BAD_ROW, BAD_FEATURE] = BAD_VALUE  # a refund, recorded as a negative amount
        target = torch.log1p(amounts.clamp(min=0)).mean(-1) * 0.5
        batches.append((amounts, target))
    return batches


def main():
    torch.manual_seed(0)
    model = PriceModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for batch, (amounts, target) in enumerate(make_data()):
        loss = nn.functional.mse_loss(model(amounts), target)
        print(f"batch {batch}: loss {loss.item():.4g}", flush=True)
        if not math.isfinite(loss.item()):
            print(f"loss is {loss.item()} at batch {batch}")
            return 1
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print("training finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
