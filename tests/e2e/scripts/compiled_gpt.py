"""A GPT-style decoder (real_models.GPT: causal -inf mask, softmax, LayerNorm, GELU) under
torch.compile, for what ovf's --ops sees inside compiled graphs.

    python3 compiled_gpt.py healthy|fp16_attention [--eager]

healthy: real_models.gpt_healthy's three AdamW training steps; nothing is non-finite but
the mask's -inf.
fp16_attention: the model in float16 (nanoGPT's fp16 attention); before batch 1 the
first block's query/key/value weights grow 300 times (parameters are the graph's
inputs: no recompile), and the attention scores q @ k^T exceed float16's range: inf
made by the matrix product at real_models.py's scores line.
--eager: the same without torch.compile.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
from real_models import GPT, gpt_batches, gpt_healthy  # noqa: E402


def fp16_attention(compiled):
    model = GPT().half()
    run = torch.compile(model) if compiled else model
    with torch.no_grad():
        for batch, (idx, _) in enumerate(gpt_batches()):
            if batch == 1:
                model.blocks[0].attn.qkv.weight.mul_(300)
            logits = run(idx)
            print(f"batch {batch} max {logits.float().abs().max().item():.4g}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("case", choices=["healthy", "fp16_attention"])
    p.add_argument("--eager", action="store_true", help="do not compile")
    args = p.parse_args()
    {"healthy": gpt_healthy, "fp16_attention": fp16_attention}[args.case](not args.eager)
    if not args.eager:
        from torch._dynamo.utils import counters

        breaks = sum(counters["graph_break"].values())
        print(f"graph breaks {breaks}, graphs {counters['stats']['unique_graphs']}", flush=True)


if __name__ == "__main__":
    main()
