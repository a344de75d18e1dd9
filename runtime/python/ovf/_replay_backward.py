"""The replay of a step's backward at an optimizer's event (--capture optimizer).

Module mode observes no backward op: a NaN/Inf the backward makes shows at the
optimizer's step, which reads it from a gradient and writes it into the weights. With
the optimizer's capture on, the parameters the step began with are at hand
(_replay_optimizer.py), and _held_step.py holds the gradients the backward brought the
forward's outputs (tensor hooks, no copy). At the event the forward runs again on its
held inputs from those parameters, then the backward from those output gradients through
torch.autograd.grad (which writes no .grad and runs no DDP reducer), every op of both
observed: the first that makes a non-finite value is named as --ops --backward names it.
The parameters the step wrote, the generators and the buffers are put back.
"""

import time

import torch

from . import _held_step, _ovf, _replay, _replay_check, _replay_collectives


def run(optimizer, before, gradient_of, event_seq):
    """The replay's line at `optimizer`'s event (its STEP record `event_seq`) whose step
    read a non-finite gradient (of the parameter named `gradient_of`); `before`: the
    step's capture. The replayed forward's module outputs are compared with the run's
    (_replay_check.py): a replay that left the run says where."""
    said = (
        f"not replayed: {type(optimizer).__name__}.step() read a non-finite gradient of"
        f" {gradient_of}, made before the step"
    )
    held = _held_step.latest()
    module = held.module() if held is not None else None
    if module is None or not held.output_grads:
        return said + ": ovf held no gradient of the model's outputs to run its backward again"
    if held.forwards > 1:
        return (
            said + f": the step's gradients add up {held.forwards} forwards, and ovf holds the"
            " last one"
        )
    given = [path for path, g in held.output_grads.items() if _replay.nonfinite(g)]
    if given:
        return (
            said + f": the gradient the backward brought the model's {given[0]} was non-finite"
            " already (the loss code made it)"
        )
    changed = held.changed_in_place()
    if changed:
        return said + f": the step changed {', '.join(changed)} in place since its forward began"
    name = type(module).__name__
    started = time.perf_counter()
    calls = _replay.Calls()
    with before.parameters_in():
        error = _replay.forward_again(
            module, held, calls.pre, calls.post, backward=_backward(module, held)
        )
    took = f"{time.perf_counter() - started:.2f} s"
    where = ""
    if error is None:
        where = _replay_check.first_difference(
            module, held.start_seq, event_seq, calls.outputs, found=False, whole=True
        )
    left = where.startswith("at ")  # the first module whose statistics differ from the run's
    if _ovf.replay_found():
        said = (
            f"replayed the forward and the backward of {name} from the parameters"
            f" {type(optimizer).__name__}.step() began with, their ops observed ({took})"
        )
        if left:
            said += f"; but its forward diverged from the run {where}: {_replay.CAUSES}"
        return said
    if error is not None:
        return (
            f"the replay of the forward and the backward of {name} {error} before any op made"
            f" a non-finite value ({took})"
        )
    if _replay_collectives.distributed():
        return (
            f"the replayed backward of {name} made no non-finite value on this rank ({took}):"
            " the value came in from another rank's gradient (the all-reduce)"
        )
    return (
        f"the replay of the forward and the backward of {name} made no non-finite value"
        f" ({took}): it diverged from the run"
        + (f" {where}: {_replay.CAUSES}" if left else f" ({_replay.CAUSES})")
    )


def _backward(module, held):
    """output -> the backward from the held output gradients, into no .grad."""

    def backward(output):
        outputs = dict(_held_step.tensors(output, "output"))
        pairs = [(outputs[path], g) for path, g in held.output_grads.items() if path in outputs]
        parameters = [p for p in module.parameters() if p.requires_grad]
        torch.autograd.grad(
            [t for t, _ in pairs],
            parameters,
            grad_outputs=[g for _, g in pairs],
            allow_unused=True,
        )

    return backward
