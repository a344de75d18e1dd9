"""Is it the compiler? The replay's answer at an event inside a torch.compile'd graph
(issue 27, part 2).

A value made inside a compiled graph came out of kernels the backend generated (fused,
reordered, with its own decompositions), not out of the eager ops the model's source
names. At such an event the replay (_replay.py) runs the held forward of the model
eagerly -- torch.compiler.set_stance("force_eager"), so that compiled submodules and a
model compiled in place run their Python too -- from the inputs, generators and buffers
the step began with, with every ATen op observed, and says which of two it is:

- eager makes the same value: the model's own math; the op that makes it is named as
  an eager --ops run names it, with its line, why and float64 verdict;
- eager is finite here: the compiled code differs; named is the first module whose
  output held NaN/Inf in the run and none in the eager replay (the event's own module,
  unless the replay left the run earlier), with both outputs' figures; the op inside
  it is the compiled graph's, which --ops checks (_compile_ops.py: a decomposition's
  aten::exp where eager runs aten::softplus).

What it cannot tell apart: random ops (a compiled graph draws its dropout masks from its
own generator, so an eager replay draws others).
"""

import torch

_BACKENDS = {"inductor": "Inductor", "aot_eager": "aot_eager", "cudagraphs": "cudagraphs"}


def can_run_eagerly():
    """Whether this torch can set torch.compile aside (torch.compiler.set_stance, 2.6+)."""
    return hasattr(torch.compiler, "set_stance")


def call(function, eager):
    """function(), where `eager` with torch.compile'd code run eagerly: Dynamo's frame
    hook off for it (the replay may run inside a compiled graph, whose hook would meet the
    model's frames and mark their code to be skipped from then on: the run's later
    compiled steps ran eagerly) and the force_eager stance, so that compiled submodules
    and a model compiled in place run their Python too."""
    if not eager:
        return function()
    with torch.compiler.set_stance("force_eager"):
        return torch._dynamo.disable(function)()


def backend_name(called):
    """The backend that compiled `called` (torch.compile's wrapper) or its first compiled
    submodule, in words."""
    wrapper = next((m for m in called.modules() if type(m).__name__ == "OptimizedModule"), None)
    found = getattr(getattr(wrapper, "dynamo_ctx", None), "callback", None)
    for _ in range(4):  # the backend sits under a wrapper or two (torch 2.6, 2.14)
        if found is None:
            break
        name = getattr(found, "__name__", None)
        if isinstance(name, str):
            return _BACKENDS.get(name, name)
        # torch 2.14 names the link _torchdynamo_orig_backend, 2.6 _torchdynamo_orig_callable
        found = getattr(found, "_torchdynamo_orig_backend", None) or getattr(
            found, "_torchdynamo_orig_callable", None
        )
    return "the torch.compile backend"


def said(name, took, backend, named, only_compiled):
    """The replay's line: `named` an op made the value eagerly, else `only_compiled`
    (module path, class, run stats, eager stats) of the first module whose output was
    non-finite compiled and finite eagerly, or None."""
    replayed = (
        f"replayed the forward of {name} eagerly (torch.compile set aside), its ops observed"
        f" ({took})"
    )
    if named:
        return f"{replayed}: eager makes the same value: the model's own math, not the compiler"
    line = f"{replayed}: eager is finite here: the compiled code differs ({backend})"
    if only_compiled is not None:
        path, kind, ran, again = only_compiled
        line += (
            f": {path or '<root>'} ({kind}) outputs {_nonfinite(ran)} compiled, none eagerly"
            f" (abs max {_e(again['abs_max'])})"
        )
    return line + "; --ops names the compiled graph's op that makes it"


def _nonfinite(stats):
    words = [f"{stats[k]} {k}" for k in ("nan", "+inf", "-inf") if stats[k]]
    return " and ".join(words) or "non-finite values"


def _e(value):
    from ovf_ring.report import format_8_2e

    return format_8_2e(value).strip()
