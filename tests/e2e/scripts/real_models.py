"""Training code in the styles people write, nobody's model shaped to ovf:
torchvision's resnet18 and VisionTransformer, a GPT-style decoder with a causal
mask of -inf, nn.MultiheadAttention with a key padding mask, pytorch/examples'
word_language_model Transformer (its mask is log(tril(ones))), minGPT-style
left padding, a hand-written loss scaler, hand-written losses, BatchNorm, AdamW.
One case per run; healthy cases must run to the end, the others go non-finite
the way it happens to people. Two healthy cases are in real_models_healthy.py, and
models whose own code makes no case's first non-finite value in real_models_nets.py.

    real_models.py CASE [--oracle]     CASE: see CASES below

--oracle runs the case under dispatch_oracle.FirstNonFinite (no ovf) and prints
its verdict as the last line: "oracle: <op> in <module> at batch N, file:line"
or "oracle: none".
"""

import os
import sys

import torch
from real_models_healthy import mha_padding, transformer_log_mask
from real_models_nets import Discriminator, Images, TinySegmenter
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

    def forward(self, x, temperature=1.0, pad=None):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (temperature / (k.size(-1) ** 0.5))
        scores = scores.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        if pad is not None:  # key padding: a padded position is no one's key
            scores = scores.masked_fill(pad[:, None, None, :], float("-inf"))
        weights = F.softmax(scores.float(), dim=-1).type_as(v)  # born: left_padding
        return self.proj((weights @ v).transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, width, heads, block):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, block)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
        )

    def forward(self, x, temperature=1.0, pad=None):
        x = x + self.attn(self.ln1(x), temperature, pad)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=32, width=16, heads=2, layers=2, block=8):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(block, width)
        self.blocks = nn.ModuleList(Block(width, heads, block) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, idx, temperature=1.0, pad=None):
        x = self.tok(idx) + self.pos(torch.arange(idx.size(1)))
        for block in self.blocks:
            x = block(x, temperature, pad)
        return self.head(self.ln_f(x))


def gpt_batches(n=3, vocab=32, t=8):
    for _ in range(n):
        idx = torch.randint(vocab, (4, t))
        yield idx, torch.roll(idx, -1, dims=1)


def gpt_healthy(compiled=False):
    """(compiled: the model under torch.compile, compiled_gpt.py's healthy case)"""
    model = GPT()
    run = torch.compile(model) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for batch, (idx, target) in enumerate(gpt_batches()):
        logits = run(idx)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), target.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"batch {batch} loss {loss.item()!r}", flush=True)


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


def left_padding():
    """minGPT with a key padding mask, batches left-padded to one length: at a
    padded query the causal mask leaves only padded keys, the row is -inf
    throughout and softmax makes 0/0 there (a padding bug, not a mask)."""
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for batch, (idx, target) in enumerate(gpt_batches()):
        pad = torch.zeros(idx.shape, dtype=torch.bool)
        if batch == 1:
            pad[0, :2] = True  # the first sequence is 2 tokens shorter: padded on the left
        logits = model(idx, pad=pad)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), target.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"batch {batch} loss {loss.item():.4f}", flush=True)


def hand_scaler():
    """A hand-written dynamic loss scaler, apex style: the scaled gradients are
    cast to float16, an overflow to inf there skips the step and lowers the
    scale. The inf is expected: --stop nan (or ovf.expected_nonfinite()) lets
    it run; without, the first stop is that cast."""
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    scale = 2.0**120
    for batch in range(3):
        loss = model(torch.randn(16, 8)).pow(2).mean()
        opt.zero_grad()
        (loss * scale).backward()
        grads16 = [p.grad.half() for p in model.parameters()]  # born: hand_scaler
        if any(bool(torch.isinf(g).any()) for g in grads16):
            scale /= 2.0**110
            print(f"batch {batch} overflow, scale {scale:g}", flush=True)
            continue
        for p, g in zip(model.parameters(), grads16, strict=True):
            p.grad = g.float() / scale
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
        opt.step()  # carried: normalised_distance
        print(f"batch {batch} loss {loss.item():.4f}", flush=True)


def standardised(x):
    """Per-image standardisation, as people write it: a blank image is 0/0."""
    mean = x.mean(dim=1, keepdim=True)
    return (x - mean) / x.std(dim=1, keepdim=True)  # born: siamese_pairs


class Generator(nn.Module):
    def __init__(self, latent=8, size=16):
        super().__init__()
        self.main = nn.Sequential(nn.Linear(latent, 32), nn.ReLU(), nn.Linear(32, size), nn.Tanh())

    def forward(self, z):
        z = z / z.norm(dim=1, keepdim=True)  # born: gan_two_optimizers
        return self.main(z)


