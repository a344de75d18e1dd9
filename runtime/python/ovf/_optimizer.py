"""Checks every optimizer's parameters after its step().

A too-large step writes NaN/Inf into the weights; without this, the next
forward is where it shows (as in the reference). torch >= 2.0 has a global
post-step hook; torch 1.13 has none, so each optimizer class's step is wrapped
once, the way torch itself wraps it for the profiler.
"""

import functools
import importlib

import torch

from . import _ovf

_installed = False


def _check(optimizer, *_):
    _ovf.after_optimizer_step(optimizer)


def _wrap_step(cls):
    step = cls.step
    if getattr(step, "_ovf_checked", False):
        return

    @functools.wraps(step)
    def checked_step(self, *args, **kwargs):
        result = step(self, *args, **kwargs)
        _check(self)
        return result

    checked_step._ovf_checked = True
    cls.step = checked_step


def _all_subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


def install():
    """Idempotent. On torch < 2.0 the step of every Optimizer class defined now
    is wrapped (optimizers made before count too), and classes defined later
    are wrapped when their first instance is made."""
    global _installed
    if _installed:
        return
    _installed = True
    # torch/optim/__init__.py deletes its `optimizer` name: ask importlib for the module
    module = importlib.import_module("torch.optim.optimizer")
    register = getattr(module, "register_optimizer_step_post_hook", None)
    if register is not None:
        register(_check)
        return
    for cls in list(_all_subclasses(torch.optim.Optimizer)):
        _wrap_step(cls)
    original_init = torch.optim.Optimizer.__init__

    @functools.wraps(original_init)
    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        _wrap_step(type(self))

    torch.optim.Optimizer.__init__ = init
