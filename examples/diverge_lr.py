"""Trains a tiny T5-style model with a learning rate far too high: it diverges.

An ordinary training script (it does not import ovf). Plain, it prints the loss
climbing for a few batches, then a finite-looking loss of exactly ln(256) =
5.545 (the model has collapsed), then nan. Under ovf it stops at the first
inf/nan and prints the last frames before it:

    python3 -m ovf examples/diverge_lr.py

First non-finite value (the examples' tests assert this):
    batch 5, module ``shared`` (Embedding, the token embedding tied with lm_head):
    its ``weight`` is nan when the forward of batch 5 starts.

Why there: every module's weights, inputs and outputs are finite in batches
0-4. The activations grow with the weights (loss 6.46, 16.4, 2.9e3, 1.1e8); by
batch 4 the residual stream is beyond 1.8e19, where the float32 variance (x**2)
of T5LayerNorm overflows inside its forward, so the normalised outputs silently
become 0 (hence the loss of exactly 5.545). The backward of batch 4 turns that
hidden inf into nan gradients, the optimizer step writes nan into the weights,
and the first module of batch 5, the embedding, meets them. The frames ovf
prints before the detection are the end of batch 4: residual stream at abs max
1.1e36, layer-norm outputs all 0, lm_head's weight at 3.5e9.

Deterministic: seeded model, data and dropout, about 2 s on one CPU core.
"""

import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from t5_style import T5Config, T5ForConditionalGeneration, synthetic_batches  # noqa: E402

LEARNING_RATE = 200.0  # a sane value for this model is about 0.1
NUM_BATCHES = 10


def main():
    torch.manual_seed(0)
    config = T5Config.tiny()
    model = T5ForConditionalGeneration(config)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)

    for batch, (input_ids, labels) in enumerate(synthetic_batches(config, NUM_BATCHES, seed=0)):
        loss = model(input_ids, labels=labels)["loss"]
        print(f"batch {batch}: loss {loss.item():.4g}", flush=True)
        if not math.isfinite(loss.item()):
            print(f"loss is {loss.item()} at batch {batch}: training diverged")
            return 1
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print("training finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