def gan_two_optimizers():
    """pytorch/examples' DCGAN loop, shrunk: two models, two optimizers, three
    backward() calls per iteration; the generator's update draws fresh noise,
    and at iteration 2 one noise row is zero (the latent normalised to the
    sphere is 0/0) -- after the discriminator's optimizer has stepped."""
    generator, discriminator = Generator(), Discriminator()
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))

    def bce(p, target):  # written out, as GAN code often does
        return -(target * torch.log(p) + (1 - target) * torch.log(1 - p)).mean()

    for batch in range(3):
        real = torch.randn(4, 16)
        discriminator.zero_grad()
        err_real = bce(discriminator(real), torch.ones(4))
        err_real.backward()
        fake = generator(torch.randn(4, 8))
        err_fake = bce(discriminator(fake.detach()), torch.zeros(4))
        err_fake.backward()
        opt_d.step()
        generator.zero_grad()
        z = torch.randn(4, 8)
        if batch == 2:
            z[1] = 0.0
        err_g = bce(discriminator(generator(z)), torch.ones(4))
        err_g.backward()
        opt_g.step()
        print(f"batch {batch} loss {err_g.item():.4f}", flush=True)


def siamese_pairs():
    """A siamese encoder called twice a step (a contrastive pair); the second
    image of a pair at step 2 is blank."""
    encoder = nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 8))
    model = nn.ModuleDict({"encoder": encoder})
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)

    def embed(x):
        return model["encoder"](standardised(x))

    for batch in range(3):
        left, right = torch.randn(4, 16), torch.randn(4, 16)
        if batch == 2:
            right[3] = 0.5
        a, b = embed(left), embed(right)
        loss = (a - b).pow(2).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"batch {batch} loss {loss.item():.4f}", flush=True)


def loader_transforms():
    """A DataLoader whose transform is a module, a hand-written log-likelihood,
    and an evaluation under no_grad after every step: only the trained model's
    steps count."""
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    loader = torch.utils.data.DataLoader(Images(), batch_size=4, shuffle=False)
    for batch, (x, y) in enumerate(loader):
        probs = F.softmax(model(x), dim=1)
        loss = -torch.log(probs[torch.arange(len(y)), y]).mean()  # born: loader_transforms
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            model(torch.rand(2, 16))
            model(torch.rand(2, 16))
        print(f"batch {batch} loss {loss.item():.4f}", flush=True)


def segmentation_ignore():
    """torchvision's segmentation reference criterion (cross_entropy with
    ignore_index=255); at step 1 the random crop fell wholly in the void border,
    every target pixel 255: the mean over no pixels is 0/0."""
    model = TinySegmenter()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)

    def criterion(inputs, target):
        losses = {}
        for name, x in inputs.items():
            losses[name] = F.cross_entropy(x, target, ignore_index=255)  # born: segmentation_ignore
        return losses["out"]

    for batch in range(3):
        image = torch.randn(2, 3, 8, 8)
        target = torch.randint(3, (2, 8, 8))
        if batch == 1:
            target[:] = 255
        loss = criterion(model(image), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"batch {batch} loss {loss.item():.4f}", flush=True)


class RNNModel(nn.Module):
    """pytorch/examples' word_language_model RNNModel with RNN_RELU, shrunk."""

    def __init__(self, ntoken=32, ninp=16, nhid=16):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.RNN(ninp, nhid, 1, nonlinearity="relu")
        self.decoder = nn.Linear(nhid, ntoken)
        self.ntoken = ntoken

    def forward(self, input, hidden):
        output, hidden = self.rnn(self.encoder(input), hidden)  # born: rnn_relu_explodes
        decoded = self.decoder(output).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden


def rnn_relu_explodes():
    """Its training loop and own SGD through .data; a learning rate a
    thousand times too large at step 1 makes the recurrent weights grow until the
    ReLU RNN's hidden state overflows inside aten::rnn_relu (its addmm) at step 2."""
    model = RNNModel()
    hidden = torch.zeros(1, 4, 16)
    for batch in range(3):
        data = torch.randint(32, (35, 4))
        targets = torch.roll(data, -1, dims=0).view(-1)
        hidden = hidden.detach()
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = F.nll_loss(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        lr = 20.0 * (1000.0 if batch == 1 else 1.0)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        print(f"batch {batch} loss {loss.item():.4f}", flush=True)


CASES = {
    f.__name__: f
    for f in (
        gpt_healthy,
        gpt_log_loss,
        attention_fp16,
        left_padding,
        transformer_log_mask,
        hand_scaler,
        mha_padding,
        resnet_batchnorm,
        vit_adamw_eps0,
        normalised_distance,
        gan_two_optimizers,
        siamese_pairs,
        loader_transforms,
        segmentation_ignore,
        rnn_relu_explodes,
    )
}


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from dispatch_oracle import case_main

    case_main(__file__, CASES)
