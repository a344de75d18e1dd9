"""A text classifier mean-pools over real tokens; one sequence has none.

An ordinary training script (it does not import ovf). The classifier averages
its token states over the attention mask: sum(h * mask) / sum(mask). Batch 2
holds an empty sequence (all padding), so its pooled row is 0 / 0 = nan, and so
are its logits and the loss.

    python3 -m ovf examples/div_zero.py

First non-finite value (the examples' tests assert this):
    batch 2, module ``pooler`` (MaskedMeanPool): ``output`` is nan, its inputs
    ``input[0]`` (the token states) and ``input[1]`` (the mask) finite.
    Sample 3 of the batch has length 0.

Deterministic (seeded), well under a second of compute on one CPU core.
"""

import math
import sys

import torch
from torch import nn

VOCAB, DIM, CLASSES = 100, 32, 4
BATCH_SIZE, MAX_LEN = 8, 12
NUM_BATCHES = 5
EMPTY_BATCH, EMPTY_ROW = 2, 3
PAD = 0


class MaskedMeanPool(nn.Module):
    """Mean of the states of real tokens (mask 1), ignoring padding (mask 0)."""

    def forward(self, states, mask):
        mask = mask.unsqueeze(-1).to(states.dtype)
        return (states * mask).sum(dim=1) / mask.sum(dim=1)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM, padding_idx=PAD)
        self.encoder = nn.Sequential(nn.Linear(DIM, DIM), nn.GELU(), nn.Linear(DIM, DIM))
        self.pooler = MaskedMeanPool()
        self.classifier = nn.Linear(DIM, CLASSES)

    def forward(self, token_ids):
        mask = token_ids != PAD
        states = self.encoder(self.embed(token_ids))
        return self.classifier(self.pooler(states, mask))


def make_data(seed=0):
    """Random sequences of random lengths, padded; the label is the first token mod 4."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for batch in range(NUM_BATCHES):
        lengths = torch.randint(1, MAX_LEN + 1, (BATCH_SIZE,), generator=generator)
        if batch == EMPTY_BATCH:
            lengths[EMPTY_ROW] = 0  # an empty document slipped through preprocessing
        token_ids = torch.randint(1, VOCAB, (BATCH_SIZE, MAX_LEN), generator=generator)
        token_ids[torch.arange(MAX_LEN)[None, :] >= lengths[:, None]] = PAD
        labels = token_ids[:, 0] % CLASSES
        batches.append((token_ids, labels))
    return batches


def main():
    torch.manual_seed(0)
    model = Classifier()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for batch, (token_ids, labels) in enumerate(make_data()):
        loss = nn.functional.cross_entropy(model(token_ids), labels)
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
