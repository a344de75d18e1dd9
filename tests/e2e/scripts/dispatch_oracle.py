"""An independent oracle for where a NaN/Inf is born: a TorchDispatchMode that
sees every ATen op (as dispatched below autograd) and names the first one
whose output, or an argument it writes in place, is non-finite while every
input was finite before it ran (Python numbers count as inputs: an op told to
make -inf is not at fault). It shares no code with ovf; the tests run it on
the same script and compare verdicts.

Usage inside a script: `with FirstNonFinite(__file__) as oracle: ...`, then
`oracle.verdict()` -> "aten::log in <no module> at batch 1, real_models.py:57"
or None.
"""

import math
import os
import traceback

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


class FirstNonFinite(TorchDispatchMode):
    def __init__(self, script):
        super().__init__()
        self.script = os.path.abspath(script)
        self.modules = []  # names of the modules whose forward runs
        self.batch = 0
        self.found = None
        self._hooks = []

    def __enter__(self):
        # The first module called is the batch root, as a training loop's model is.
        def pre(module, args):
            if self.root is None:
                self.root = module
                self.names = {m: n for n, m in reversed(list(module.named_modules()))}
            if module in self.names:
                self.modules.append(self.names[module] or f"<root {type(module).__name__}>")

        def post(module, args, output):
            if module in self.names and self.modules:
                self.modules.pop()
                if module is self.root:
                    self.batch += 1

        self.root, self.names = None, {}
        self._hooks = [
            torch.nn.modules.module.register_module_forward_pre_hook(pre),
            torch.nn.modules.module.register_module_forward_hook(post),
        ]
        return super().__enter__()

    def __exit__(self, *exc):
        for hook in self._hooks:
            hook.remove()
        return super().__exit__(*exc)

    def _line(self):
        for frame in reversed(traceback.extract_stack()):
            if os.path.abspath(frame.filename) == self.script:
                return f"{os.path.basename(frame.filename)}:{frame.lineno}"
        return "?"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.found is not None or func._schema.name in UNINITIALISED:
            return func(*args, **kwargs)
        inputs, _ = tree_flatten((args, kwargs))
        inputs_finite = all(_finite(x) for x in inputs)
        out = func(*args, **kwargs)
        if inputs_finite:
            # An input that is non-finite now was written by the op (torch 1.13's
            # schemas do not mark every such argument: native_batch_norm's running_var).
            outputs, _ = tree_flatten(out)
            if not all(_finite(x) for x in [*outputs, *inputs]):
                # Modules run forwards; the loss, backward and step belong to the batch
                # just counted.
                in_forward = bool(self.modules)
                batch = self.batch if in_forward else max(self.batch - 1, 0)
                module = self.modules[-1] if in_forward else "(no module)"
                self.found = f"{func._schema.name} in {module} at batch {batch}, {self._line()}"
        return out

    def verdict(self):
        return self.found
