"""The early warning (python3 -m ovf --early), measured: false alarms on healthy runs of
real models, batches gained on diverging runs, and its cost per training step.

1. Healthy runs: torchvision's resnet18 (SGD, momentum; also under bf16 autocast), a
   small torchvision VisionTransformer (AdamW, warm-up), the tests' GPT-style decoder
   (AdamW, warm-up; also the whole model in float16), transformers' GPT-2 and T5 built
   from configs (AdamW), each trained on synthetic data with ovf in auto mode and
   --early at its defaults. Any EarlyWarningError is a false alarm.
2. Diverging runs (tests/e2e/scripts/early_warning.py, each a fresh process): the batch
   of the warning, with both rules and with the growth rule alone (--update-ratio 0),
   against the batch of the first non-finite value the dispatch oracle names.
3. Cost: the median step time in module mode with --early on against module mode
   alone, interleaved in one process (the control block switched between rounds):
   the growth rule costs a table lookup per frame, the update ratio a copy of the
   parameters and one host read per step.

    python3 bench/early_warning.py [--quick]
"""

import argparse
import importlib
import math
import os
import re
import subprocess
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (pins threads before torch loads)
import torch  # noqa: E402
from torch.nn import functional as F  # noqa: E402

SCRIPTS = os.path.join(_common.REPO, "tests", "e2e", "scripts")
EARLY_SCRIPT = os.path.join(SCRIPTS, "early_warning.py")
TARGET_COST = 1.05  # module mode with --early against module mode alone


def _ce(model, x, y):
    out = model(x)
    if not torch.is_tensor(out):
        out = out["logits"]
    return F.cross_entropy(out.reshape(-1, out.size(-1)).float(), y.reshape(-1))


def build(name):
    """(model, optimizer, scheduler or None, batches(b) -> (x, y), loss(model, x, y), autocast)"""
    import torchvision

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    autocast = None
    if name in ("resnet18", "resnet18_bf16"):
        model = torchvision.models.resnet18(num_classes=10)
        data = [(torch.randn(8, 3, 64, 64, generator=g), torch.randint(10, (8,), generator=g))]
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
        autocast = torch.bfloat16 if name.endswith("bf16") else None
        return model, optimizer, None, data, _ce, autocast
    if name == "vit":
        model = torchvision.models.VisionTransformer(
            image_size=32,
            patch_size=8,
            num_layers=4,
            num_heads=4,
            hidden_dim=128,
            mlp_dim=256,
            num_classes=10,
        )
        data = [(torch.randn(8, 3, 32, 32, generator=g), torch.randint(10, (8,), generator=g))]
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 10))
        return model, optimizer, warmup, data, _ce, None
    if name in ("gpt", "gpt_fp16"):
        sys.path.insert(0, SCRIPTS)
        from real_models import GPT

        model = GPT(vocab=256, width=128, heads=4, layers=4, block=64)
        idx = torch.randint(256, (8, 64), generator=g)
        data = [(idx, torch.roll(idx, -1, 1))]
        if name == "gpt_fp16":
            model = model.half()
            return (
                model,
                torch.optim.AdamW(model.parameters(), lr=1e-3, eps=1e-4),
                None,
                data,
                _ce,
                None,
            )
        optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95))
        warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 10))
        return model, optimizer, warmup, data, _ce, None
    import transformers

    transformers.logging.set_verbosity_error()
    if name == "hf_gpt2":
        config = transformers.GPT2Config(
            vocab_size=256,
            n_positions=64,
            n_embd=128,
            n_layer=4,
            n_head=4,
            bos_token_id=0,
            eos_token_id=0,
        )
        model = transformers.GPT2LMHeadModel(config)
        idx = torch.randint(256, (8, 64), generator=g)
        data = [(idx, torch.roll(idx, -1, 1))]
        return model, torch.optim.AdamW(model.parameters(), lr=5e-4), None, data, _ce, None
    if name == "hf_t5":
        config = transformers.T5Config(
            vocab_size=256,
            d_model=64,
            d_kv=16,
            d_ff=128,
            num_layers=2,
            num_heads=4,
            decoder_start_token_id=0,
        )
        model = transformers.T5ForConditionalGeneration(config)
        idx = torch.randint(256, (8, 32), generator=g)

        def t5_loss(m, x, y):
            return m(input_ids=x, labels=y).loss

        return (
            model,
            torch.optim.AdamW(model.parameters(), lr=1e-3),
            None,
            [(idx, idx)],
            t5_loss,
            None,
        )
    raise ValueError(name)


HEALTHY = ("resnet18", "resnet18_bf16", "vit", "gpt", "gpt_fp16", "hf_gpt2", "hf_t5")


