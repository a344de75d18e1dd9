"""The replay of an optimizer's step at its event (--capture optimizer).

A step that writes NaN/Inf into the weights is seen after it returned (_optimizer.py):
the parameters it started from are gone, overwritten by it. With the capture asked for
(control.observe OVF_OBSERVE_CAPTURE_OPTIMIZER), each step first copies the parameters
it will update and its state (Adam's moments, its step counts); its gradients are held
by reference (a step reads them, writes nothing into them: their version counters say
so). At the event the replay puts the copies in, runs the step again with its ops
observed (the op that made the value, its line, why and verdict, as --ops gives them),
and puts back every parameter and the state object the run left, bit for bit.

It does not run where it would not make the same values: without the capture (it says
how to ask for it), or where the gradients changed since the step began. Where a gradient
was non-finite already the backward made the value: with the capture the step's backward
is replayed instead (_replay_backward.py).
"""

import collections
import contextlib
import time
import weakref

import torch

from . import _options, _ovf, _replay
from ._replay_collectives import CollectivesRefused, TalksToRanks

_captured = weakref.WeakKeyDictionary()  # optimizer -> _Before of its latest step


def capture_on():
    return bool(_ovf.control()["observe"] & _options.OBSERVE_BITS["capture_optimizer"])


def capture_if_asked(optimizer):
    """The pre-step hook: copies what this step starts from, if the capture is on."""
    if capture_on():
        _captured[optimizer] = _Before(optimizer)
    else:
        _captured.pop(optimizer, None)


class _Before:
    """An optimizer step's start: copies of the parameters it updates (those with a
    gradient) and of its state; the gradients by reference, with their versions."""

    def __init__(self, optimizer):
        with torch.no_grad():
            self.params = [
                (p, p.detach().clone(), p.grad, p.grad._version)
                for group in optimizer.param_groups
                for p in group["params"]
                if p.grad is not None
            ]
            self.state = _state_copy(optimizer.state)

    @contextlib.contextmanager
    def parameters_in(self):
        """The parameters as the step began while it runs, then as the run left them
        (through .data: a parameter keeps its version counter)."""
        after = [(p, p.detach().clone()) for p, _, _, _ in self.params]
        try:
            with torch.no_grad():
                for p, was, _, _ in self.params:
                    p.data.copy_(was)
            yield
        finally:
            with torch.no_grad():
                for p, now in after:
                    p.data.copy_(now)

    def gradients_changed(self):
        return any(p.grad is not grad or grad._version != v for p, _, grad, v in self.params)


def _local(t):
    """A DTensor's own shard (FSDP2, tensor parallelism): a reduction over the whole
    would be a collective, which the other ranks, not replaying, would not join."""
    return t.to_local() if hasattr(t, "to_local") else t


def _state_copy(state):
    """optimizer.state as a new dict of new dicts, each tensor cloned."""
    out = collections.defaultdict(dict)  # as torch.optim.Optimizer keeps it
    for p, slots in state.items():
        out[p] = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in slots.items()}
    return out


def run(optimizer, names, event_seq):
    """The replay's line at an event of `optimizer`'s step (its STEP record `event_seq`);
    `names`: {parameter: its module path name}, for the gradient a refusal names."""
    kind = type(optimizer).__name__
    bad = next(
        (
            p
            for group in optimizer.param_groups
            for p in group["params"]
            if p.grad is not None and _replay.nonfinite(_local(p.grad))
        ),
        None,
    )
    before = _captured.get(optimizer)
    if bad is not None and before is not None:
        from . import _replay_backward

        return _replay_backward.run(optimizer, before, names.get(bad, "a parameter"), event_seq)
    if bad is not None:
        return (
            f"not replayed: {kind}.step() read a non-finite gradient of"
            f" {names.get(bad, 'a parameter')}, made before the step (by the backward pass, or"
            " received by it): --backward names the op that made it, and --capture optimizer"
            " replays the backward"
        )
    if before is None:
        return (
            f"not replayed: the value was written by {kind}.step(), whose parameters and state"
            " before it are gone (--capture optimizer keeps a copy of them before each step"
            " to replay it)"
        )
    if before.gradients_changed():
        return f"not replayed: the gradients {kind}.step() read changed since it began"
    started = time.perf_counter()
    error = _step_again(optimizer, before)
    took = f"{time.perf_counter() - started:.2f} s"
    if _ovf.replay_found():
        return f"replayed {kind}.step() from the parameters and state it began with ({took})"
    if error is not None:
        return f"the replay of {kind}.step() {error} before any op made a non-finite value ({took})"
    return (
        f"the replay of {kind}.step() made no non-finite value ({took}): it diverged from the"
        f" run ({_replay.CAUSES})"
    )


def _step_again(optimizer, before):
    """Runs the step from `before` with its ops observed; returns what it raised
    ("raised Type: text") or None. The parameters, the state and the generators come
    back as the run left them."""
    state, rng = optimizer.state, torch.get_rng_state()
    # The class's step without torch's hooks (profile_hook_step wraps it): the user's
    # and ovf's own hooks do not run for a replay.
    step = getattr(type(optimizer).step, "__wrapped__", None)
    try:
        # a step that talks to the other ranks (ZeroRedundancyOptimizer's broadcast, an
        # average of the updates) ends where it would, before the collective is sent
        with before.parameters_in(), CollectivesRefused():
            optimizer.state = _state_copy(before.state)
            _ovf.begin_replay()
            if step is not None:
                step(optimizer)
            else:
                optimizer.step()  # _optimizer.py's hooks let a replay's step pass
    except TalksToRanks as e:
        return e.said()
    except Exception as e:  # noqa: BLE001 -- the step's own failure on the replay: said
        return _replay.raised(e)
    finally:
        optimizer.state = state
        torch.set_rng_state(rng)
    return None
