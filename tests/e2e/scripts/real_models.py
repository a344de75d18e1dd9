"""Training code in the styles people write, nobody's model shaped to ovf:
torchvision's resnet18 and VisionTransformer, a GPT-style decoder with a causal
mask of -inf, nn.MultiheadAttention with a key padding mask, hand-written
losses, BatchNorm, AdamW. One case per run; healthy cases must run to the end,
the others go non-finite the way it happens to people.

    real_models.py CASE [--oracle]     CASE: see CASES below

--oracle runs the case under dispatch_oracle.FirstNonFinite (no ovf) and prints
its verdict as the last line: "oracle: <op> in <module> at batch N, file:line"
or "oracle: none".
"""

import argparse
import os
import sys

import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
torch.set_num_threads(1)


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads, block):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.register_buffer("mask", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x, temperature=1.0):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (temperature / (k.size(-1) ** 0.5))
        scores = scores.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        weights = F.softmax(scores.float(), dim=-1).type_as(v)
        return self.proj((weights @ v).transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, width, heads, block):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, block)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
        )

    def forward(self, x, temperature=1.0):
        x = x + self.attn(self.ln1(x), temperature)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=32, width=16, heads=2, layers=2, block=8):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(block, width)
        self.blocks = nn.ModuleList(Block(width, heads, block) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, idx, temperature=1.0):
        x = self.tok(idx) + self.pos(torch.arange(idx.size(1)))
        for block in self.blocks:
            x = block(x, temperature)
        return self.head(self.ln_f(x))


def gpt_batches(n=3, vocab=32, t=8):
    for _ in range(n):
        idx = torch.randint(vocab, (4, t))
        yield idx, torch.roll(idx, -1, dims=1)


def gpt_healthy():
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for batch, (idx, target) in enumerate(gpt_batches()):
        logits = model(idx)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), target.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"batch {batch} loss {loss.item():.4f}", flush=True)


def gpt_log_loss():
    """A hand-written cross entropy: log of softmax probabilities that underflow to 0."""
    model = GPT()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    for batch, (idx, target) in enumerate(gpt_batches()):
        logits = model(idx) * (1.0 if batch < 1 else 1e4)  # over-confident from batch 1
        probs = logits.softmax(-1)
        picked = probs.gather(-1, target.unsqueeze(-1))
        loss = -torch.log(picked).mean()  # born: gpt_log_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"batch {batch} loss {loss.item():.4f}", flush=True)


def attention_fp16():
    """Attention scores that exceed float16's range, cast down for speed."""
    model = GPT()
    with torch.no_grad():
        for batch, (idx, _) in enumerate(gpt_batches()):
            h = model.tok(idx) * (1.0 if batch < 1 else 1e3)
            scores = h @ h.transpose(-2, -1)
            half = scores.half()  # born: attention_fp16
            print(f"batch {batch} max {half.float().abs().max().item():.4g}", flush=True)


def mha_padding():
    """nn.MultiheadAttention with a key padding mask: -inf by design, healthy."""
    attn = nn.MultiheadAttention(16, 2, batch_first=True)
    model = nn.ModuleDict({"attn": attn, "out": nn.Linear(16, 4)})
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for batch in range(3):
        x = torch.randn(4, 6, 16)
        pad = torch.zeros(4, 6, dtype=torch.bool)
        pad[:, 4:] = True
        y, _ = attn(x, x, x, key_padding_mask=pad)
        loss = model.out(y[:, :4]).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"batch {batch} loss {loss.item():.4f}", flush=True)


def resnet_batchnorm():
    """torchvision's resnet18 fed one batch of enormous values: BatchNorm's
    running variance overflows (the activations themselves stay finite)."""
    import torchvision

    model = torchvision.models.resnet18(num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for batch in range(3):
        x = torch.randn(2, 3, 32, 32) * (1e20 if batch == 1 else 1.0)
        loss = F.cross_entropy(model(x), torch.tensor([1, 2]))  # born: resnet_batchnorm
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"batch {batch} loss {loss.item():.4f}", flush=True)


def vit_adamw_eps0():
    """torchvision's VisionTransformer trained with AdamW(eps=0): a parameter
    whose gradient is exactly 0 gets 0/0 in the update."""
    from torchvision.models.vision_transformer import VisionTransformer

    model = VisionTransformer(
        image_size=16,
        patch_size=8,
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        mlp_dim=32,
        num_classes=4,
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, eps=0.0)
    for batch in range(2):
        loss = F.cross_entropy(model(torch.randn(2, 3, 16, 16)), torch.tensor([0, 1]))
        opt.zero_grad()
        loss.backward()
        opt.step()  # born: vit_adamw_eps0
        print(f"batch {batch} loss {loss.item():.4f}", flush=True)


def normalised_distance():
    """Per-sample normalisation with a hand-written norm: sqrt's gradient at 0
    is infinite, so a sample of zeros poisons the backward pass."""
    encoder = nn.Linear(8, 8)
    opt = torch.optim.SGD(encoder.parameters(), lr=1e-2)
    for batch in range(3):
        x = torch.randn(4, 8)
        if batch == 1:
            x[0] = 0.0
        z = encoder(x) * (x.abs().sum(1, keepdim=True) > 0)
        norm = z.pow(2).sum(1, keepdim=True).sqrt()  # born: normalised_distance
        loss = (z / (norm + 1e-6)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"batch {batch} loss {loss.item():.4f}", flush=True)


CASES = {
    f.__name__: f
    for f in (
        gpt_healthy,
        gpt_log_loss,
        attention_fp16,
        mha_padding,
        resnet_batchnorm,
        vit_adamw_eps0,
        normalised_distance,
    )
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=sorted(CASES))
    p.add_argument("--oracle", action="store_true")
    args = p.parse_args()
    if not args.oracle:
        CASES[args.case]()
        return
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from dispatch_oracle import FirstNonFinite

    with FirstNonFinite(__file__) as oracle:
        CASES[args.case]()
    print(f"oracle: {oracle.verdict() or 'none'}")


if __name__ == "__main__":
    main()
