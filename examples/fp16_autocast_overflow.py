"""The fp16 overflow of the reference walk-through, on a T5-small-sized model (GPU).

An ordinary mixed-precision training script (it does not import ovf): CUDA
autocast to float16, a GradScaler, AdamW. It needs a CUDA GPU and a CUDA build
of torch; without one it says so and exits with status 0. Run under
`python -m ovf` on an NVIDIA H200 (tools/gpu-check.sh; README.md, "Tensors on a
GPU"): it stopped where documented below, in both device modes.

The reference documentation shows google/mt5-small overflowing under fp16 in
batch 0 at ``encoder.block.2.layer.1.dropout``: the gated-GELU feed-forward of
block 2 returns activations up to 6.27e+04, just under float16's largest finite
value, 65504, and the Dropout after it, which scales what it keeps by
1 / (1 - 0.1), pushes them past it: inf. mt5 got there through pre-training in
bfloat16; this script builds the same situation into a randomly initialised
T5-small-sized model (see ``plant_large_activations``): one "massive activation"
channel that every token carries in its embedding (such channels are common in
pre-trained transformers) and a block-2 feed-forward unit that reads it, whose
output weight is set so that the block's feed-forward output peaks at about
6.25e+04 in training.

    python3 -m ovf examples/fp16_autocast_overflow.py

First non-finite value (the examples' tests assert this):
    batch 0, module ``encoder.block.2.layer.1.dropout`` (Dropout): ``input[0]``
    abs max about 6.25e+04, ``output`` abs max inf. The frames before it, as in
    the walk-through: ``encoder.block.2.layer.1.DenseReluDense.wo`` input[0]
    about 9.1e+03, output about 6.25e+04; ``...DenseReluDense.dropout`` input[0]
    about 8.2e+03, output about 9.1e+03. (Checked on the CPU by emulating
    autocast's float16 rounding of Linear outputs over 8 dropout seeds: the
    wo output peaks at 6.23e+04 .. 6.28e+04, 4% under 65504.)

Plain, the loss of batch 0 is nan (the inf reaches the next layer norm) and
the GradScaler skips every step, so the loss stays nan.
"""

import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from t5_style import T5Config, T5ForConditionalGeneration, synthetic_batches  # noqa: E402

FP16_MAX = 65504.0
BLOCK, CHANNEL, UNIT, OUT_CHANNEL = 2, 7, 11, 3
WO_WEIGHT = (
    6.84  # block 2's feed-forward output then peaks at ~6.25e4; x 1/0.9 by the dropout > FP16_MAX
)


def plant_large_activations(
    model, block=BLOCK, channel=CHANNEL, unit=UNIT, out_channel=OUT_CHANNEL, wo_weight=WO_WEIGHT
):
    """Turns a fresh T5-small-sized model into one whose block-2 feed-forward output
    peaks at about 6.25e+04: it stands in for the checkpoint of the walk-through.

    Embedding channel `channel` holds 100 for every token, so after each
    T5LayerNorm it is about 21 whatever the token; feed-forward unit `unit` of
    block `block` reads only that channel through wi_0 and wi_1 (weights 4.3:
    pre-activations of about 90, gated GELU about 8.2e+03, 9.1e+03 after the
    pre-``wo`` dropout), and its ``wo`` weight into `out_channel`, 6.84, makes
    that about 6.25e+04. (6.84 was chosen with a float32 forward on the CPU.)
    """
    ff = model.encoder.block[block].layer[1].DenseReluDense
    with torch.no_grad():
        model.shared.weight[:, channel] = 100.0
        for wi in (ff.wi_0, ff.wi_1):
            wi.weight[unit].zero_()
            wi.weight[unit, channel] = 4.3
        ff.wo.weight[:, unit].zero_()
        ff.wo.weight[out_channel, unit] = wo_weight


def main():
    if not torch.cuda.is_available():
        print(
            "fp16_autocast_overflow.py needs a CUDA GPU and a CUDA build of torch "
            f"(this torch is {torch.__version__}, torch.cuda.is_available() is False); "
            "on a CPU, try examples/diverge_lr.py, log_negative.py or div_zero.py."
        )
        return 0

    torch.manual_seed(0)
    config = T5Config.t5_small()
    model = T5ForConditionalGeneration(config)
    batches = synthetic_batches(config, 4, batch_size=8, seq_length=64, seed=0)
    plant_large_activations(model)
    model.cuda().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")

    for batch, (input_ids, labels) in enumerate(batches):
        input_ids, labels = input_ids.cuda(), labels.cuda()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(input_ids, labels=labels)["loss"]
        print(f"batch {batch}: loss {loss.item():.4g}", flush=True)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)  # skipped while gradients are not finite
        scaler.update()
    if not math.isfinite(loss.item()):
        print("loss is not finite: the fp16 forward overflowed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
