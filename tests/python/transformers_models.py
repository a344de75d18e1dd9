"""Real transformers models built from small configs with random weights (nothing is
downloaded), each with a known place where its numbers leave the finite range, for the
tests that hold ovf against the installed transformers.debug_utils."""

import torch
import transformers

VOCAB = 96


def _ids(batch=2, length=8, seed=1):
    return torch.randint(1, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def t5(kind="t5", dtype=torch.float16):
    """The reference documentation's own example: a T5 v1.1 (gated GELU) in fp16 whose
    feed-forward in block 2 overflows: encoder.block.2.layer.1.DenseReluDense.wo's output
    is inf, and the Dropout after it. Here the gate's weights are scaled up so that the
    product of the gates (wi_0's GELU times wi_1) passes fp16's 65504 as a trained model's
    did: the first module that sees it is the Dropout on that product."""
    config_class = transformers.MT5Config if kind == "mt5" else transformers.T5Config
    config = config_class(
        vocab_size=VOCAB,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=3,
        num_decoder_layers=2,
        num_heads=4,
        feed_forward_proj="gated-gelu",
        decoder_start_token_id=0,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    model_class = (
        transformers.MT5ForConditionalGeneration
        if kind == "mt5"
        else transformers.T5ForConditionalGeneration
    )
    model = model_class(config).eval()
    with torch.no_grad():
        ff = model.encoder.block[2].layer[1].DenseReluDense
        ff.wi_0.weight.mul_(150.0)
        ff.wi_1.weight.mul_(150.0)
    model.to(dtype)
    ids = _ids()

    def step(m, batch):
        return m(input_ids=ids, decoder_input_ids=ids[:, :4])

    return model, step


def gpt2(overflow=True):
    config = transformers.GPT2Config(
        vocab_size=VOCAB,
        n_embd=32,
        n_layer=2,
        n_head=2,
        n_positions=16,
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).eval()
    if overflow:
        with torch.no_grad():
            model.transformer.h[1].mlp.c_fc.weight.mul_(1e38)
    ids = _ids()

    def step(m, batch):
        return m(ids)  # positional, as many scripts call it

    return model, step


def llama_bf16():
    """A Llama-style decoder (RMSNorm, rotary attention, gated SiLU MLP) in bf16, whose
    MLP in layer 1 overflows bf16's range (3.4e38): SiLU(gate) times up, a product made
    outside any module, reaches down_proj as inf."""
    model = llama(torch.bfloat16, mlp_scale=1e20)
    ids = _ids()

    def step(m, batch):
        return m(input_ids=ids)

    return model, step


def llama(dtype, mlp_scale):
    """The decoder of llama_bf16, its layer 1 MLP's gate and up weights times mlp_scale."""
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.model.layers[1].mlp.up_proj.weight.mul_(mlp_scale)
        model.model.layers[1].mlp.gate_proj.weight.mul_(mlp_scale)
    return model.to(dtype)


def bert():
    config = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=32,
    )
    torch.manual_seed(0)
    model = transformers.BertForMaskedLM(config).eval()
    with torch.no_grad():
        model.bert.encoder.layer[1].intermediate.dense.weight.mul_(1e38)
    ids = _ids()

    def step(m, batch):
        return m(input_ids=ids, attention_mask=torch.ones_like(ids))

    return model, step
