"""The replay at a module event (issue 24's first part).

Module mode sees that a module's output came out non-finite, not which op inside it
made the value. At that event -- inside the step, before the stop, the report and the
raise -- the runtime calls run() here: the batch root's forward runs again on the
inputs it started with (_held_step.py holds them by reference), from the random
generators' states it started with, in the grad mode it ran in, with every ATen op
observed, until the first op that makes a non-finite value from finite inputs. That
op's record (its module, line, why and verdict, as --ops gives them) is kept apart in
the ring (OVF_FLAG_REPLAY) and the event's FRAME points at it, for the report, the
debuggers' stop and cores alike.

Nothing of the replay reaches the run: the generators' states and the buffers the
replay wrote (BatchNorm's running statistics) are put back; no backward runs, so no
.grad moves, and the optimizer is not involved (an optimizer's step replays at its own
event: _replay_optimizer.py). It runs once a session. It does not
run where it would not replay the same values: an input the step changed in place
since its forward began, an event outside the batch root's forward (a loss module
called after it), or one judged after that forward returned (fast device mode); nor
where the forward talks to other ranks (SyncBatchNorm, FSDP, DTensor): they would not
join a replay's collectives, and it would wait for them forever; a collective the forward
calls anyway ends the replay where it is called (_replay_collectives.py).

A step of a torch.compile'd model is held by its wrapper's hooks and replayed eagerly;
at an event inside a compiled graph that replay answers whether the compiler made the
value (_replay_compiled.py).
"""

import time

import torch

from . import _held_step, _ovf, _replay_check, _replay_compiled, _replay_optimizer
from ._replay_collectives import CollectivesRefused, TalksToRanks, talks_to_other_ranks

_armed = False
_pdb = False  # --on-nan pdb: the replay stops at the op's line in pdb (_replay_pdb.py)


class _ReplayDone(BaseException):
    """Ends the replay's forward once its producer is seen (not an Exception: a
    model's own `except Exception` must not catch it)."""


def configure(on, batch_root=None, pdb=False):
    """Replays at module events (on) or not; `batch_root`: the model already found;
    `pdb`: then stops in pdb at the op's line (on_nan="pdb")."""
    global _armed, _pdb
    _armed, _pdb = bool(on), bool(on and pdb)
    _ovf.set_replay(run if _armed else None)
    from . import _replay_step

    _ovf.set_step(_replay_step.run if _armed else None)
    if _armed and batch_root is not None:
        _held_step.attach(batch_root)
    elif not _armed:
        _held_step.detach_unless_wanted()


def armed():
    return _armed


def run(frame_seq, batch, compiled):
    """The runtime's call at the event FRAME (an optimizer's STEP) `frame_seq` of batch
    `batch` (`compiled`: written inside a torch.compile'd graph): replays and returns its
    line for the report ("replayed ..." or "not replayed: why")."""
    from . import _optimizer

    stepping = _optimizer.checking()
    if stepping is not None:
        return _replay_optimizer.run(stepping, _parameter_names(), frame_seq)
    held = _held_step.latest()
    module = held.module() if held is not None else None
    if module is None:
        return "not replayed: ovf held no forward of the model in this step"
    if not held.holds(frame_seq, batch):
        return (
            f"not replayed: the event came outside the forward of {type(module).__name__} in"
            f" batch {batch} (a module called after it, or judged after it returned); ovf"
            " replays the model's forward"
        )
    given = [path for path, t in held.inputs() if nonfinite(t)]
    if given:
        return (
            f"not replayed: the model's {', '.join(given)} held the non-finite value already"
            " (it came from the data or from code before the model)"
        )
    talking = talks_to_other_ranks(module)
    if talking:
        return (
            f"not replayed: the model's forward talks to the other ranks ({talking}): a replay"
            " on this rank alone would wait for them"
        )
    changed = held.changed_in_place()
    if changed:
        return (
            f"not replayed: the step changed {', '.join(changed)} in place since its forward began"
        )
    # A compiled model's step (or one of a compiled submodule) is replayed eagerly.
    eager = compiled or held.compiled
    if eager and not _replay_compiled.can_run_eagerly():
        return (
            "not replayed: the value was made in torch.compile'd code, and this torch has no"
            " torch.compiler.set_stance (torch >= 2.6) to run it eagerly"
        )
    started = time.perf_counter()
    calls = Calls()
    error = forward_again(module, held, calls.pre, calls.post, eager=eager)
    took = f"{time.perf_counter() - started:.2f} s"
    named = _ovf.replay_found()
    if named:
        global found
        found = Found(module, _ovf.replay_producer(), calls.at_found(), _again(module, held, eager))
        if _pdb:
            from . import _replay_pdb

            _replay_pdb.stop(found)
    if compiled and error is None:
        # the compiled graph's last bits differ from eager's: only NaN/Inf counts compare
        only = _replay_check.first_nonfinite_only_in_run(
            module, held.start_seq, frame_seq, calls.outputs
        )
        backend = _replay_compiled.backend_name(held.called())
        return _replay_compiled.said(type(module).__name__, took, backend, named, only)
    where = _replay_check.first_difference(module, held.start_seq, frame_seq, calls.outputs, named)
    left = where.startswith("at ")  # the first module whose statistics differ from the run's
    if named:
        said = f"replayed the forward of {type(module).__name__} with its ops observed ({took})"
        if left:
            said += f"; but it diverged from the run {where} before that op: {CAUSES}"
        return said
    if error is not None:
        return (
            f"the replay of the forward of {type(module).__name__} {error} before any op"
            f" made a non-finite value ({took})"
        )
    return (
        f"the replay of the forward of {type(module).__name__} made no non-finite value"
        f" ({took}): it diverged from the run" + (f" {where}: {CAUSES}" if left else f" ({CAUSES})")
    )


