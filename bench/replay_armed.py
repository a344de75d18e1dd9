"""What arming the replay at module events (issue 24; python3 -m ovf has it on) costs a
training step, measured where it can be seen: a step of a one-layer model, thousands of
times, module mode against module mode with the replay armed, interleaved in blocks.
Arming adds per step what _held_step.py does at the root's forward (its two hooks,
torch.get_rng_state(), the inputs' version counters), independent of the model's size;
the real models' plain steps, timed in the same run, turn it into a share of theirs.

    python3 bench/replay_armed.py [--quick] [--models resnet18,vit_b_16,gpt]

Target (bench/real_models_overhead.py's ovf+replay <= 1.03x plain, with module mode's own
cost inside it): the replay's share of each real model's step <= 0.5%, so that arming it
costs nothing that the step-time benchmark could see.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (pins threads before torch loads)
import real_models_overhead  # noqa: E402
import torch  # noqa: E402

SHARE_TARGET = 0.005


def tiny_step_us(ovf, armed, steps):
    """Median microseconds of a one-layer training step in module mode (`armed`: with
    the replay armed), over blocks of `steps` steps."""
    from ovf import _replay

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(4, 8)
    watcher = ovf.DebugUnderflowOverflow(model)
    if armed:
        _replay.configure(True, model)
    try:

        def step():
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()

        for _ in range(50):
            step()
        started = time.perf_counter()
        for _ in range(steps):
            step()
        return (time.perf_counter() - started) / steps * 1e6
    finally:
        if armed:
            _replay.configure(False)
        watcher.remove()


def plain_step_s(name, quick):
    _, _, step = real_models_overhead.training_step(name, quick)
    step()
    times = []
    for _ in range(1 if quick else 3):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    return _common.median(times)


def main(argv=None):
    args = _common.model_bench_arguments(__doc__, "resnet18,vit_b_16,gpt", argv)
    ovf = _common.import_ovf()
    _common.print_machine("the replay armed (bench/replay_armed.py)", ovf)
    rounds, steps = (2, 200) if args.quick else (9, 2000)
    us = {False: [], True: []}
    for r in range(rounds):
        for armed in (False, True) if r % 2 == 0 else (True, False):
            us[armed].append(tiny_step_us(ovf, armed, steps))
    module, armed = _common.median(us[False]), _common.median(us[True])
    added = armed - module
    print()
    print(
        f"one-layer step, module mode:             {module:8.1f} us (median of {rounds} x {steps})"
    )
    print(f"one-layer step, module mode + replay:    {armed:8.1f} us")
    print(f"the replay armed adds:                   {added:8.1f} us a step")
    print()
    print(f"{'model':<10}{'plain step s':>14}{'replay share':>14}")
    missed = []
    for name in args.models.split(","):
        plain = plain_step_s(name, args.quick)
        share = max(added, 0.0) * 1e-6 / plain
        print(f"{name:<10}{plain:>14.4f}{share * 100:>13.3f}%", flush=True)
        if share > SHARE_TARGET:
            missed.append(f"{name}: the replay armed {share * 100:.3f}% of a step > 0.5%")
    print()
    _common.print_targets(missed, "target met: the replay armed <= 0.5% of each model's step")
    print(_common.load_line("end"))
    return _common.exit_status(missed, args.quick)


if __name__ == "__main__":
    sys.exit(main())
