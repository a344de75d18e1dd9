"""GradScaler as ovf sees it: a loss scaler makes infinities on purpose.

In scale() (the product may overflow), from the scaled loss's gradient to the
end of that backward pass, and in unscale_(), ovf expects non-finite values:
they are recorded as deliberate and stop nothing, and the first op (or module
gradient) that produced one there is kept as the cause of the skip it leads to.
update() hands the runtime every skipped step (the scale before and after, the
first parameter whose gradient held the NaN/Inf, that cause) and every change of
scale; the runtime stops when the scaler gives up (--scaler-skips,
--scale-floor). step() counts as the user's training step even when it skips
optimizer.step() (_steps.py).

Healthy steps cost no host synchronisation: a skip is seen as an
optimizer.step() that did not run, and the scale is read (.item()) only at a
skip, at a growth the scaler's own interval predicts, or after update(new)."""

import importlib
import weakref

import torch

from . import _ovf, _steps

_installed = False
_open_regions = 0  # scaled backward passes whose end has not come yet
_stepped = weakref.WeakSet()  # optimizers whose step() ran inside GradScaler.step()
_skipped = weakref.WeakKeyDictionary()  # scaler -> optimizers it skipped since update()
_unread_updates = weakref.WeakKeyDictionary()  # scaler -> updates since its scale was read


def install():
    """Patches torch.amp.GradScaler (torch.cuda.amp's is a subclass). Idempotent."""
    global _installed
    if _installed:
        return
    _installed = True
    try:
        scaler = importlib.import_module("torch.amp.grad_scaler").GradScaler
    except (ImportError, AttributeError):  # torch < 2.3: torch.cuda.amp's only
        return
    for name, wrapper in (("scale", _scale), ("unscale_", _unscale), ("step", _step)):
        setattr(scaler, name, wrapper(getattr(scaler, name)))
    scaler.update = _update(scaler.update)
    # torch/optim/__init__.py deletes its `optimizer` name: ask importlib for the module
    importlib.import_module("torch.optim.optimizer").register_optimizer_step_post_hook(_ran)


def _ran(optimizer, *_):
    """optimizer.step() ran (a global step hook): inside GradScaler.step(), not skipped."""
    if optimizer in _steps._in_scaler_step:
        _stepped.add(optimizer)


def _enter():
    global _open_regions
    _open_regions += 1
    _ovf.expect_nonfinite(True)


def _leave():
    global _open_regions
    if _open_regions:
        _open_regions -= 1
        _ovf.expect_nonfinite(False)


def _on_scaled_gradient(_grad):
    # The backward pass of a scaled loss begins here; its end closes the region.
    _enter()
    torch.autograd.Variable._execution_engine.queue_callback(_leave)


def _arm(value):
    if isinstance(value, torch.Tensor):
        if value.requires_grad:
            value.register_hook(_on_scaled_gradient)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _arm(v)


def _scale(original):
    def scale(self, outputs):
        while _open_regions:  # a backward pass that ended in an error left its region open
            _leave()
        _enter()  # the product itself may overflow: a scale near float32's max, bf16's case
        try:
            scaled = original(self, outputs)
        finally:
            _leave()
        _arm(scaled)
        return scaled

    return scale


def _unscale(original):
    def unscale_(self, optimizer):
        _enter()
        try:
            return original(self, optimizer)
        finally:
            _leave()

    return unscale_


def _step(original):
    def step(self, optimizer, *args, **kwargs):
        _steps._in_scaler_step.add(optimizer)
        _stepped.discard(optimizer)
        try:
            return original(self, optimizer, *args, **kwargs)
        finally:
            _steps._in_scaler_step.discard(optimizer)
            if self.is_enabled() and optimizer not in _stepped:
                _skipped.setdefault(self, []).append(optimizer)
            _steps.after_scaler_step(optimizer)

    return step


def _read_scale(scaler):
    scale = getattr(scaler, "_scale", None)
    return float(scale.item()) if isinstance(scale, torch.Tensor) else None


def _update(original):
    def update(self, new_scale=None):
        skipped = _skipped.pop(self, [])  # the optimizers whose gradients held the NaN/Inf
        if not self.is_enabled():
            return original(self, new_scale)
        unread = _unread_updates.get(self, 0) + 1
        growth_interval = getattr(self, "_growth_interval", 1)
        read = bool(skipped) or new_scale is not None or unread >= growth_interval
        before = _read_scale(self) if read else None
        result = original(self, new_scale)
        after = _read_scale(self) if read else None
        _unread_updates[self] = 0 if read else unread
        if before is None or after is None:
            before = after = 0.0  # not read: unchanged, no record
        _ovf.scaler_update(type(self).__name__, skipped, before, after, bool(skipped))
        return result

    return update
