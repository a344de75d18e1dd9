"""Where a NonFiniteError decided on another thread reaches the program.

A backward op runs on autograd's threads, where nothing can be raised into the
program; without these, the raise came from the next hook -- the next step's
forward, after optimizer.step() had written the NaN into the weights. Now it
comes out of the backward() call that made it (torch.autograd.backward, which
Tensor.backward calls), and, should that be missed (torch.autograd.grad, a
backward run by a library), before any optimizer writes.
"""

import functools
import importlib

import torch

from . import _ovf, _steps

_installed = False


def _deliver(*_):
    _ovf.deliver_pending_raise()


def install():
    """Idempotent."""
    global _installed
    if _installed:
        return
    _installed = True
    original = torch.autograd.backward

    @functools.wraps(original)
    def backward(*args, **kwargs):
        result = original(*args, **kwargs)
        _steps.after_backward()
        _ovf.deliver_pending_raise()
        return result

    torch.autograd.backward = backward
    # torch/optim/__init__.py deletes its `optimizer` name: ask importlib for the module
    optimizer = importlib.import_module("torch.optim.optimizer")
    optimizer.register_optimizer_step_pre_hook(_deliver)
