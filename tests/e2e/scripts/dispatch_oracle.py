"""An independent oracle for where a NaN/Inf is born: a TorchDispatchMode that
sees every ATen op (as dispatched below autograd) and names the first one
whose output, or an argument it writes in place, is non-finite while every
input was finite or deliberate before it ran. It shares no code with ovf; the
tests run it on the same script and compare verdicts.

Deliberate values are masks:
  - an op told to make -inf (a Python number argument: masked_fill(m, -inf))
    is not at fault, and what it makes holds deliberate infinities;
  - a tensor made from constants alone (ones, full, arange, fill_ with a
    number, and ops that read only such tensors: log(tril(ones)), as
    pytorch/examples' Transformer builds its mask) is deliberate whatever it holds;
  - an op that reads deliberate infinities and makes a NaN is at fault (a
    softmax over a row masked whole): masks never make NaN.

The batch is the script's own step: its local variable `batch` in the
innermost frame of the script that has one (its training loop's counter), not
a count of forwards.

Usage inside a script: `with FirstNonFinite(__file__) as oracle: ...`, then
`oracle.verdict()` -> "aten::log in <no module> at batch 1, real_models.py:57"
or None. The line is the innermost frame in the script, or in one of the files
`lines_in` lists (a library's model code: torchvision's resnet.py); the batch is the
`batch` of the script's frames, or of those of the scripts `steps_in` lists (a case
that runs another script's training loop).
"""

import math
import os
import sys
import traceback
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


def _finite(x):
    if isinstance(x, torch.Tensor):
        if x.is_floating_point() or x.is_complex():
            return bool(torch.isfinite(x).all())
        return True
    if isinstance(x, float):
        return math.isfinite(x)
    return True


# Ops that return memory nobody wrote yet: whatever bits it holds are no one's value.
UNINITIALISED = {
    "aten::empty",
    "aten::empty_like",
    "aten::empty_strided",
    "aten::new_empty",
    "aten::new_empty_strided",
    "aten::resize_",
    "aten::resize_as_",
}


# Ops whose values depend on numbers only (a tensor argument gives a shape or dtype).
FACTORIES = {
    "aten::ones",
    "aten::ones_like",
    "aten::new_ones",
    "aten::zeros",
    "aten::zeros_like",
    "aten::new_zeros",
    "aten::zero_",
    "aten::full",
    "aten::full_like",
    "aten::new_full",
    "aten::arange",
    "aten::eye",
    "aten::linspace",
    "aten::logspace",
    "aten::scalar_tensor",
}
RANDOM = (
    "rand",
    "normal",
    "bernoulli",
    "dropout",
    "multinomial",
    "poisson",
    "uniform",
    "exponential",
    "cauchy",
    "geometric",
)
CONSTANTS, DELIBERATE = "constants", "deliberate"


def _has_nan(x):
    return (
        isinstance(x, torch.Tensor)
        and (x.is_floating_point() or x.is_complex())
        and bool(torch.isnan(x).any())
    )


def _key(t):
    try:
        return (str(t.device), t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):
        return None