def train(name, steps, ovf):
    """Trains `steps` steps with --early armed: (the warning's text or None, the largest
    |dw|/|w| of a step, measured here on every element)."""
    model, optimizer, scheduler, data, loss_of, autocast = build(name)
    model.train()
    params = [p for group in optimizer.param_groups for p in group["params"]]
    largest = 0.0
    ovf._auto.enable(on_nan="raise", early=True)
    try:
        for step in range(steps):
            x, y = data[step % len(data)]
            with torch.autocast("cpu", dtype=autocast, enabled=autocast is not None):
                loss = loss_of(model, x, y)
            optimizer.zero_grad()
            loss.backward()
            before = [p.detach().float().clone() for p in params]
            optimizer.step()
            moved = math.sqrt(
                sum((p.float() - w).norm() ** 2 for p, w in zip(params, before, strict=True))
            )
            largest = max(largest, moved / math.sqrt(sum(w.norm() ** 2 for w in before)))
            if scheduler is not None:
                scheduler.step()
            if not math.isfinite(loss.item()):
                return f"loss {loss.item()} at step {step} (the run broke)", largest
    except ovf.EarlyWarningError as e:
        return str(e), largest
    return None, largest


def diverging(case, *options):
    """The batch of the run's early warning under `options` (None: none) and its text."""
    env = dict(
        os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(_common.import_ovf().__file__))
    )
    out = subprocess.run(
        [sys.executable, "-m", "ovf", "--early", *options, EARLY_SCRIPT, case],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=_common.REPO,
    ).stdout
    found = re.search(r"^ovf: early warning at batch (\d+): (.*)$", out, re.M)
    return (int(found.group(1)), found.group(2)) if found else (None, "")


def oracle_batch(case):
    out = subprocess.run(
        [sys.executable, EARLY_SCRIPT, case, "--oracle"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=_common.REPO,
    ).stdout
    found = re.search(r"^oracle: .* at batch (\d+)", out, re.M)
    return int(found.group(1)) if found else None


def cost(name, ovf, rounds, steps):
    """Median step seconds: module mode, and module mode with --early."""
    model, optimizer, scheduler, data, loss_of, autocast = build(name)
    x, y = data[0]
    ovf._auto.enable(on_nan="warn", early=True)

    def step():
        optimizer.zero_grad()
        loss_of(model, x, y).backward()
        optimizer.step()

    modes = {"module": (0, 0.0), "module+early": (4, 1.0)}
    times = {m: [] for m in modes}
    step()
    for r in range(rounds):
        for mode in list(modes)[r % 2 :] + list(modes)[: r % 2]:
            horizon, ratio = modes[mode]
            ovf._ovf.set_control(early_horizon=horizon, update_ratio_max=ratio)
            step()
            started = time.perf_counter()
            for _ in range(steps):
                step()
            times[mode].append((time.perf_counter() - started) / steps)
    return {m: _common.median(v) for m, v in times.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer steps and rounds (a smoke test)")
    args = p.parse_args(argv)
    ovf = _common.import_ovf()
    importlib.import_module("ovf._auto")  # ovf._auto.enable(early=True)

    warnings.filterwarnings("ignore")
    _common.print_machine("the early warning (bench/early_warning.py)", ovf)

    steps = 6 if args.quick else 40
    print(f"\n1. healthy runs, {steps} training steps each, --early at its defaults")
    alarms = 0
    print(f"   {'model':<14} {'largest |dw|/|w| of a step (warns above 1)':<44} verdict")
    for name in HEALTHY[:2] if args.quick else HEALTHY:
        said, largest = train(name, steps, ovf)
        alarms += said is not None
        verdict = "no warning" if said is None else "FALSE ALARM: " + said
        print(f"   {name:<14} {largest:<44.3g} {verdict}")
    print(f"   false alarms: {alarms} of {len(HEALTHY[:2] if args.quick else HEALTHY)} runs")

    print("\n2. diverging runs: the batch of the warning and of the first non-finite value")
    print(
        f"   {'case':<12} {'first NaN/Inf':>13} {'--early':>8} {'gained':>7}"
        f" {'growth only':>12} {'gained':>7}"
    )
    late = 0
    for case in ("diverge_lr", "fp16_growth"):
        nan = oracle_batch(case)
        both, _ = diverging(case)
        growth, _ = diverging(case, "--update-ratio", "0")
        gained = [None if b is None or nan is None else nan - b for b in (both, growth)]
        late += sum(1 for g in gained if g is None or g < 1)
        print(
            f"   {case:<12} {nan!s:>13} {both!s:>8} {gained[0]!s:>7} {growth!s:>12}"
            f" {gained[1]!s:>7}"
        )

    rounds, per_round = (2, 1) if args.quick else (11, 4)
    print(f"\n3. cost: median seconds per step ({rounds} interleaved rounds of {per_round})")
    missed = alarms + late
    for name in ("resnet18", "gpt"):
        t = cost(name, ovf, rounds, per_round)
        ratio = t["module+early"] / t["module"]
        missed += ratio > TARGET_COST
        print(
            f"   {name:<10} module {t['module']:.4f}  module+early {t['module+early']:.4f}"
            f"  ratio {ratio:.3f} (target <= {TARGET_COST})"
        )
    return _common.exit_status(missed, args.quick)


if __name__ == "__main__":
    sys.exit(main())
