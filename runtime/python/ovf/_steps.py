"""What ends the user's training step, in auto mode (the clock itself is the
runtime's: runtime/core/step_clock.h).

Until backward() is first called, a trained model called a second time begins
the next step (inference, forward-only loops). At the first backward() the
program's optimizers are looked for: with none, each backward() ends a step (a
hand-written update through .data); with some, the step ends when every one of
them has stepped once (a GAN's two), or, after a backward() whose gradients no
optimizer applied, when the line that began the step calls its model again with
gradients on (a loss scaler of the program's own that skips the update on inf;
gradient accumulation, whose loop counts each forward/backward). GradScaler.step()
that skips the optimizer's step still counts as its step: the skipped step was
the user's."""

import gc
import weakref

import torch

from . import _ovf

_active = False
_rule = "repeated_forward"
_round = weakref.WeakSet()  # the optimizers of one round
_stepped = weakref.WeakSet()  # those that stepped in the current round
_stepped_batch = 0  # the batch they stepped in (a step begun without them ends the round)
_in_scaler_step = weakref.WeakSet()  # optimizers inside GradScaler.step() (_scaler.py)


def start():
    """A session counts training steps from here (auto mode)."""
    global _active, _rule
    _active = True
    _rule = "repeated_forward"
    _round.clear()
    _stepped.clear()
    _ovf.set_step_end(_ovf.STEP_ENDS[_rule])


def stop():
    global _active
    _active = False


def _set_rule(rule):
    global _rule
    _rule = rule
    _ovf.set_step_end(_ovf.STEP_ENDS[rule])


def _program_optimizers():
    """The optimizers alive now that update a trainable parameter; a wrapper that
    steps another (accelerate's AcceleratedOptimizer) is not one of them."""
    found = []
    optimizer = torch.optim.Optimizer
    for o in gc.get_objects():
        # type(), not isinstance(): that reads __class__, which some objects compute
        # (torch.distributed's deprecated reduce_op warns when it does)
        if not issubclass(type(o), optimizer):
            continue
        if isinstance(getattr(o, "optimizer", None), torch.optim.Optimizer):
            continue
        try:
            trains = any(p.requires_grad for g in o.param_groups for p in g["params"])
        except (AttributeError, KeyError, TypeError):
            continue
        if trains:
            found.append(o)
    return found


def after_backward():
    if not _active:
        return
    if _rule == "repeated_forward":
        optimizers = _program_optimizers()
        if optimizers:
            _round.update(optimizers)
            _set_rule("optimizer_round")
        else:
            _set_rule("backward")
    if _rule == "backward":
        _ovf.end_step()
    else:
        _ovf.set_gradients_pending(True)


def after_optimizer_step(optimizer):
    """optimizer.step() returned (the global step hook)."""
    if _active and optimizer not in _in_scaler_step:  # GradScaler.step counts it once
        _count_step(optimizer)


def after_scaler_step(optimizer):
    """GradScaler.step(optimizer) returned: it skips optimizer.step() when a
    gradient is not finite, and the step hook never hears of it."""
    if _active:
        _count_step(optimizer)


def _count_step(optimizer):
    global _round, _stepped_batch
    if _rule != "optimizer_round":  # an optimizer made after the first backward()
        _round.update(_program_optimizers())
        _set_rule("optimizer_round")
    _ovf.set_gradients_pending(False)
    if _stepped_batch != _ovf.batch():
        # A step began since the round's last optimizer stepped (one whose update was
        # skipped): the round starts again with this step.
        _stepped.clear()
        _stepped_batch = _ovf.batch()
    if optimizer in _stepped:
        # The round was shorter than thought (an optimizer that never steps): the
        # step this optimizer's step belongs to has begun; the round is what did step.
        _round = weakref.WeakSet(_stepped)
        _stepped.clear()
        _ovf.end_step(now=True)
    _round.add(optimizer)
    _stepped.add(optimizer)
    if all(o in _stepped for o in _round):
        _stepped.clear()
        _ovf.end_step()
