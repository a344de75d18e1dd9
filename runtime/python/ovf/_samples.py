"""Which dataset samples each batch held: the indices a DataLoader's sampler gave
for it, handed to the runtime (sample_log.h) when the batch leaves the loader, so
that an event's report and summary name the samples behind a NaN.

A loader asks its sampler for indices ahead of the batches it returns (workers
prefetch), always in the order it returns them unless it was made with
in_order=False: each iterator keeps the indices it asked for in a queue, and the
batch `__next__` returns takes the oldest. The runtime gives a batch the indices
fetched since the model last ran, and none at all of a loader that fetched two
batches before the model ran, rather than the wrong ones -- unless the loop
asking is Accelerate's (its DataLoaderShard fetches the next batch before it
hands out the current one, to know which is last): a forward gets the batch
before the newest it fetched. Indices only, never data; an
IterableDataset has none (nothing is noted), nor has a sampler whose indices are
not integers."""

import collections
import functools
import os
import sys
import weakref

from torch.utils.data import dataloader

from . import _ovf

_installed = False


def _queue(iterator):
    queue = iterator.__dict__.get("_ovf_indices")
    if queue is None:
        queue = iterator.__dict__["_ovf_indices"] = collections.deque()
        # The runtime knows loaders by id(): one that is gone is forgotten.
        weakref.finalize(iterator, _ovf.forget_sample_loader, id(iterator))
    return queue


def _as_indices(index):
    """The integers of a sampler's answer (one index, or a batch sampler's list), or None."""
    items = index if isinstance(index, (list, tuple)) else [index]
    try:
        return [int(i) for i in items if not isinstance(i, bool)] if items else None
    except (TypeError, ValueError):  # None (an IterableDataset), keys that are not numbers
        return None


_ACCELERATE_LOOP = os.path.join("accelerate", "data_loader.py")


def _asked_one_late(caller):
    """Whether the loop that called the loader's __next__ is Accelerate's
    DataLoaderShard.__iter__, which yields the batch before the one it asks for --
    unless it skips batches (a resumed epoch): those it fetches and never yields."""
    code = caller.f_code
    if code.co_name != "__iter__" or not code.co_filename.endswith(_ACCELERATE_LOOP):
        return False
    return getattr(caller.f_locals.get("self"), "skip_batches", None) == 0


def install():
    """Idempotent."""
    global _installed
    if _installed:
        return
    _installed = True
    base = dataloader._BaseDataLoaderIter
    next_index, next_batch, reset = base._next_index, base.__next__, base._reset

    @functools.wraps(next_index)
    def _next_index(self):
        index = next_index(self)  # StopIteration at the end: nothing queued
        _queue(self).append(index)
        return index

    @functools.wraps(next_batch)
    def __next__(self):
        try:
            data = next_batch(self)
        except StopIteration:
            _ovf.release_late_samples(id(self))
            raise
        queue = _queue(self)
        # Taken whether or not it is noted: the queue holds only what is prefetched.
        index = queue.popleft() if queue else None
        if index is not None and getattr(self, "_in_order", True):
            indices = _as_indices(index)
            if indices is not None:
                one_late = _asked_one_late(sys._getframe(1))
                _ovf.record_batch_samples(id(self), type(self._dataset).__name__, indices, one_late)
        return data

    @functools.wraps(reset)
    def _reset(self, *args, **kwargs):
        _queue(self).clear()  # a new pass: what was asked of the old sampler is void
        # ... and what the last pass fetched and no forward ran (a loop that broke
        # early), in the runtime too: this iterator's id, or a new one's at the same
        # address, starts clean.
        _ovf.forget_sample_loader(id(self))
        return reset(self, *args, **kwargs)

    base._next_index, base.__next__, base._reset = _next_index, __next__, _reset
