"""ovf inside torch.compile (torch >= 2.5): its hooks enter the graph instead of breaking it.

Dynamo cannot trace ovf's hooks (pybind11 functions): each hooked module call used to
end the graph there. Here each hook has a Python stand-in that Dynamo traces in its
place (torch._dynamo.substitute_in_graph): it calls one of two custom operators,
ovf::module_enter and ovf::module_frame, which Inductor keeps in the compiled code
(they are registered as ordered side effects, so neither is dropped nor reordered) and
which run ovf's own hooks on the real tensors when the graph runs. Eager code still
calls the pybind11 hooks directly: nothing changes there.

What ovf sees inside a compiled region: every hooked module's frame (weights, tensor
inputs, outputs), at the point the graph computes it. What it does not see: the ATen
ops Inductor fuses into its own kernels, unless --ops puts its checks into the graphs
(_compile_ops.py); keyword arguments of a compiled module (its positional tensor
inputs are recorded); an output's structure (a dict or tuple of tensors is recorded as
output[0], output[1], ...). It says so once, when the first compiled frame runs; the
frames' records carry OVF_FLAG_COMPILED, so that `ovf status`, `ovf frames` and the
event report say it too.

Registered as torch._dynamo is imported (ovf's import stays as light as before).
"""

import importlib.abc
import importlib.util
import sys
import typing
import weakref

import torch

from . import _ovf

_modules = []  # key -> weakref to the module
_warned = False


def key_of(module):
    """The module's key in the operators' calls, made when ovf hooks it."""
    key = getattr(module, "_ovf_key", None)
    if key is None or key >= len(_modules) or _modules[key]() is not module:
        key = len(_modules)
        _modules.append(weakref.ref(module))
        object.__setattr__(module, "_ovf_key", key)
    return key


def module_or_none(key):
    """The module of `key`, or None (no key, or the module is gone)."""
    return _modules[key]() if key is not None and 0 <= key < len(_modules) else None


def _module(key):
    module = module_or_none(key)
    if module is None:
        raise RuntimeError(f"ovf: the module of a compiled frame (key {key}) is gone")
    return module


def _say_once():
    global _warned
    if not _warned:
        _warned = True
        print(
            "ovf: torch.compile: module frames inside compiled graphs are recorded; the ATen "
            "ops Inductor fuses into its kernels are not seen without --ops (its checks enter the"
            " graphs)",
            file=sys.stderr,
            flush=True,
        )


def _tensors(value):
    return [t for t in torch.utils._pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def _register():
    import torch._dynamo as dynamo
    from torch._higher_order_ops.effects import _EffectType, _register_effectful_op

    # `grad_enabled`: the grad mode the program called the module in, as traced (the
    # compiled forward itself runs with gradients off): a training step's forward
    # begins the user's step (step_clock.h), an inference forward does not.
    @torch.library.custom_op("ovf::module_enter", mutates_args=())
    def module_enter(key: int, grad_enabled: bool) -> None:
        with torch.set_grad_enabled(grad_enabled):
            _ovf.forward_pre_hook(_module(key), ())

    @torch.library.custom_op("ovf::module_frame", mutates_args=())
    def module_frame(
        key: int, inputs: typing.List[torch.Tensor], outputs: typing.List[torch.Tensor]
    ) -> None:
        _say_once()
        output = outputs[0] if len(outputs) == 1 else tuple(outputs)
        _ovf.compiled_forward_hook(_module(key), tuple(inputs), output)

    @module_enter.register_fake
    def _(key, grad_enabled):
        return None

    @module_frame.register_fake
    def _(key, inputs, outputs):
        return None

    for op in (torch.ops.ovf.module_enter.default, torch.ops.ovf.module_frame.default):
        _register_effectful_op(op, _EffectType.ORDERED)
    from . import _compile_ops

    _compile_ops.register()  # --ops inside the graphs
    # An inference graph (torch.no_grad) sinks the effect tokens instead of returning
    # them, and dead-code elimination then drops every with_effects call, ovf's ops
    # with them (torch 2.6): the calls are side effects of their own.
    torch.fx.node.has_side_effect(torch.ops.higher_order.with_effects)

    # (A module ovf never named has no key: its frame is not recorded.)
    @dynamo.substitute_in_graph(_ovf.forward_pre_hook, skip_signature_check=True)
    def forward_pre_hook(module, args):
        key = getattr(module, "_ovf_key", None)
        if key is not None:
            torch.ops.ovf.module_enter(key, torch.is_grad_enabled())

    @dynamo.substitute_in_graph(_ovf.forward_hook, skip_signature_check=True)
    def forward_hook(module, args, kwargs, output):
        forward_hook_positional(module, args, output)

    @dynamo.substitute_in_graph(_ovf.forward_hook_positional, skip_signature_check=True)
    def forward_hook_positional(module, args, output):
        key = getattr(module, "_ovf_key", None)
        if key is not None:
            torch.ops.ovf.module_frame(key, _tensors(args), _tensors(output))


class _AfterDynamoImport(importlib.abc.MetaPathFinder):
    """Registers the stand-ins right after torch._dynamo is imported."""

    def find_spec(self, name, path, target=None):
        if name != "torch._dynamo":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            _register()

        spec.loader.exec_module = exec_then_register
        return spec


_installed = False


def install():
    """Once per process: now if torch._dynamo is loaded, else when it is."""
    global _installed
    if _installed:
        return
    _installed = True
    if "torch._dynamo" in sys.modules:
        _register()
    else:
        sys.meta_path.insert(0, _AfterDynamoImport())
