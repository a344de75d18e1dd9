"""Training-step time on models people train, with ovf at module level, at op level
(forward ops), at op level with the backward pass, and with torch.autograd.detect_anomaly,
against the plain step: torchvision's resnet18 and vit_b_16 and a small GPT-style
decoder (tests/e2e/scripts/real_models.GPT, larger), on CPU with one thread.

Modes, interleaved round-robin in one process (the order rotating). Each mode's ratio is
the median over rounds of its round's time over that round's plain step: paired, so the
slow drift of a shared machine (this VM's plain step wanders by a third over a day)
cancels instead of landing on whichever mode ran in a slow minute.

  plain       no hooks
  ovf         ovf.DebugUnderflowOverflow(model)
  ovf+replay  the same with the replay at module events armed, as python3 -m ovf has it
              (issue 24): each step's forward inputs and generator states held
  ovf+capture the same with --capture optimizer: before each step a copy of the parameters
              and of AdamW's state, for the replay of a step that writes NaN/Inf (its cost,
              documented; no target)
  ovf+ops     DebugUnderflowOverflow(model, ops=True): every forward ATen op's outputs
  ovf+ops+bw  DebugUnderflowOverflow(model, ops=True, backward=True): and the backward pass's
  anomaly     torch.autograd.detect_anomaly() around forward and backward (torch's own tool;
              it checks backward outputs only and records every forward's stack)
  +cast       the same with cast_shares=True (--cast-shares): every line also counts what
              casts to float16, bfloat16 and the float8 types would lose; where its mode
              without them is timed too, a column gives the +cast mode over it, paired
              round by round (what the counts add, apart from the machine's drift)

A step is zero_grad, forward, cross-entropy loss, backward and an AdamW step on
synthetic data. Beside the ratios, what the modes read: one read of every parameter
(module frames read each at its module's every forward, and AdamW writes every one each
step, so no statistic of the last step still holds), timed apart each round with ovf's
own engine, over that round's plain step; and the megabytes the step's ops write, by
phase (one step counted by a TorchDispatchMode, views left out), which --ops reads.

Targets (issue 12): ovf <= 1.05x plain, ovf+ops <= 1.20x, ovf+ops+bw <= 1.30x; with the
cast counts on (issue 26) the same: ovf+cast <= 1.05x, ovf+ops+cast <= 1.20x; with the
replay armed (issue 24) ovf+replay <= 1.03x.

    python3 bench/real_models_overhead.py [--quick] [--models resnet18,vit_b_16,gpt]
        [--modes plain,ovf,ovf+replay] [--rounds N]
"""

import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (pins threads before torch loads)
import torch  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_leaves  # noqa: E402

TARGETS = {
    "ovf": 1.05,
    "ovf+replay": 1.03,
    "ovf+ops": 1.20,
    "ovf+ops+bw": 1.30,
    "ovf+cast": 1.05,
    "ovf+ops+cast": 1.20,
}
MODES = [
    "plain",
    "ovf",
    "ovf+replay",
    "ovf+capture",
    "ovf+ops",
    "ovf+ops+bw",
    "anomaly",
    "ovf+cast",
    "ovf+ops+cast",
]


def build(name, quick):
    """(model, inputs, targets) of a model people train, at a size one CPU thread steps
    in ~0.1-1 s."""
    import torchvision

    torch.manual_seed(0)
    if name == "resnet18":
        side = 64 if quick else 112
        return (
            torchvision.models.resnet18(num_classes=10),
            torch.randn(4, 3, side, side),
            torch.arange(4),
        )
    if name == "vit_b_16":
        # the real architecture (12 layers, width 768); a 112-pixel image keeps a step near a second
        side = 112 if not quick else 32
        model = torchvision.models.vit_b_16(image_size=side, num_classes=10)
        return model, torch.randn(1, 3, side, side), torch.tensor([3])
    if name == "gpt":
        sys.path.insert(0, os.path.join(_common.REPO, "tests", "e2e", "scripts"))
        from real_models import GPT

        vocab, block = 512, 64 if quick else 128
        model = GPT(
            vocab=vocab, width=128 if quick else 256, heads=4, layers=2 if quick else 4, block=block
        )
        idx = torch.randint(vocab, (8, block))
        return model, idx, torch.roll(idx, -1, dims=1)
    raise ValueError(name)