CAUSES = "nondeterministic kernels, state the step changes, or a hardware fault"


class Found:
    """What the replay found, for a later pass that stops in the producing call:
    `root` the batch root; `producer` (op, module path, "file.py:LINE in FUNC");
    `calls` {module: forward calls} up to it; `again(pre, post)` replays once more."""

    def __init__(self, root, producer, calls, again):
        self.root, self.producer, self.calls, self.again = root, producer, calls, again

    def target(self):
        """(the producing module, which of its calls, its name for a line)."""
        path = self.producer[1]
        module = dict(self.root.named_modules()).get(path) if path is not None else None
        module = module if module is not None else self.root
        return module, self.calls.get(module, 1), path or f"<root {type(self.root).__name__}>"


found = None  # the session's replay that named its op (a Found), for pdb and ovf step-into


class InCall:
    """Global module hooks for a later pass of the replay: enter() runs as `call`
    of `module` begins, leave() as it returns; the pass ends at the hook after end()."""

    def __init__(self, module, call, enter, leave):
        self.module, self.call, self.enter, self.leave = module, call, enter, leave
        self.calls, self.ended = 0, False

    def end(self):
        self.ended = True

    def pre(self, module, args):
        if self.ended:
            raise _ReplayDone
        if module is self.module:
            self.calls += 1
            if self.calls == self.call:
                self.enter()

    def post(self, module, args, output):
        if self.ended:
            raise _ReplayDone
        if module is self.module and self.calls == self.call:
            self.leave()


def forward_again(module, held, pre, post, backward=None, eager=False):
    """Runs the held forward with ops observed, `pre` and `post` global module hooks
    while it runs (they raise _ReplayDone to end it), then `backward(output)` if given,
    its ops observed too; returns what it raised ("Type: text") or None. The generators
    and the buffers come back as they were. `eager` (or a compiled model's step): its
    torch.compile'd code runs eagerly."""
    kept = _Kept(module)
    hooks = [
        torch.nn.modules.module.register_module_forward_pre_hook(pre),
        torch.nn.modules.module.register_module_forward_hook(post),
    ]
    refused = CollectivesRefused()
    try:
        torch.set_rng_state(held.rng_cpu)
        if held.rng_cuda is not None:
            torch.cuda.set_rng_state_all(held.rng_cuda)
        _ovf.begin_replay(backward=backward is not None)
        with refused, torch.set_grad_enabled(held.grad_enabled):
            output = _replay_compiled.call(
                lambda: module(*held.args, **held.kwargs), eager or held.compiled
            )
            if backward is not None:
                backward(output)
    except _ReplayDone:
        pass
    except TalksToRanks as e:
        return e.said()
    except Exception as e:  # noqa: BLE001 -- the model's own failure on the replay: said
        return raised(e)
    finally:
        for h in hooks:
            h.remove()
        kept.restore()
    return None


def raised(e):
    """The replay's words for the model's (the step's) own exception: its first line."""
    said = str(e).strip()
    return f"raised {type(e).__name__}: {said.splitlines()[0] if said else ''}"


def _parameter_names():
    """{parameter: its name in the batch root} of the latest forward's model."""
    held = _held_step.latest()
    module = held.module() if held is not None else None
    return {p: name for name, p in module.named_parameters()} if module is not None else {}


def nonfinite(t):
    return (t.is_floating_point() or t.is_complex()) and not bool(torch.isfinite(t).all())


class Calls:
    """Each module's forward calls in the replay until its producer is seen (then the
    replay ends): which call of its module the producing op ran in."""

    def __init__(self):
        self.counts, self.found = {}, None
        self.outputs = _replay_check.Outputs()  # what each call returned, for the check

    def pre(self, module, args):
        self.end_when_found()
        self.counts[module] = self.counts.get(module, 0) + 1

    def post(self, module, args, output):
        self.end_when_found()
        self.outputs.add(module, output)

    def end_when_found(self):
        if _ovf.replay_found():
            self.found = dict(self.counts)
            raise _ReplayDone

    def at_found(self):
        return self.found if self.found is not None else self.counts


def _again(module, held, eager):
    """The replay once more, for pdb: (pre, post) -> what forward_again returns."""
    return lambda pre, post: forward_again(module, held, pre, post, eager=eager)


class _Kept:
    """The random generators' states and the module's buffers as the run left them."""

    def __init__(self, module):
        self.rng_cpu = torch.get_rng_state()
        self.rng_cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
        self.buffers = [(b, b.clone()) for b in module.buffers()]

    def restore(self):
        torch.set_rng_state(self.rng_cpu)
        if self.rng_cuda is not None:
            torch.cuda.set_rng_state_all(self.rng_cuda)
        with torch.no_grad():
            for buffer, was in self.buffers:
                # Only what the replay wrote, through .data: a buffer a backward
                # will read keeps its version counter.
                if not torch.equal(buffer, was):
                    buffer.data.copy_(was)
