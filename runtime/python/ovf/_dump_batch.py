"""--dump-batch DIR: the failing step saved with torch.save, so that it can be loaded
and run again outside the job (ovf.replay_batch).

What a step's replay needs is at hand only while the step runs: the batch root's
inputs (held by reference from its forward's start: no copy), the random generators'
states there (dropout), and the parameters and buffers, which the optimizer has not
written yet. ovf saves them at the first safe point after the session's first NaN/Inf:
the end of the batch root's forward (its hook runs when the forward raised, too), an
optimizer's step before it writes, or the process's exit (a raise from the backward
pass ends a script before any step). Never inside an op. An input the step changed in
place is saved as it is then, and named so.
"""

import atexit
import os
import pickle
import socket
import sys
import weakref

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from . import _ovf

FORMAT = "ovf-batch"
VERSION = 1

_dir = None  # where the dump goes; None: off
_held = None  # _Held of the batch root's latest forward
_done = False  # one dump a session (or one line saying why none)
_attached = weakref.WeakSet()  # batch roots with the hooks
_installed = False


class _Held:
    """What the batch root's forward started with, by reference."""

    def __init__(self, module, args, kwargs):
        self.module = weakref.ref(module)
        self.batch = _ovf.batch()
        self.args, self.kwargs = args, kwargs
        self.training = module.training
        tensors = _tensors((args, kwargs))
        self.versions = [(path, t, _version(t)) for path, t in tensors]
        self.rng_cpu = torch.get_rng_state()
        self.rng_cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None


def _version(t):
    """The tensor's version counter; None for an inference tensor, which keeps none."""
    return None if t.is_inference() else t._version


def _tensors(value, path="input"):
    """[(path, tensor)] of the tensors in nested tuples, lists and dicts."""
    if isinstance(value, torch.Tensor):
        return [(path, value)]
    if isinstance(value, (tuple, list)):
        return [x for i, v in enumerate(value) for x in _tensors(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in _tensors(v, f"{path}[{k!r}]")]
    return []


def configure(directory, batch_root=None):
    """Dumps go to `directory` (an absolute path _options.event_dir checked), or
    nowhere (None); `batch_root`: the model already found. A new session: nothing
    held, nothing dumped yet."""
    global _dir, _held, _done, _installed
    _dir, _held, _done = directory, None, False
    if directory is None:
        return
    if batch_root is not None:
        attach(batch_root)
    if _installed:
        return
    _installed = True
    register_optimizer_step_pre_hook(lambda *a, **k: _dump_if_due())
    atexit.register(_dump_if_due)


def enabled():
    return _dir is not None


def attach(module):
    """`module` is the batch root: its forwards are held."""
    if module in _attached:
        return
    _attached.add(module)
    module.register_forward_pre_hook(_start, with_kwargs=True)
    module.register_forward_hook(_end, with_kwargs=True, always_call=True)


def _start(module, args, kwargs):
    global _held
    if _dir is None or _done:
        return
    # A NaN of the previous step's backward, with no optimizer step since (gradient
    # accumulation, a loop that skips the step): saved before its inputs are let go.
    _dump_if_due()
    if not _done:
        _guarded(lambda: _Held(module, args, kwargs), "cannot hold the inputs", hold=True)


def _end(module, args, kwargs, output):
    _dump_if_due()


def _guarded(work, what, hold=False):
    """Runs `work`; an exception of it ends the dumps with one line instead of
    reaching the training loop (ovf never breaks the run it watches)."""
    global _held, _done
    try:
        value = work()
        if hold:
            _held = value
    except Exception as e:  # noqa: BLE001 -- a dump's failure is ovf's, never the run's
        _held, _done = None, True
        _say(f"ovf: no batch dump: {what}: {type(e).__name__}: {e}")


def _dump_if_due():
    """Saves the held step if the session's first NaN/Inf came in it (once)."""
    if _dir is not None and not _done:
        _guarded(_dump, "cannot save the step")


def _dump():
    global _done, _held
    first = _ovf.first_nonfinite()
    if first is None:
        return
    held, _held, _done = _held, None, True  # one answer a session; the inputs let go after
    module = held.module() if held is not None else None
    if module is None or held.batch != first[1]:
        _say(
            f"ovf: no batch dump: the first inf/nan came in batch {first[1]}, whose inputs ovf"
            " does not hold (it holds the inputs of the model's latest forward)"
        )
        return
    if type(module).__name__ == "FullyShardedDataParallel":
        # FSDP (1) gathers a state dict with collectives the other ranks would not join.
        _say(
            "ovf: no batch dump: FullyShardedDataParallel gathers its parameters with"
            " collectives the other ranks would not join here; FSDP2 (fully_shard) and DDP"
            " are saved"
        )
        return
    path = os.path.join(_dir, _file_name())
    changed = [
        p for p, t, version in held.versions if version is not None and t._version != version
    ]
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "batch": held.batch,
        "model": f"{type(module).__module__}.{type(module).__qualname__}",
        "training": held.training,
        "args": held.args,
        "kwargs": held.kwargs,
        "state_dict": module.state_dict(),
        "rng_cpu": held.rng_cpu,
        "rng_cuda": held.rng_cuda,
        "samples": _ovf.batch_samples(held.batch),
        "event": _ovf.describe_first_nonfinite(),
        "changed_in_place": changed,
    }
    error = _write_new(path, payload)
    if error:
        _say(f"ovf: no batch dump: {error}")
        return
    note = (
        f"; {', '.join(changed)} changed in place during the step: saved as changed"
        if changed
        else ""
    )
    _say(
        f"ovf: saved batch {held.batch}'s inputs, parameters and random state to {path}"
        f" (ovf.replay_batch(model, path) runs it again){note}"
    )


