"""A small model run under torch.compile (torch >= 2.5) that overflows on cue, for the tests
of what ovf says about compiled code.

    python3 compiled.py [--eager] [--steps N] [--inf-at BATCH] [--compiler-fault | --backward-nan]

The first call runs eagerly, the later ones run the compiled model. --reference wraps
the model in ovf.DebugUnderflowOverflow (explicit mode; without it, `python3 -m ovf` or a
debugger's `run` watches it in auto mode). From batch
BATCH on (default 2) the input is scaled by 1e20, finite, and the Square module (model
path "1") makes inf of it. --eager never compiles.

--compiler-fault: module "1" is a Softplus instead, and a test lowering makes
Inductor compute it as log1p(exp(x)), which overflows to inf where eager's
threshold returns x: the inf is the compiler's alone (eager is finite).

--backward-nan: module "1" is sqrt(x * x) after a Linear without bias, and each step
runs a backward; from batch BATCH on the input is zeros: the forward is finite (0),
its gradient 0 / 0 (sqrt's at 0 times the square's): NaN made in the backward.
"""

import argparse

import torch
from torch import nn


class Square(nn.Module):
    def forward(self, x):
        return x * x  # made: square


class Root(nn.Module):
    def forward(self, x):
        return torch.sqrt(x * x)  # made: root


def _softplus_overflowing(x, beta=1, threshold=20):
    return torch.log1p(torch.exp(x * beta)) / beta


def compile_softplus_wrongly():
    """The test lowering: Inductor's decomposition of softplus without its threshold."""
    from torch._inductor import decomposition

    decomposition.decompositions[torch.ops.aten.softplus.default] = _softplus_overflowing


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--inf-at", type=int, default=2, metavar="BATCH")
    p.add_argument("--eager", action="store_true", help="do not compile")
    p.add_argument("--reference", action="store_true", help="wrap in ovf.DebugUnderflowOverflow")
    p.add_argument("--on-nan", default="raise", help="its on_nan (abort: a core)")
    p.add_argument("--compiler-fault", action="store_true", help="an inf only Inductor makes")
    p.add_argument("--backward-nan", action="store_true", help="a NaN made in the backward")
    args = p.parse_args()
    torch.manual_seed(0)
    middle = Square()
    if args.compiler_fault:
        compile_softplus_wrongly()
        middle = nn.Softplus()
    if args.backward_nan:
        middle = Root()
    model = nn.Sequential(nn.Linear(8, 8, bias=not args.backward_nan), middle, nn.Linear(8, 1))
    if args.reference:
        import ovf

        ovf.DebugUnderflowOverflow(model, on_nan=args.on_nan)
    compiled = model if args.eager else torch.compile(model)
    x = torch.randn(4, 8)
    big = x * (1e3 if args.compiler_fault else 1e20)
    if args.backward_nan:
        big = torch.zeros_like(x)
    for step in range(args.steps):
        run = model if step == 0 else compiled
        out = run(big if step >= args.inf_at else x)
        if args.backward_nan:
            out.sum().backward()
        print(f"step {step} out {out.sum().item():.4f}", flush=True)
    if not args.eager:
        from torch._dynamo.utils import counters

        breaks = sum(counters["graph_break"].values())
        print(f"graph breaks {breaks}, graphs {counters['stats']['unique_graphs']}", flush=True)


if __name__ == "__main__":
    main()
