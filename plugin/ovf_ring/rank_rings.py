"""The rings of a job's ranks, read without a debugger, as event summaries:
`python3 -m ovf.ranks` judges the rings of live processes (/proc/PID/mem) and
core files the way it judges the summaries the processes left."""

import socket

from . import postmortem
from .errors import OvfError
from .first_value import summary
from .identity import rank_text
from .proc_target import ProcTarget
from .ring import locate


def _who(header, source):
    return f"{rank_text(header) or f'pid {header.pid}'} ({source})"


def read(cores=(), pids=()):
    """(found, clean, errors): found [(source, summary dict)] of the rings that
    hold a non-finite value; clean [(source, header)] of those that hold none;
    errors, one line each for what could not be read."""
    found, clean, errors = [], [], []

    def take(ring, source, host):
        try:
            data = summary(ring, host)
        except OvfError as e:
            errors.append(f"{e} ({source})")
            return
        if data is None:
            clean.append((source, ring.header))
        else:
            found.append((source, data))

    for path in cores:
        core = postmortem.open_core(path)
        if core.error:
            errors.append(core.error)
        if core.ring is not None:
            take(core.ring, path, None)
        core.close()
    host = socket.gethostname()
    for pid in pids:
        try:
            target = ProcTarget(pid)
        except OvfError as e:
            errors.append(str(e))
            continue
        try:
            take(locate(target), f"pid {pid}", host)
        except OvfError as e:
            errors.append(f"{e} (pid {pid})")
        finally:
            target.close()
    return found, clean, errors


def clean_text(clean):
    """ "rank 1 of 2 (pid 4242) holds no non-finite value" lines."""
    return [f"{_who(h, source)} holds no non-finite value" for source, h in clean]
