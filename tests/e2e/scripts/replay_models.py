"""Forward-pass faults inside models nobody here wrote, at their real sizes and configs
(random weights, nothing downloaded), for the replay at a module event: module mode sees
the module, the replay names the op and line --ops names (tests/e2e/test_replay_models.py).
Each loop counts its own `batch`; the first batch is healthy.

    python3 replay_models.py CASE [--oracle]
"""

import os
import sys

import torch


def resnet18_fp16():
    """torchvision's resnet18 evaluated in float16, from a checkpoint whose layer3.1.bn2
    learned a large scale (weight 150): normalised images stay far inside float16's range,
    one batch whose images skipped the loader's Normalize (pixels 0..255) overflows there."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).eval()
    with torch.no_grad():
        model.layer3[1].bn2.weight.mul_(150.0)
    model.half()
    pixels = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for batch in range(3):
            images = torch.randn(4, 3, 64, 64, generator=pixels)
            if batch == 1:
                images = torch.rand(4, 3, 64, 64, generator=pixels) * 255
            logits = model(images.half())  # line: resnet18_fp16
            print(f"batch {batch} top class {logits.float().argmax(-1).tolist()}", flush=True)


def vit_b_16_fp16():
    """torchvision's vit_b_16 (12 layers, width 768) evaluated in float16, from a
    checkpoint whose encoder layer 5 MLP output projection grew large in a bf16 fine-tune:
    its weights fit float16, its outputs on some batches do not (batch 1, image seed 3:
    6.7e4 > 65504; seeds 8 and 2 stay under it, by 4% and 2%, with torch 2.6's and 2.14's
    initialisations alike)."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.vit_b_16(image_size=32, num_classes=10).eval()
    with torch.no_grad():
        model.encoder.layers.encoder_layer_5.mlp[3].weight.mul_(3.3e4)
    model.half()
    with torch.no_grad():
        for batch, seed in enumerate([8, 3, 2]):
            images = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(seed))
            logits = model(images.half())  # line: vit_b_16_fp16
            print(f"batch {batch} top class {logits.float().argmax(-1).tolist()}", flush=True)


def llama_fp16():
    """A transformers Llama decoder (RMSNorm, rotary attention, gated SiLU MLP) evaluated
    in float16: layer 1's MLP product SiLU(gate) * up, made in LlamaMLP.forward outside any
    submodule, passes 65504 on some token batches (batch 1), not on others."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    import transformers_models

    model = transformers_models.llama(torch.float16, mlp_scale=967.0)
    with torch.no_grad():
        for batch, seed in enumerate([3, 1, 2]):
            logits = model(input_ids=transformers_models._ids(seed=seed)).logits  # line: llama_fp16
            print(f"batch {batch} logits abs max {logits.abs().max().item():.4g}", flush=True)


def nanogpt_left_padding():
    """real_models.py's minGPT-style decoder with a key padding mask, left-padded: a row
    of attention scores masked whole, softmax's 0/0 (its training loop, run from here)."""
    real_models().left_padding()


def real_models():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import real_models

    return real_models


CASES = {f.__name__: f for f in (resnet18_fp16, vit_b_16_fp16, llama_fp16, nanogpt_left_padding)}


def library_files():
    """The model code whose lines the oracle names, as ovf names an op's line: the
    innermost frame outside torch's own code (of the libraries installed)."""
    import importlib

    files = []
    for name in (
        "torchvision.models.resnet",
        "torchvision.models.vision_transformer",
        "transformers.models.llama.modeling_llama",
    ):
        try:
            files.append(importlib.import_module(name).__file__)
        except ImportError:
            pass
    return files


def oracle_files():
    return {"lines_in": library_files(), "steps_in": [real_models().__file__]}


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from dispatch_oracle import case_main

    case_main(__file__, CASES, oracle_files)
