"""The batch root's latest forward, held by reference from its start: what running
the step again needs and what is at hand only while it runs -- its inputs (no copy),
the grad mode and training mode, and the random generators' states there (dropout).
The parameters and buffers the optimizer has not written yet are the module's own.

Two users: the replay at a module event (_replay.py), in the step itself, and
--dump-batch (_dump_batch.py), which saves the step at the first safe point after it.
The replay's own forward is not held (it runs inside the step it replays).
"""

import functools
import weakref

import torch

from . import _dump_batch, _ovf, _replay_check

_latest = None  # Held of the batch root's latest forward
_forwards_since_step = 0  # the batch root's forwards since an optimizer's step ended
_hooks = weakref.WeakKeyDictionary()  # batch root -> its two hooks' handles


class Held:
    """What the batch root's forward started with, by reference. `called`: the module
    whose call it is, the batch root or torch.compile's wrapper of it (`compiled`):
    module() is the model itself either way, which a replay runs eagerly."""

    def __init__(self, called, args, kwargs):
        module = compiled_model(called) or called
        self.module = weakref.ref(module)
        self.called = weakref.ref(called)
        self.compiled = module is not called
        self.batch = _ovf.batch()
        self.args, self.kwargs = args, kwargs
        self.training = module.training
        self.grad_enabled = torch.is_grad_enabled()
        self.versions = [(path, t, version(t)) for path, t in self.inputs()]
        self.rng_cpu = torch.get_rng_state()
        self.rng_cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
        self.running = True  # until the forward returns (or raises)
        self.start_seq = _replay_check.write_seq()  # its records begin here
        self.output_grads = {}  # output path -> the gradient the backward brought it
        self.forwards = _forwards_since_step  # the step's forwards up to this one

    def hold_output_gradients(self, output):
        """The gradients the backward brings the forward's outputs (tensor hooks, no
        copy): with the parameters the step began with (the optimizer's capture), the
        backward runs again without the user's loss code. Held until the next forward."""
        for path, t in tensors(output, "output"):
            if t.requires_grad and t.grad_fn is not None:
                t.register_hook(functools.partial(self._keep, path))

    def _keep(self, path, gradient):
        self.output_grads[path] = gradient

    def holds(self, seq, batch):
        """Whether the forward is running the record `seq` of batch `batch` makes. (A
        compiled model's batch begins inside its graph, after its wrapper's pre-hook:
        the records after its start are its own.)"""
        return self.running and (self.batch == batch or (self.compiled and self.start_seq <= seq))

    def inputs(self):
        """[(path, tensor)] of the forward's tensor inputs, named as its frame names
        them: input[0], input["mask"], input[1][2]."""
        out = tensors(self.args)
        for key, value in self.kwargs.items():
            out += tensors(value, f'input["{key}"]')
        return out

    def changed_in_place(self):
        """The inputs the step has written since its forward began."""
        return [p for p, t, v in self.versions if v is not None and t._version != v]


def version(t):
    """The tensor's version counter; None for an inference tensor, which keeps none."""
    return None if t.is_inference() else t._version


def tensors(value, path="input"):
    """[(path, tensor)] of the tensors in nested tuples, lists and dicts."""
    if isinstance(value, torch.Tensor):
        return [(path, value)]
    if isinstance(value, (tuple, list)):
        return [x for i, v in enumerate(value) for x in tensors(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in tensors(v, f"{path}[{k!r}]")]
    return []


def latest():
    return _latest


def compiled_model(module):
    """The model torch.compile's wrapper (OptimizedModule) runs, or None."""
    if type(module).__name__ != "OptimizedModule":
        return None
    inner = getattr(module, "_orig_mod", None)
    return inner if isinstance(inner, torch.nn.Module) else None


def attach(module):
    """`module` is the batch root, or torch.compile's wrapper of it: its forwards are
    held (a compiled model's own hooks run inside its graph, where they hold nothing;
    the wrapper's run eagerly, around it)."""
    if module in _hooks:
        return
    _hooks[module] = (
        module.register_forward_pre_hook(_start, with_kwargs=True),
        module.register_forward_hook(_end, with_kwargs=True, always_call=True),
    )


def detach_unless_wanted():
    """Removes the hooks once neither the replay nor a dump wants the forwards held
    (their session ended, or they were turned off)."""
    global _latest
    if _dump_batch.wants_inputs() or _replay_armed():
        return
    for handles in list(_hooks.values()):
        for handle in handles:
            handle.remove()
    _hooks.clear()
    _latest = None


def _start(module, args, kwargs):
    global _latest, _forwards_since_step
    # Traced by torch.compile (a compiled model's hooks are): nothing, so no graph break;
    # a compiled step is held by its wrapper's hooks instead (attach).
    if torch.compiler.is_compiling() or _ovf.replaying():
        return
    # A NaN of the previous step's backward, with no optimizer step since (gradient
    # accumulation, a loop that skips the step): saved before its inputs are let go.
    _dump_batch.dump_if_due()
    _latest = None
    _forwards_since_step += 1
    if not (_dump_batch.wants_inputs() or _replay_armed()):
        return  # nothing to hold for
    try:
        _latest = Held(module, args, kwargs)
    except Exception as e:  # noqa: BLE001 -- holding fails ovf's features, never the run
        _dump_batch.give_up(f"cannot hold the inputs: {type(e).__name__}: {e}")


def _end(module, args, kwargs, output):
    if torch.compiler.is_compiling() or _ovf.replaying():
        return
    if _latest is not None and _latest.called() is module:
        _latest.running = False
        if _latest.compiled:
            _latest.batch = _ovf.batch()  # the one its graph began
        if _capture_on():
            _latest.hold_output_gradients(output)
    _dump_batch.dump_if_due()


def step_ended():
    """An optimizer's step ended: the forwards that follow are the next step's."""
    global _forwards_since_step
    _forwards_since_step = 0


def _capture_on():
    from . import _replay_optimizer

    return _replay_armed() and _replay_optimizer.capture_on()


def _replay_armed():
    from . import _replay

    return _replay.armed()
