"""What module mode's hooks cost a training step, with and without the table of
statistics read earlier in the forward (runtime/torch/recent_stats.h: a module's input
is mostly a tensor an earlier hook read, a Sequential's layer k reads layer k-1's output),
on bench/real_models_overhead.py's models and step.

Modes, interleaved round-robin in one process (the order rotating), medians:

  plain       no hooks
  re-read     ovf.DebugUnderflowOverflow(model), every input and output read again
  recent      the same, inputs and outputs read once a forward (the default)

Besides the step's time: the hooks' own time per step (each hook timed), what the
table saves of it. No target: module mode's target is bench/real_models_overhead.py's.

    python3 bench/module_reads.py [--quick] [--models resnet18,vit_b_16,gpt]
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (pins threads before torch loads)
import real_models_overhead  # noqa: E402

MODES = ["plain", "re-read", "recent"]


class TimedHooks:
    """ovf's forward hooks wrapped in a timer (registered in their place)."""

    def __init__(self, ovf):
        from ovf import _hooks, _ovf

        self.spent = 0.0
        self._hooks, self._register = _hooks, _hooks.register_forward_hook

        def timed(module, args, kwargs, output):
            started = time.perf_counter()
            result = _ovf.forward_hook(module, args, kwargs, output)
            self.spent += time.perf_counter() - started
            return result

        _hooks.register_forward_hook = lambda module, keyword_inputs=True: (
            module.register_forward_hook(timed, with_kwargs=True)
        )

    def restore(self):
        self._hooks.register_forward_hook = self._register


def bench(name, ovf, quick):
    from ovf import _ovf

    model, _, step = real_models_overhead.training_step(name, quick)
    for _ in range(2):
        step()
    timer = TimedHooks(ovf)
    rounds, steps = (2, 1) if quick else (7, 3)
    times = {mode: [] for mode in MODES}
    hooks = {mode: [] for mode in MODES}
    try:
        for r in range(rounds):
            for mode in MODES[r % len(MODES) :] + MODES[: r % len(MODES)]:
                watcher = None if mode == "plain" else ovf.DebugUnderflowOverflow(model)
                _ovf._use_recent_stats(mode == "recent")
                step()
                timer.spent = 0.0
                started = time.perf_counter()
                for _ in range(steps):
                    step()
                times[mode].append((time.perf_counter() - started) / steps)
                hooks[mode].append(timer.spent / steps)
                if watcher is not None:
                    watcher.remove()
    finally:
        _ovf._use_recent_stats(True)
        timer.restore()
    median = _common.median
    return {m: median(v) for m, v in times.items()}, {m: median(v) for m, v in hooks.items()}


def main(argv=None):
    args = _common.model_bench_arguments(__doc__, "resnet18,vit_b_16,gpt", argv)
    ovf = _common.import_ovf()
    _common.print_machine("module hooks' reads (bench/module_reads.py)", ovf)
    print()
    header = (
        f"{'model':<10}{'plain s':>10}{'re-read s':>11}{'recent s':>10}"
        f"{'re-read/plain':>15}{'recent/plain':>14}"
        f"{'hooks re-read ms':>18}{'hooks recent ms':>17}{'hooks recent/re-read':>22}"
    )
    print("median seconds per step; the hooks' own milliseconds per step")
    print(header)
    print("-" * len(header))
    for name in args.models.split(","):
        t, h = bench(name, ovf, args.quick)
        print(
            f"{name:<10}{t['plain']:>10.4f}{t['re-read']:>11.4f}{t['recent']:>10.4f}"
            f"{t['re-read'] / t['plain']:>15.3f}{t['recent'] / t['plain']:>14.3f}"
            f"{h['re-read'] * 1e3:>18.2f}{h['recent'] * 1e3:>17.2f}"
            f"{h['recent'] / h['re-read']:>22.3f}",
            flush=True,
        )
    print(_common.load_line("end"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