def loss_of(model, inputs, targets):
    out = model(inputs)
    return F.cross_entropy(out.reshape(-1, out.size(-1)), targets.reshape(-1))


def enter(mode, model, optimizer, ovf):
    """Switches `mode` on; returns what switches it off."""
    if mode == "plain":
        return lambda: None
    if mode == "anomaly":
        context = torch.autograd.detect_anomaly()
        context.__enter__()
        return lambda: context.__exit__(None, None, None)
    watcher = ovf.DebugUnderflowOverflow(
        model,
        ops="+ops" in mode,
        backward=mode == "ovf+ops+bw",
        cast_shares=mode.endswith("+cast"),
    )
    if mode not in ("ovf+replay", "ovf+capture"):
        return watcher.remove
    from ovf import _options, _ovf, _replay, _replay_optimizer

    _replay.configure(True, model)
    handles = []
    if (
        mode == "ovf+capture"
    ):  # what python3 -m ovf's step hook does (watcher.remove clears the bit)
        observe = _ovf.control()["observe"] | _options.OBSERVE_BITS["capture_optimizer"]
        _ovf.set_control(observe=observe)
        handles.append(
            optimizer.register_step_pre_hook(
                lambda opt, *_: _replay_optimizer.capture_if_asked(opt)
            )
        )

    def leave():
        for handle in handles:
            handle.remove()
        watcher.remove()
        _replay.configure(False)

    return leave


def training_step(name, quick):
    """(model, optimizer, step): `name` built, and its step, zero_grad, forward, loss,
    backward and an AdamW step on the same synthetic batch each time."""
    model, inputs, targets = build(name, quick)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)

    def step():
        optimizer.zero_grad()
        loss_of(model, inputs, targets).backward()
        optimizer.step()

    return model, optimizer, step


def parameter_reads(model):
    """Seconds for one read of every parameter by ovf's engine (what module mode's hooks
    read of them in a step; a tied weight once)."""
    from ovf import _ovf

    started = time.perf_counter()
    for p in model.parameters():
        _ovf.stats(p.detach())
    return time.perf_counter() - started


class _OutputBytes(TorchDispatchMode):
    """Bytes of the floating tensors the step's ATen ops write (new tensors, and the
    inputs an in-place op writes; not views), by phase: what --ops reads of them."""

    def __init__(self):
        super().__init__()
        self.phase, self.bytes = "forward", {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        given = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if _tensor(t)}
        written = sum(
            t.numel() * t.element_size()
            for t in tree_leaves(out)
            if _tensor(t)
            and t.is_floating_point()
            and (func._schema.is_mutable or t.untyped_storage().data_ptr() not in given)
        )
        self.bytes[self.phase] = self.bytes.get(self.phase, 0) + written
        return out


def _tensor(value):
    return isinstance(value, torch.Tensor)


def op_output_bytes(model, optimizer, step):
    """{phase: bytes its ops write} of one step: "forward" (the model's forward),
    "backward" (the loss and the backward) and "optimizer" (AdamW's step)."""
    counter = _OutputBytes()

    def phase(name):
        def enter(*_):
            counter.phase = name

        return enter

    handles = [
        model.register_forward_pre_hook(phase("forward")),
        model.register_forward_hook(phase("backward")),
        optimizer.register_step_pre_hook(phase("optimizer")),
    ]
    with counter:
        step()
    for handle in handles:
        handle.remove()
    return counter.bytes


PHASES = ("forward", "backward", "optimizer")


def why_slow(mode, reads, written):
    """What a missed target's mode reads a step, measured apart (module frames read every
    parameter; --ops also every op's output)."""
    if "ops" not in mode:
        return f" (one read of the parameters, timed apart, is {reads:.3f} of a plain step)"
    phases = PHASES if mode == "ovf+ops+bw" else ("forward", "optimizer")
    mb = {p: written.get(p, 0) / 1e6 for p in phases}
    return f" (its ops write {sum(mb.values()):.0f} MB a step, AdamW's {mb['optimizer']:.0f})"


