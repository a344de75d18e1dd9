"""Small deterministic models for the tests."""

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 2 * d)
        self.act = nn.ReLU()
        self.down = nn.Linear(2 * d, d, bias=False)

    def forward(self, x):
        return x + self.down(self.act(self.up(self.norm(x))))


class PairOut(nn.Module):
    """Returns a tuple with a None and a nested tuple, as HF layers do."""

    def forward(self, x):
        return x * 2, None, (x, x.sum())


class Amp(nn.Module):
    """Multiplies by a gain: an infinite gain makes its output, and only its output, inf."""

    def forward(self, x, gain):
        return x * gain


class Net(nn.Module):
    """Embedding (int64 input) -> blocks -> pair -> head -> amp. An infinite
    `gain` makes amp's output the first non-finite value of the batch."""

    def __init__(self, vocab=50, d=8, blocks=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([Block(d) for _ in range(blocks)])
        self.pair = PairOut()
        self.head = nn.Linear(d, 4)
        self.amp = Amp()

    def forward(self, ids, gain=1.0):
        h = self.embed(ids)
        for block in self.blocks:
            h = block(h)
        h, _, _ = self.pair(h)
        return self.amp(self.head(h), gain)


def make_net(seed=0):
    torch.manual_seed(seed)
    return Net()


def batch_inputs(step, seed=1):
    g = torch.Generator().manual_seed(seed + step)
    return torch.randint(0, 50, (2, 3), generator=g)
