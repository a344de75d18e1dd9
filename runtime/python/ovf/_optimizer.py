"""Checks every optimizer's parameters after its step().

A too-large step writes NaN/Inf into the weights; without this, the next
forward is where it shows (as in the reference). torch's global post-step hook
(register_optimizer_step_post_hook) calls the check after every optimizer's step.
"""

import importlib

from . import _ovf, _steps

_installed = False


def _check(optimizer, *_):
    _ovf.after_optimizer_step(optimizer)
    _steps.after_optimizer_step(optimizer)


def install():
    """Idempotent."""
    global _installed
    if _installed:
        return
    _installed = True
    # torch/optim/__init__.py deletes its `optimizer` name: ask importlib for the module
    module = importlib.import_module("torch.optim.optimizer")
    module.register_optimizer_step_post_hook(_check)