def bench(name, ovf, quick, modes=MODES, rounds=None):
    """{mode: median over rounds of the round's time over its plain step}, the median
    plain step in seconds, the parameters' read over the plain step (medians), the bytes
    the step's ops write by phase."""
    model, optimizer, step = training_step(name, quick)
    for _ in range(2):  # warm-up: allocator, optimizer state
        step()
    written = op_output_bytes(model, optimizer, step)
    default_rounds, steps = (2, 1) if quick else (7, 3)
    rounds = rounds or default_rounds
    times = {mode: [] for mode in modes}
    reads = []
    for r in range(rounds):
        order = modes[r % len(modes) :] + modes[: r % len(modes)]
        for mode in order:
            leave = enter(mode, model, optimizer, ovf)
            step()  # a first step per mode: hooks and caches warm
            started = time.perf_counter()
            for _ in range(steps):
                step()
            times[mode].append((time.perf_counter() - started) / steps)
            leave()
        reads.append(parameter_reads(model) / times["plain"][r])

    def paired(mode, base):
        return _common.median([t / b for t, b in zip(times[mode], times[base], strict=True)])

    ratios = {mode: paired(mode, "plain") for mode in modes[1:]}
    # what the cast counts add to a mode: its +cast form over it, round by round
    ratios.update({f"{m}/{base}": paired(m, base) for m, base in cast_pairs(modes)})
    return ratios, _common.median(times["plain"]), _common.median(reads), written


def cast_pairs(modes):
    """(+cast mode, the same mode without the cast counts) where both are timed."""
    bases = [(m, m.removesuffix("+cast")) for m in modes if m.endswith("+cast")]
    return [(m, base) for m, base in bases if base in modes]


def main(argv=None):
    args = _common.model_bench_arguments(__doc__, "resnet18,vit_b_16,gpt", argv, MODES)
    modes = args.modes
    ovf = _common.import_ovf()
    warnings.filterwarnings("ignore", message=".*[Aa]nomaly.*")
    _common.print_machine(
        "training-step overhead on real models (bench/real_models_overhead.py)", ovf
    )
    print()
    added = [f"{m}/{base}" for m, base in cast_pairs(modes)]
    header = (
        f"{'model':<10}{'plain s':>10}"
        + "".join(f"{m + '/plain':>20}" for m in modes[1:])
        + f"{'param reads/plain':>20}"
        + "".join(f"{a:>22}" for a in added)
    )
    print(
        "each mode's time over the plain step of its round (median over rounds), one read"
        " of every parameter over the plain step"
        + (
            ", and each +cast mode over its mode without the cast counts, round by round"
            if added
            else ""
        )
    )
    print(header)
    print("-" * len(header))
    missed, written_by = [], []
    for name in args.models.split(","):
        ratios, plain, reads, written = bench(name, ovf, args.quick, modes, args.rounds)
        print(
            f"{name:<10}{plain:>10.4f}"
            + "".join(f"{ratios[m]:>20.3f}" for m in modes[1:])
            + f"{reads:>20.3f}"
            + "".join(f"{ratios[a]:>22.3f}" for a in added),
            flush=True,
        )
        written_by.append((name, written))
        missed += [
            f"{name}: {m} {ratios[m]:.3f}x plain > {target}x" + why_slow(m, reads, written)
            for m, target in TARGETS.items()
            if m in ratios and ratios[m] > target
        ]
    print()
    print("MB the step's ops write, by phase (what --ops reads of them)")
    header = f"{'model':<10}" + "".join(f"{phase:>12}" for phase in PHASES)
    print(header)
    print("-" * len(header))
    for name, written in written_by:
        print(f"{name:<10}" + "".join(f"{written.get(p, 0) / 1e6:>12.0f}" for p in PHASES))
    print()
    _common.print_targets(
        missed,
        "targets met: " + ", ".join(f"{m} <= {t}x" for m, t in TARGETS.items() if m in modes),
    )
    print(_common.load_line("end"))
    return _common.exit_status(missed, args.quick)


if __name__ == "__main__":
    sys.exit(main())
