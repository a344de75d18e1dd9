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

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from . import _held_step, _ovf

FORMAT = "ovf-batch"
VERSION = 1

_dir = None  # where the dump goes; None: off
_done = False  # one dump a session (or one line saying why none)
_installed = False


def configure(directory, batch_root=None):
    """Dumps go to `directory` (an absolute path _options.event_dir checked), or
    nowhere (None); `batch_root`: the model already found. A new session: nothing
    held, nothing dumped yet."""
    global _dir, _done, _installed
    _dir, _done = directory, False
    if directory is None:
        _held_step.detach_unless_wanted()
        return
    if batch_root is not None:
        _held_step.attach(batch_root)
    if _installed:
        return
    _installed = True
    register_optimizer_step_pre_hook(lambda *a, **k: dump_if_due())
    atexit.register(dump_if_due)


def enabled():
    return _dir is not None


def wants_inputs():
    """Whether a dump may still come: the batch root's forwards are to be held."""
    return _dir is not None and not _done


def give_up(why):
    """Ends the dumps with one line (ovf never breaks the run it watches)."""
    global _done
    _done = True
    _say(f"ovf: no batch dump: {why}")


def dump_if_due():
    """Saves the held step if the session's first NaN/Inf came in it (once)."""
    if wants_inputs():
        try:
            _dump()
        except Exception as e:  # noqa: BLE001 -- a dump's failure is ovf's, never the run's
            give_up(f"cannot save the step: {type(e).__name__}: {e}")


def _dump():
    global _done
    first = _ovf.first_nonfinite()
    if first is None:
        return
    held, _done = _held_step.latest(), True  # one answer a session
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
    changed = held.changed_in_place()
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
