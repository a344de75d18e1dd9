"""A small, self-contained T5-style encoder-decoder in plain torch.nn.

It follows the structure and the module names of Hugging Face's
``models/t5/modeling_t5.py`` (the model of the reference walk-through), so that
ovf's reports read the same: ``encoder.block.2.layer.1.DenseReluDense.wo``,
``encoder.block.0.layer.0.SelfAttention``, ``decoder.block.1.layer.1.EncDecAttention``...

What makes it T5 and not a textbook transformer, and matters for overflows:

- ``T5LayerNorm`` scales by the root mean square only (no mean subtraction, no bias);
- attention logits are ``q @ k^T`` without the ``1/sqrt(d_kv)`` scaling;
- a learned relative position bias (first layer of each stack) is added to them;
- the feed-forward is gated-GELU: ``wo(dropout(gelu(wi_0(x)) * wi_1(x)))``;
- the residual stream is never normalised, only each sublayer's input.

No dependency besides torch. ``T5Config.tiny()`` is a model that trains in
milliseconds per step on one CPU core; ``T5Config.t5_small()`` has the sizes
of t5-small (d_model 512, d_ff 2048, 8 heads, 6 + 6 layers).
"""

import dataclasses
import math

import torch
from torch import nn


@dataclasses.dataclass
class T5Config:
    vocab_size: int = 256
    d_model: int = 64
    d_kv: int = 16
    d_ff: int = 128
    num_heads: int = 4
    num_layers: int = 2
    num_decoder_layers: int = 2  # 0: encoder only (a classifier/regressor head on top)
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    dropout_rate: float = 0.1
    layer_norm_epsilon: float = 1e-6
    initializer_factor: float = 1.0
    tie_word_embeddings: bool = True

    @classmethod
    def tiny(cls, **overrides):
        """A few hundred thousand parameters: per-module cost dominates a step."""
        return cls(**overrides)

    @classmethod
    def t5_small(cls, **overrides):
        """The sizes of t5-small (vocabulary reduced; it does not change per-layer cost)."""
        fields = dict(
            vocab_size=32128,
            d_model=512,
            d_kv=64,
            d_ff=2048,
            num_heads=8,
            num_layers=6,
            num_decoder_layers=6,
        )
        fields.update(overrides)
        return cls(**fields)


