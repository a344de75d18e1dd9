"""Training-step time of a model under torch.compile, with and without ovf, beside
eager: the step ovf must not slow down by more than 1.15x once compiled, and the
graph breaks ovf causes (none: its hooks enter the graph, runtime/python/ovf/_compile.py).

  eager              the plain step
  eager+ovf          DebugUnderflowOverflow(model)
  eager+ovf+ops      DebugUnderflowOverflow(model, ops=True): every ATen op's outputs
  compiled           torch.compile(model)
  compiled+ovf       DebugUnderflowOverflow(model), then torch.compile(model)
  compiled+ops       the same with ops=True: ovf's checks in the compiled graph at the
                     outputs Inductor keeps anyway (--compiled-ops kept, the default)
  compiled+ops+every the same at every node's output (--compiled-ops every: no fusion)

A step is forward, loss, backward and an SGD step of a GPT-style decoder
(tests/e2e/scripts/real_models.GPT) on CPU with one thread; the median of rounds,
each mode in a child process of one run (Dynamo caches compiled code per code
object). Needs torch >= 2.5 (Debian trixie's 2.6: the second test leg); elsewhere
it says so and exits 0.

    python3 bench/compile_overhead.py [--quick]
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (pins threads before torch loads)
import torch  # noqa: E402
from torch.nn import functional as F  # noqa: E402

TARGET = 1.15  # compiled+ovf / compiled
MODES = [
    "eager",
    "eager+ovf",
    "eager+ovf+ops",
    "compiled",
    "compiled+ovf",
    "compiled+ops",
    "compiled+ops+every",
]


def version():
    parts = torch.__version__.split("+")[0].split(".")[:2]
    return tuple(int("".join(c for c in p if c.isdigit()) or 0) for p in parts)


def build(quick):
    sys.path.insert(0, os.path.join(_common.REPO, "tests", "e2e", "scripts"))
    from real_models import GPT

    torch.manual_seed(0)
    vocab, block = 256, 32 if quick else 64
    model = GPT(vocab=vocab, width=64 if quick else 128, heads=4, layers=2, block=block)
    idx = torch.randint(vocab, (4 if quick else 8, block))
    return model, idx, torch.roll(idx, -1, dims=1)


def graph_breaks(model, inputs):
    import torch._dynamo as dynamo

    return dynamo.explain(model)(inputs).graph_break_count


def measure(mode, quick):
    """(seconds per step, seconds of the first step) of `mode`, in this process."""
    ovf = _common.import_ovf()
    model, inputs, targets = build(quick)
    if mode != "eager" and mode != "compiled":
        ovf.DebugUnderflowOverflow(model, ops="ops" in mode)
    run = torch.compile(model) if mode.startswith("compiled") else model
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)

    def step():
        optimizer.zero_grad()
        out = run(inputs)
        F.cross_entropy(out.reshape(-1, out.size(-1)), targets.reshape(-1)).backward()
        optimizer.step()

    started = time.perf_counter()
    step()  # compiles
    first = time.perf_counter() - started
    step()
    steps, rounds = (2, 2) if quick else (10, 5)
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(steps):
            step()
        times.append((time.perf_counter() - started) / steps)
    return _common.median(times), first


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a small model, few steps (a smoke test)")
    p.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)  # one mode, in a child
    args = p.parse_args(argv)
    if version() < (2, 5):
        print(f"torch.compile with ovf needs torch >= 2.5 (here {torch.__version__}): not run")
        return 0
    if args.mode:
        print(json.dumps(measure(args.mode, args.quick)))
        return 0
    ovf = _common.import_ovf()
    _common.print_machine("training step under torch.compile (bench/compile_overhead.py)", ovf)
    # Each mode in a process of its own: Dynamo's caches (per code object, shared by
    # every instance of a model class) would otherwise mix the modes' compiled code.
    t, first = {}, {}
    for mode in MODES:
        child = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--mode", mode]
            + (["--quick"] if args.quick else []),
            capture_output=True,
            text=True,
            timeout=1800,
            env={**os.environ, "OVF_COMPILED_OPS": "every" if mode.endswith("every") else "kept"},
        )
        if child.returncode != 0:
            print(child.stdout + child.stderr)
            return 1
        t[mode], first[mode] = json.loads(child.stdout.strip().splitlines()[-1])
    model, inputs, _ = build(args.quick)
    plain_breaks = graph_breaks(model, inputs)
    watcher = ovf.DebugUnderflowOverflow(model)
    watched_breaks = graph_breaks(model, inputs)
    watcher.remove()
    print()
    print(f"{'mode':<20}{'ms/step':>10}{'first step s':>14}  vs")
    for mode in MODES:
        base = "compiled" if mode.startswith("compiled") else "eager"
        ratio = "" if mode == base else f"{t[mode] / t[base]:.3f}x {base}"
        if mode.startswith("compiled+ops"):
            ratio += f", {t[mode] / t['eager+ovf+ops']:.3f}x eager+ovf+ops"
        print(f"{mode:<20}{t[mode] * 1e3:>10.2f}{first[mode]:>14.1f}  {ratio}")
    print(f"graph breaks: compiled {plain_breaks}, compiled+ovf {watched_breaks}")
    ratio = t["compiled+ovf"] / t["compiled"]
    missed = ratio > TARGET or watched_breaks != plain_breaks
    print(
        f"compiled+ovf / compiled = {ratio:.3f} (target <= {TARGET}), "
        f"graph breaks added by ovf: {watched_breaks - plain_breaks}"
        + ("  MISSED" if missed else "  ok")
    )
    from _verdict import exit_status

    return exit_status(missed, args.quick)


if __name__ == "__main__":
    sys.exit(main())
