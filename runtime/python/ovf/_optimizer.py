"""Checks every optimizer's parameters after its step().

A too-large step writes NaN/Inf into the weights; without this, the next
forward is where it shows (as in the reference). torch's global post-step hook
(register_optimizer_step_post_hook) calls the check after every optimizer's step.
With --capture optimizer a global pre-step hook copies what each step starts from
(_replay_optimizer.py), so that the replay at the check's event can run it again.
"""

import importlib

from . import _held_step, _ovf, _replay_optimizer, _steps

_installed = False
_checking = None  # the optimizer whose step is being checked (its event replays it)


def checking():
    return _checking


def _capture(optimizer, *_):
    if not _ovf.replaying():
        _replay_optimizer.capture_if_asked(optimizer)


def _check(optimizer, *_):
    global _checking
    if _ovf.replaying():
        return  # the replay's own step (one without the hooks runs where torch has them)
    _checking = optimizer
    try:
        _ovf.after_optimizer_step(optimizer)
    finally:
        _checking = None
    _held_step.step_ended()
    _steps.after_optimizer_step(optimizer)


def install():
    """Idempotent."""
    global _installed
    if _installed:
        return
    _installed = True
    # torch/optim/__init__.py deletes its `optimizer` name: ask importlib for the module
    module = importlib.import_module("torch.optim.optimizer")
    module.register_optimizer_step_pre_hook(_capture)
    module.register_optimizer_step_post_hook(_check)