class FirstNonFinite(TorchDispatchMode):
    def __init__(self, script, lines_in=(), steps_in=()):
        super().__init__()
        self.script = os.path.abspath(script)
        self.step_files = {self.script, *(os.path.abspath(f) for f in steps_in)}
        self.line_files = self.step_files | {os.path.abspath(f) for f in lines_in}
        self.modules = []  # names of the modules whose forward runs
        self.found = None
        self._hooks = []
        self._origins = {}  # storage -> (CONSTANTS or DELIBERATE, weak refs to its tensors)

    def __enter__(self):
        # A module called outside every named one is a root: it and its submodules
        # are named from it, as a training loop's model is (a GAN has two).
        def pre(module, args):
            if module not in self.names and not self.modules:
                for name, sub in module.named_modules():
                    self.names.setdefault(sub, name)
            if module in self.names:
                self.modules.append(self.names[module] or f"<root {type(module).__name__}>")

        def post(module, args, output):
            if module in self.names and self.modules:
                self.modules.pop()

        self.names = {}
        self._hooks = [
            torch.nn.modules.module.register_module_forward_pre_hook(pre),
            torch.nn.modules.module.register_module_forward_hook(post),
        ]
        return super().__enter__()

    def __exit__(self, *exc):
        for hook in self._hooks:
            hook.remove()
        return super().__exit__(*exc)

    def _step(self):
        """The script's loop counter `batch` where the op runs, or None."""
        frame = sys._getframe()
        while frame is not None:
            if os.path.abspath(frame.f_code.co_filename) in self.step_files:
                step = frame.f_locals.get("batch")
                if isinstance(step, int):
                    return step
            frame = frame.f_back
        return None

    def _line(self):
        for frame in reversed(traceback.extract_stack()):
            if os.path.abspath(frame.filename) in self.line_files:
                return f"{os.path.basename(frame.filename)}:{frame.lineno}"
        return "?"

    def _origin(self, t):
        entry = self._origins.get(_key(t))
        if entry and any(ref() is not None for ref in entry[1]):
            return entry[0]
        return None

    def _note(self, t, kind):
        key = _key(t)
        if key is None:
            return
        if kind is None:
            self._origins.pop(key, None)
            return
        entry = self._origins.get(key)
        if entry and entry[0] == kind:
            entry[1][:] = [ref for ref in entry[1] if ref() is not None] + [weakref.ref(t)]
        else:
            self._origins[key] = (kind, [weakref.ref(t)])

    def _only_constants(self, func, tensors):
        name = func._schema.name
        if name in FACTORIES or (name == "aten::fill_" and func._overloadname == "Scalar"):
            return True
        if any(part in name for part in RANDOM) or not tensors:
            return False
        return all(not t.requires_grad and self._origin(t) == CONSTANTS for t in tensors)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.found is not None or func._schema.name in UNINITIALISED:
            return func(*args, **kwargs)
        inputs, _ = tree_flatten((args, kwargs))
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        before = [_finite(x) for x in inputs]
        # Non-finite inputs nobody meant make the op a carrier, not a producer.
        carried = any(
            not ok and isinstance(x, torch.Tensor) and not self._origin(x)
            for x, ok in zip(inputs, before, strict=True)
        )
        deliberate = not all(before)
        deliberate_nan = any(
            (isinstance(x, float) and math.isnan(x)) or (not ok and _has_nan(x))
            for x, ok in zip(inputs, before, strict=True)
        )
        only_constants = self._only_constants(func, tensors)
        out = func(*args, **kwargs)
        outputs = [x for x in tree_flatten(out)[0] if isinstance(x, torch.Tensor)]
        # An input that is non-finite now was written by the op (not every schema marks
        # such an argument: native_batch_norm's running_var).
        written = [x for x, ok in zip(inputs, before, strict=True) if ok and not _finite(x)]
        mutated = func._schema.is_mutable
        made = [*outputs, *written]
        if not carried and not all(_finite(x) for x in made):
            new_nan = any(_has_nan(x) for x in made) and not deliberate_nan
            if (deliberate or only_constants) and not new_nan:
                for x in made:
                    self._note(x, CONSTANTS if only_constants else DELIBERATE)
                return out
            module = self.modules[-1] if self.modules else "(no module)"
            self.found = f"{func._schema.name} in {module} at batch {self._step()}, {self._line()}"
            return out
        for x in outputs:
            if only_constants:
                self._note(x, CONSTANTS)
            elif mutated and any(x is t for t in tensors):
                self._note(x, None)  # data written into a former mask
        return out

    def verdict(self):
        return self.found


def case_main(script, cases, oracle_files=dict):
    """A case script's command line: `CASE` runs cases[CASE]; `CASE --oracle` runs it
    under FirstNonFinite(script, **oracle_files()) and prints its verdict as the last line,
    "oracle: <op> in <module> at batch N, file:line" or "oracle: none"."""
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("case", choices=sorted(cases))
    p.add_argument("--oracle", action="store_true")
    args = p.parse_args()
    if not args.oracle:
        cases[args.case]()
        return
    with FirstNonFinite(script, **oracle_files()) as oracle:
        cases[args.case]()
    print(f"oracle: {oracle.verdict() or 'none'}")
