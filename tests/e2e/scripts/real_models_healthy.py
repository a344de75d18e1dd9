"""Two healthy cases of real_models.py, with masks of -inf by design: word_language_model's
Transformer, whose causal mask is log(tril(ones)) (transformer_log_mask), and
nn.MultiheadAttention with a key padding mask (mha_padding). They must run to the end;
real_models.py runs them (its CASES) and gpt_healthy, which trains its GPT, stays there."""

import math

import torch
from torch import nn
from torch.nn import functional as F


class WordTransformer(nn.Module):
    """pytorch/examples' word_language_model TransformerModel, shrunk: its causal
    mask is log(tril(ones)), -inf made by an op from constants alone."""

    def __init__(self, ntoken=32, ninp=16, nhead=2, nhid=32, nlayers=2):
        super().__init__()
        self.src_mask = None
        self.ninp = ninp
        layer = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
        self.input_emb = nn.Embedding(ntoken, ninp)
        self.decoder = nn.Linear(ninp, ntoken)

    def _generate_square_subsequent_mask(self, sz):
        return torch.log(torch.tril(torch.ones(sz, sz)))

    def forward(self, src):
        if self.src_mask is None or self.src_mask.size(0) != len(src):
            self.src_mask = self._generate_square_subsequent_mask(len(src))
        src = self.input_emb(src) * math.sqrt(self.ninp)
        output = self.encoder(src, mask=self.src_mask)
        return F.log_softmax(self.decoder(output), dim=-1)


def transformer_log_mask():
    """word_language_model's training loop on its Transformer: healthy."""
    model = WordTransformer()
    for batch in range(3):
        data = torch.randint(32, (8, 4))  # (sequence, batch), as its batchify makes
        targets = torch.roll(data, -1, dims=0).view(-1)
        model.zero_grad()
        output = model(data)
        loss = F.nll_loss(output.view(-1, 32), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-0.1)  # its own SGD, through .data
        print(f"batch {batch} loss {loss.item():.4f}", flush=True)


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