class T5LayerNorm(nn.Module):
    """RMS norm: no mean subtraction, no bias; the variance is computed in float32."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            hidden_states = hidden_states.to(self.weight.dtype)
        return self.weight * hidden_states


class NewGELUActivation(nn.Module):
    """The tanh approximation of GELU ("gelu_new")."""

    def forward(self, input):
        return (
            0.5
            * input
            * (
                1.0
                + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0)))
            )
        )


class T5DenseGatedGeluDense(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.wi_0 = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.wi_1 = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.wo = nn.Linear(config.d_ff, config.d_model, bias=False)
        self.dropout = nn.Dropout(config.dropout_rate)
        self.gelu_act = NewGELUActivation()

    def forward(self, hidden_states):
        hidden_gelu = self.gelu_act(self.wi_0(hidden_states))
        hidden_linear = self.wi_1(hidden_states)
        hidden_states = hidden_gelu * hidden_linear
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.wo(hidden_states)
        return hidden_states


class T5LayerFF(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.DenseReluDense = T5DenseGatedGeluDense(config)
        self.layer_norm = T5LayerNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.dropout = nn.Dropout(config.dropout_rate)

    def forward(self, hidden_states):
        forwarded_states = self.layer_norm(hidden_states)
        forwarded_states = self.DenseReluDense(forwarded_states)
        hidden_states = hidden_states + self.dropout(forwarded_states)
        return hidden_states


class T5Attention(nn.Module):
    def __init__(self, config, has_relative_attention_bias=False, is_decoder=False):
        super().__init__()
        self.is_decoder = is_decoder
        self.has_relative_attention_bias = has_relative_attention_bias
        self.relative_attention_num_buckets = config.relative_attention_num_buckets
        self.relative_attention_max_distance = config.relative_attention_max_distance
        self.n_heads = config.num_heads
        self.key_value_proj_dim = config.d_kv
        self.inner_dim = config.num_heads * config.d_kv
        self.dropout = config.dropout_rate
        self.q = nn.Linear(config.d_model, self.inner_dim, bias=False)
        self.k = nn.Linear(config.d_model, self.inner_dim, bias=False)
        self.v = nn.Linear(config.d_model, self.inner_dim, bias=False)
        self.o = nn.Linear(self.inner_dim, config.d_model, bias=False)
        if has_relative_attention_bias:
            self.relative_attention_bias = nn.Embedding(
                self.relative_attention_num_buckets, self.n_heads
            )

    @staticmethod
    def _relative_position_bucket(
        relative_position, bidirectional=True, num_buckets=32, max_distance=128
    ):
        relative_buckets = 0
        if bidirectional:
            num_buckets //= 2
            relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
            relative_position = torch.abs(relative_position)
        else:
            relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
        max_exact = num_buckets // 2
        is_small = relative_position < max_exact
        # the log is taken of positions >= max_exact only; clamp the others to 1 so it stays finite
        relative_position_if_large = max_exact + (
            torch.log(relative_position.float().clamp(min=1) / max_exact)
            / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)
        ).to(torch.long)
        relative_position_if_large = torch.min(
            relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
        )
        relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
        return relative_buckets

    def compute_bias(self, query_length, key_length, device):
        context_position = torch.arange(query_length, dtype=torch.long, device=device)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long, device=device)[None, :]
        relative_position = memory_position - context_position
        buckets = self._relative_position_bucket(
            relative_position,
            bidirectional=not self.is_decoder,
            num_buckets=self.relative_attention_num_buckets,
            max_distance=self.relative_attention_max_distance,
        )
        values = self.relative_attention_bias(buckets)  # (q, k, heads)
        return values.permute([2, 0, 1]).unsqueeze(0)  # (1, heads, q, k)

    def forward(self, hidden_states, mask=None, key_value_states=None, position_bias=None):
        batch_size, seq_length = hidden_states.shape[:2]
        source = hidden_states if key_value_states is None else key_value_states
        key_length = source.shape[1]

        def shape(states):
            return states.view(batch_size, -1, self.n_heads, self.key_value_proj_dim).transpose(
                1, 2
            )

        query_states = shape(self.q(hidden_states))
        key_states = shape(self.k(source))
        value_states = shape(self.v(source))

        # no 1/sqrt(d_kv) scaling: T5 folds it into the initialisation of q
        scores = torch.matmul(query_states, key_states.transpose(3, 2))
        if position_bias is None:
            if self.has_relative_attention_bias:
                position_bias = self.compute_bias(seq_length, key_length, scores.device)
            else:
                position_bias = torch.zeros(
                    (1, self.n_heads, seq_length, key_length),
                    device=scores.device,
                    dtype=scores.dtype,
                )
            if mask is not None:
                position_bias = position_bias + mask
        scores = scores + position_bias
        attn_weights = nn.functional.softmax(scores.float(), dim=-1).type_as(scores)
        attn_weights = nn.functional.dropout(attn_weights, p=self.dropout, training=self.training)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous().view(batch_size, -1, self.inner_dim)
        attn_output = self.o(attn_output)
        # (output, present_key_value_state, position_bias), as in transformers
        return attn_output, None, position_bias


class T5LayerSelfAttention(nn.Module):
    def __init__(self, config, has_relative_attention_bias=False, is_decoder=False):
        super().__init__()
        self.SelfAttention = T5Attention(config, has_relative_attention_bias, is_decoder)
        self.layer_norm = T5LayerNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.dropout = nn.Dropout(config.dropout_rate)

    def forward(self, hidden_states, attention_mask=None, position_bias=None):
        normed_hidden_states = self.layer_norm(hidden_states)
        attention_output = self.SelfAttention(
            normed_hidden_states, mask=attention_mask, position_bias=position_bias
        )
        hidden_states = hidden_states + self.dropout(attention_output[0])
        return (hidden_states,) + attention_output[1:]


class T5LayerCrossAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.EncDecAttention = T5Attention(
            config, has_relative_attention_bias=False, is_decoder=True
        )
        self.layer_norm = T5LayerNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.dropout = nn.Dropout(config.dropout_rate)

    def forward(self, hidden_states, key_value_states, attention_mask=None, position_bias=None):
        normed_hidden_states = self.layer_norm(hidden_states)
        attention_output = self.EncDecAttention(
            normed_hidden_states,
            mask=attention_mask,
            key_value_states=key_value_states,
            position_bias=position_bias,
        )
        hidden_states = hidden_states + self.dropout(attention_output[0])
        return (hidden_states,) + attention_output[1:]


class T5Block(nn.Module):
    def __init__(self, config, has_relative_attention_bias=False, is_decoder=False):
        super().__init__()
        self.is_decoder = is_decoder
        self.layer = nn.ModuleList()
        self.layer.append(T5LayerSelfAttention(config, has_relative_attention_bias, is_decoder))
        if is_decoder:
            self.layer.append(T5LayerCrossAttention(config))
        self.layer.append(T5LayerFF(config))

    def forward(
        self,
        hidden_states,
        attention_mask=None,
        position_bias=None,
        encoder_hidden_states=None,
        encoder_attention_mask=None,
        encoder_decoder_position_bias=None,
    ):
        self_attention_outputs = self.layer[0](
            hidden_states, attention_mask=attention_mask, position_bias=position_bias
        )
        hidden_states, _, position_bias = self_attention_outputs
        if self.is_decoder:
            cross_attention_outputs = self.layer[1](
                hidden_states,
                key_value_states=encoder_hidden_states,
                attention_mask=encoder_attention_mask,
                position_bias=encoder_decoder_position_bias,
            )
            hidden_states, _, encoder_decoder_position_bias = cross_attention_outputs
        hidden_states = self.layer[-1](hidden_states)
        return hidden_states, position_bias, encoder_decoder_position_bias


def _extended_mask(mask, dtype):
    """(batch, keys) of 1/0 -> additive (batch, 1, 1, keys) of 0 / dtype's min."""
    if mask is None:
        return None
    return (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


class T5Stack(nn.Module):
    def __init__(self, config, embed_tokens, is_decoder=False):
        super().__init__()
        self.embed_tokens = embed_tokens
        self.is_decoder = is_decoder
        n = config.num_decoder_layers if is_decoder else config.num_layers
        self.block = nn.ModuleList(
            [
                T5Block(config, has_relative_attention_bias=(i == 0), is_decoder=is_decoder)
                for i in range(n)
            ]
        )
        self.final_layer_norm = T5LayerNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.dropout = nn.Dropout(config.dropout_rate)

    def forward(
        self,
        input_ids,
        attention_mask=None,
        encoder_hidden_states=None,
        encoder_attention_mask=None,
    ):
        inputs_embeds = self.embed_tokens(input_ids)
        dtype = inputs_embeds.dtype
        seq_length = input_ids.shape[1]
        extended_mask = _extended_mask(attention_mask, dtype)
        if self.is_decoder:
            causal = torch.tril(torch.ones(seq_length, seq_length, device=input_ids.device))
            causal = (1.0 - causal[None, None, :, :].to(dtype)) * torch.finfo(dtype).min
            extended_mask = (
                causal
                if extended_mask is None
                else torch.maximum(
                    causal + extended_mask, causal.new_tensor(torch.finfo(dtype).min)
                )
            )
        encoder_extended_mask = _extended_mask(encoder_attention_mask, dtype)

        hidden_states = self.dropout(inputs_embeds)
        position_bias = None
        encoder_decoder_position_bias = None
        for layer_module in self.block:
            hidden_states, position_bias, encoder_decoder_position_bias = layer_module(
                hidden_states,
                attention_mask=extended_mask,
                position_bias=position_bias,
                encoder_hidden_states=encoder_hidden_states,
                encoder_attention_mask=encoder_extended_mask,
                encoder_decoder_position_bias=encoder_decoder_position_bias,
            )
        hidden_states = self.final_layer_norm(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return hidden_states


class T5ForConditionalGeneration(nn.Module):
    """Encoder-decoder with a language-model head; returns {"loss", "logits"} like transformers.

    With ``config.num_decoder_layers == 0`` there is no decoder: the head reads the
    encoder's states and ``labels`` are per input token (a token-tagging model).
    """

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.model_dim = config.d_model
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        self.encoder = T5Stack(config, self.shared, is_decoder=False)
        self.decoder = (
            T5Stack(config, self.shared, is_decoder=True) if config.num_decoder_layers > 0 else None
        )
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.shared.weight
        self.apply(self._init_weights)

    def _init_weights(self, module):
        # T5's initialisation (it is what makes the unscaled attention sane)
        factor = self.config.initializer_factor
        c = self.config
        if isinstance(module, T5LayerNorm):
            module.weight.data.fill_(factor * 1.0)
        elif isinstance(module, nn.Embedding) and module is self.shared:
            module.weight.data.normal_(mean=0.0, std=factor * 1.0)
        elif isinstance(module, T5DenseGatedGeluDense):
            module.wi_0.weight.data.normal_(mean=0.0, std=factor * (c.d_model**-0.5))
            module.wi_1.weight.data.normal_(mean=0.0, std=factor * (c.d_model**-0.5))
            module.wo.weight.data.normal_(mean=0.0, std=factor * (c.d_ff**-0.5))
        elif isinstance(module, T5Attention):
            module.q.weight.data.normal_(mean=0.0, std=factor * ((c.d_model * c.d_kv) ** -0.5))
            module.k.weight.data.normal_(mean=0.0, std=factor * (c.d_model**-0.5))
            module.v.weight.data.normal_(mean=0.0, std=factor * (c.d_model**-0.5))
            module.o.weight.data.normal_(mean=0.0, std=factor * ((c.num_heads * c.d_kv) ** -0.5))
            if module.has_relative_attention_bias:
                module.relative_attention_bias.weight.data.normal_(
                    mean=0.0, std=factor * (c.d_model**-0.5)
                )

    def forward(self, input_ids, attention_mask=None, decoder_input_ids=None, labels=None):
        hidden_states = self.encoder(input_ids, attention_mask=attention_mask)
        if self.decoder is not None:
            if decoder_input_ids is None:
                if labels is None:
                    raise ValueError("T5ForConditionalGeneration: give decoder_input_ids or labels")
                decoder_input_ids = shift_right(labels)
            hidden_states = self.decoder(
                decoder_input_ids,
                encoder_hidden_states=hidden_states,
                encoder_attention_mask=attention_mask,
            )
        if self.config.tie_word_embeddings:
            hidden_states = hidden_states * (self.model_dim**-0.5)
        logits = self.lm_head(hidden_states)
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(
                logits.float().view(-1, logits.size(-1)), labels.view(-1), ignore_index=-100
            )
        return {"loss": loss, "logits": logits}


def shift_right(labels, decoder_start_token_id=0, pad_token_id=0):
    """Decoder inputs from labels: start token, then labels[:-1] (-100 -> pad)."""
    shifted = labels.new_zeros(labels.shape)
    shifted[..., 1:] = labels[..., :-1].clone()
    shifted[..., 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == -100, pad_token_id)


def synthetic_batches(config, num_batches, batch_size=8, seq_length=16, seed=0):
    """Deterministic (input_ids, labels) pairs: the labels are the inputs reversed,
    a task the model can learn, so a sane learning rate makes the loss go down."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(num_batches):
        input_ids = torch.randint(
            1, config.vocab_size, (batch_size, seq_length), generator=generator
        )
        batches.append((input_ids, input_ids.flip(-1)))
    return batches


if __name__ == "__main__":
    for name, cfg in (("tiny", T5Config.tiny()), ("t5-small-sized", T5Config.t5_small())):
        model = T5ForConditionalGeneration(cfg)
        n_params = sum(p.numel() for p in model.parameters())
        n_modules = sum(1 for _ in model.modules())
        print(f"{name}: {n_params / 1e6:.2f}M parameters, {n_modules} modules")
