"""A training loop fed by a shuffled DataLoader whose dataset holds one sample that
makes the model overflow: run under python3 -m ovf, the report names the dataset
indices of the failing batch. Each batch's indices, as the loader returned them
(the dataset hands its index back with the sample), are printed first, for the test.

    python3 -m ovf loader_samples.py [--bad I] [--workers N] [--ahead] [--device D]
"""

import argparse

import torch
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    """64 samples of 4 values; sample `bad` holds 1e30, whose square overflows float32."""

    def __init__(self, bad):
        self.bad = bad

    def __len__(self):
        return 64

    def __getitem__(self, i):
        x = torch.full((4,), (i + 1) / 64.0)
        if i == self.bad:
            x[0] = 1e30
        return x, i


class Square(torch.nn.Module):
    def forward(self, x):
        return x * x


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bad", type=int, default=-1)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--ahead", action="store_true", help="fetch one batch ahead of the model")
    p.add_argument("--device", default="cpu", help="where the model runs (cuda: a GPU's rows)")
    args = p.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), Square()).to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loader = DataLoader(
        Squares(args.bad),
        batch_size=8,
        shuffle=True,
        num_workers=args.workers,
        generator=torch.Generator().manual_seed(1),
    )
    for epoch in range(2):
        for step, (x, index) in enumerate(looking_ahead(loader) if args.ahead else loader):
            print(f"epoch {epoch} step {step} indices {index.tolist()}", flush=True)
            optimizer.zero_grad()
            model(x.to(args.device)).mean().backward()
            optimizer.step()
    print("done")


def looking_ahead(loader):
    """The loader's batches, each yielded once the next is fetched (accelerate's way of
    knowing which batch is the last)."""
    batches = iter(loader)
    current = next(batches)
    for following in batches:
        yield current
        current = following
    yield current


if __name__ == "__main__":
    main()
