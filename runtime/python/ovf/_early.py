"""The update-to-weight ratio of optimizer steps, for the early warning (--early).

An optimizer step that moves the weights by as much as they measure is a run
about to diverge (a learning rate orders of magnitude too high, a loss spike's
gradient); healthy steps move them by a thousandth to a tenth. While the control
block's update_ratio_max is set, each optimizer.step() is measured over the
parameters that have a gradient: |w_after - w_before| / |w_before| over all of
them together (zero-initialised biases, whose own ratio starts out huge, weigh
what they measure). Above the threshold the runtime warns once, naming the
parameter that changed most.

Measured on a sample: up to SAMPLE evenly spaced elements of each parameter
(all of a smaller one), copied before the step into buffers kept from step to
step; each parameter's squared norms count for its whole size. A copy of every
parameter would cost a quarter of a resnet18 step on one CPU thread; the sample
costs a few kernel launches and one host read per step. A step with the control
field at 0 costs one read of it."""

import importlib
import math
import sys
import weakref

import torch

from . import _hooks, _ovf

SAMPLE = 4096  # elements of each parameter the ratio is measured on

_installed = False
_failed = False  # a hook failed: measuring is off for the process
# optimizer -> _Sample of its parameters before the step being taken
_samples = weakref.WeakKeyDictionary()


def _sampled(p):
    """Up to SAMPLE evenly spaced elements of parameter `p`, as a view of it."""
    flat = p.detach().reshape(-1)
    return flat[:: -(-flat.numel() // SAMPLE)] if flat.numel() > SAMPLE else flat


class _Sample:
    """The parameters a step updates (those with a gradient), their number in
    param_groups order, and buffers that hold their samples before the step."""

    def __init__(self, indices, params):
        self.indices = indices
        self.params = params
        self.key = _key(params)
        with torch.no_grad():
            self.before = [_sampled(p).clone() for p in params]
        # what a sampled squared norm stands for: the whole parameter
        self.weights = [p.numel() / b.numel() for p, b in zip(params, self.before, strict=True)]
        self.taken = False  # the buffers hold this step's "before"
        self.sizes = None  # sampled |w| before the step, on the parameters' devices


def install():
    """Global optimizer step hooks (idempotent). Installed before ovf's other step
    hooks, so that a warning belongs to the step's own batch."""
    global _installed
    if _installed:
        return
    _installed = True
    # torch/optim/__init__.py deletes its `optimizer` name: ask importlib for the module
    optim = importlib.import_module("torch.optim.optimizer")
    optim.register_optimizer_step_pre_hook(_guarded(_copy_before))
    optim.register_optimizer_step_post_hook(_guarded(_measure_after))


def _guarded(hook):
    """`hook`, whose own failure turns the measurement off with one line instead of
    breaking the user's optimizer.step(); EarlyWarningError (a warning) goes through."""

    def run(optimizer, *args):
        global _failed
        if _failed:
            return
        try:
            hook(optimizer, *args)
        except (_hooks.EarlyWarningError, KeyboardInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 - any failure of ovf's own, said once
            _failed = True
            _samples.clear()
            print(
                f"ovf: internal error measuring the optimizer step ({type(e).__name__}: {e}); "
                "the update-to-weight ratio is no longer measured",
                file=sys.stderr,
            )

    return run


def _copy_before(optimizer, *_):
    if not _ovf.control()["update_ratio_max"] > 0:
        _samples.pop(optimizer, None)  # disarmed: the buffers go back
        return
    indices, params = [], []
    index = 0
    for group in optimizer.param_groups:
        for p in group["params"]:
            if isinstance(p, torch.Tensor) and p.grad is not None and p.numel():
                indices.append(index)
                params.append(p)
            index += 1
    if not params:
        return
    sample = _samples.get(optimizer)
    with torch.no_grad():
        if sample is None or sample.key != _key(params):
            sample = _samples[optimizer] = _Sample(indices, params)
        else:
            torch._foreach_copy_(sample.before, [_sampled(p) for p in params])
        sample.sizes = _norms(sample.before)
    sample.taken = True


def _measure_after(optimizer, *_):
    sample = _samples.get(optimizer)
    if sample is None or not sample.taken:
        return
    sample.taken = False
    with torch.no_grad():
        torch._foreach_sub_(sample.before, [_sampled(p) for p in sample.params])  # now -dw
        change = _norms(sample.before)
    # one read of both: the sizes taken before the step and the change
    values = _host(sample.sizes + change)
    size, change = values[: len(change)], values[len(change) :]
    total = math.sqrt(sum(w * s * s for w, s in zip(sample.weights, size, strict=True)))
    moved = math.sqrt(sum(w * c * c for w, c in zip(sample.weights, change, strict=True)))
    ratio = moved / total if total > 0 else math.nan
    if not ratio > _ovf.control()["update_ratio_max"]:  # below, or NaN (the step's own check)
        return
    most = max(range(len(change)), key=lambda i: sample.weights[i] * change[i] ** 2)
    own = change[most] / size[most] if size[most] > 0 else math.inf
    _ovf.update_ratio(
        type(optimizer).__name__, sample.params[most], sample.indices[most], ratio, own
    )


def _key(params):
    """What a kept sample is valid for: the same parameters, of the same shapes."""
    return [(id(p), p.shape) for p in params]


# Norms in float32 where a parameter's own precision would overflow its sum of squares
# (float16 at 256 per element); float32, float64 and complex in their own.
_LOW_PRECISION = {torch.float16, torch.bfloat16}


def _norms(tensors):
    """The 2-norms of `tensors`, 0-dim tensors on their devices, in their order."""
    low = [i for i, t in enumerate(tensors) if t.dtype in _LOW_PRECISION]
    rest = [i for i, t in enumerate(tensors) if t.dtype not in _LOW_PRECISION]
    out = [None] * len(tensors)
    for members, dtype in ((low, torch.float32), (rest, None)):
        if members:
            found = torch._foreach_norm([tensors[i] for i in members], 2, dtype=dtype)
            for i, n in zip(members, found, strict=True):
                out[i] = n
    return out


def _host(norms):
    """0-dim tensors' values on the host: one read per device."""
    out = [0.0] * len(norms)
    by_device = {}
    for i, n in enumerate(norms):
        by_device.setdefault(n.device, []).append(i)
    for members in by_device.values():
        values = torch.stack([norms[i].double() for i in members]).tolist()
        for i, v in zip(members, values, strict=True):
            out[i] = v
    return out