def _file_name():
    rank = os.environ.get("RANK", "")
    who = f"rank{rank}-" if rank.isdigit() else ""
    return f"ovf-batch-{who}{socket.gethostname()}-{os.getpid()}.pt"


def _write_new(path, payload):
    """torch.save(payload) to `path`, which must not exist: written in full beside it,
    then linked (never replaced, never half there). Returns "" or why not."""
    partial = path + ".partial"
    try:
        f = open(partial, "xb")
    except OSError as e:
        return f"cannot create {partial}: {e.strerror}"
    try:
        with f:
            torch.save(payload, f)
        _publish(partial, path)
    except FileExistsError:
        return f"{path} exists already; not replaced"
    except Exception as e:  # noqa: BLE001 -- unpicklable inputs too: a line, never a crash
        return f"cannot write {path}: {e}"
    finally:
        try:
            os.unlink(partial)
        except OSError:
            pass  # renamed into place, or its directory is gone
    return ""


def _publish(partial, path):
    """`partial` under the name `path`, never replacing a file: a hard link, or where
    the file system has none (some network and FUSE mounts) a rename after a check."""
    try:
        os.link(partial, path)
    except FileExistsError:
        raise
    except OSError:
        if os.path.lexists(path):
            raise FileExistsError(path) from None
        os.rename(partial, path)


def _say(line):
    print(line, file=sys.stderr, flush=True)


def replay_batch(model, path, weights_only=True):
    """Runs the step saved by --dump-batch again: loads its parameters and buffers
    into `model` (the same architecture), its random generators' states, and calls
    model(*args, **kwargs) in the training mode it ran in. Returns the output.
    weights_only: torch.load's; False for inputs of other types than tensors and
    containers (only for files you trust)."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=weights_only)
    except pickle.UnpicklingError as e:
        # torch's text is a page; its line naming the class is the one that matters
        lines = [line.strip() for line in str(e).splitlines() if "Unsupported global" in line]
        raise ValueError(
            f"ovf: {path} holds inputs torch.load does not load with weights_only=True"
            + (f" ({lines[0].split('error: ')[-1]})" if lines else "")
            + "; pass weights_only=False if you trust the file"
        ) from None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        raise ValueError(f"ovf: {path} is not a batch saved by --dump-batch")
    if saved.get("version") != VERSION:
        raise ValueError(
            f"ovf: {path} has batch dump version {saved.get('version')}; this ovf reads {VERSION}"
        )
    model.load_state_dict(saved["state_dict"])
    model.train(saved["training"])
    torch.set_rng_state(saved["rng_cpu"])
    if saved["rng_cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(saved["rng_cuda"])
    return model(*saved["args"], **saved["kwargs"])
