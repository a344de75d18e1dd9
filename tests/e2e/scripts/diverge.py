"""A tiny model that goes non-finite on cue, for ovf's end-to-end tests.

    python3 diverge.py [--steps N] [--inf-at PATH:BATCH ...] [--gain PATH:BATCH:X ...]
                       [--nan-after] [--hostile] [--reference]

Each ``Amplifier`` multiplies its input by a gain; ``--gain blocks.1.amp:2:1e5``
sets that amplifier's gain to 1e5 from batch 2 on, and ``--inf-at
blocks.1.amp:3`` to 1e39 from batch 3 on, so its output is inf in float32.
``--nan-after`` makes every ``Center`` subtract its input from itself, so an inf
input turns into NaN one module later. ``--hostile`` adds a module whose name holds
terminal escape sequences. ``--reference`` wraps the model in
``ovf.DebugUnderflowOverflow`` (the reference's report and exception); without it the
script is an ordinary training loop that ovf must find on its own (``ovf break-on-nan``
in gdb, ``python3 -m ovf``).
"""

import argparse

import torch
from torch import nn


class Amplifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.gain = 1.0

    def forward(self, x):
        return x * self.gain


class Center(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_subtract = False

    def forward(self, x):
        if self.self_subtract:
            return x - x
        return x - x.mean()


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.amp = Amplifier()
        self.center = Center()

    def forward(self, x):
        h = self.fc(x)
        h = self.amp(h)  # ovf-e2e: amp call
        return self.center(h)  # ovf-e2e: center call


class Net(nn.Module):
    def __init__(self, width=8, depth=3, hostile=False):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        # ModuleDict keys may be any string without a dot: a name is untrusted input
        self.extra = nn.ModuleDict(
            {"evil\x1b[2J\x1b]0;pwned\x07\\": Amplifier()} if hostile else {}
        )
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        for module in self.extra.values():
            x = module(x)
        return self.head(x)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=6)
    p.add_argument(
        "--inf-at",
        action="append",
        default=[],
        metavar="PATH:BATCH",
        help="amplifier whose output overflows from that batch on",
    )
    p.add_argument(
        "--gain",
        action="append",
        default=[],
        metavar="PATH:BATCH:X",
        help="amplifier whose gain is X from that batch on",
    )
    p.add_argument(
        "--hostile", action="store_true", help="add a module with escape sequences in its name"
    )
    p.add_argument("--nan-after", action="store_true", help="Center modules turn inf into NaN")
    p.add_argument("--reference", action="store_true", help="wrap in ovf.DebugUnderflowOverflow")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(0)
    model = Net(hostile=args.hostile)
    schedule = []
    for spec in args.inf_at + args.gain:
        path, batch, *gain = spec.split(":")
        schedule.append((model.get_submodule(path), int(batch), float(gain[0]) if gain else 1e39))
    for module in model.modules():
        if isinstance(module, Center):
            module.self_subtract = args.nan_after
    if args.reference:
        import ovf

        ovf.DebugUnderflowOverflow(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = torch.randn(4, 8)
    for step in range(args.steps):
        for amp, batch, gain in schedule:
            amp.gain = gain if step >= batch else 1.0
        optimizer.zero_grad()
        loss = model(data).pow(2).mean()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4e}", flush=True)


if __name__ == "__main__":
    main()
