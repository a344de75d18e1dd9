"""Is the replay the run? Its modules' output statistics against the ring's, bit for bit.

The replay at a module event (_replay.py) runs the step's forward again; if it ran the
same values, each module call before the producing op made the same output, and the
one-pass statistics the runtime wrote for it in the run (abs min, abs max, NaN / +Inf /
-Inf / zero counts of its first output tensor) come out identical. The first module
whose statistics differ is where the replay left the run: a kernel that does not give
the same bits twice, state the step changed that the replay did not restore (a module
that counts its calls, noise from outside torch's generators), or the machine.

The run's records are read from this process's own ring (ovf_ring over /proc/self/mem,
as `ovf.plot` reads it): the frames of the held forward, from where it began
(Held.start_seq) to the event's.
"""

import ctypes
import os

import torch

from . import _ovf

_WRITE_SEQ_OFFSET = 32  # ring.h: ovf_state_t.write_seq


def write_seq():
    """The ring's next record seq (cheap: one read of the header, for every held step)."""
    return ctypes.c_uint64.from_address(_ovf.state_address() + _WRITE_SEQ_OFFSET).value


class Outputs:
    """The replay's module calls in the order they returned: [(module, stats or None)]."""

    def __init__(self):
        self.calls = []

    def add(self, module, output):
        tensor = _first_floating(output)
        self.calls.append((module, _stats(tensor) if tensor is not None else None))


def first_difference(root, start_seq, event_seq, outputs, found):
    """Where the replay's outputs first differ from the run's frames of the forward that
    began at `start_seq` (up to the event FRAME `event_seq`), in words, or "" where
    they agree (or cannot be compared: said in words too). `found`: the replay named
    its producer, so it stopped before the event's module returned."""
    from ovf_ring.errors import OvfError
    from ovf_ring.proc_target import ProcTarget
    from ovf_ring.ring import locate

    target = ProcTarget(os.getpid(), {"ovf_state": _ovf.state_address()})
    try:
        ring = locate(target)
        run = _run_outputs(ring, start_seq, event_seq)
    except OvfError as e:
        return f"not compared with the run ({e})"
    finally:
        target.close()
    if run is None:
        return "not compared with the run (its records of the step are no longer in the ring)"
    replayed = outputs.calls
    if found:
        run = run[:-1]  # the event's module: the replay ended inside it
    paths = {m: p for p, m in root.named_modules()}
    for i, (name, ran) in enumerate(run):
        if i >= len(replayed):
            return f"at {name} (the run returned from it; the replay ended before)"
        module, again = replayed[i]
        if ran is None or again is None:
            continue
        different = _first_different(ran, again)
        if different:
            return f"at {name or paths.get(module) or type(module).__name__} ({different})"
    return ""


def _run_outputs(ring, start_seq, event_seq):
    """[(module path, stats of its first output line)] of the run's frames from
    `start_seq` to the event FRAME `event_seq`, oldest first; None where gone."""
    from ovf_ring import layout
    from ovf_ring.frames import frame_at
    from ovf_ring.ring import BadSlot

    if start_seq < ring.floor_seq:
        return None
    out = []
    for seq in range(start_seq, event_seq + 1):
        r = ring.record(seq)
        if isinstance(r, BadSlot):
            return None
        if r.kind != layout.KIND_FRAME or r.flags & layout.FLAG_REPLAY:
            continue
        frame = frame_at(ring, seq)
        line = next((x for x in frame.lines if x.kind == layout.KIND_OUTPUT), None)
        stats = None
        # (a line whose device statistics are still on their way holds zeros: not compared)
        if (
            line is not None
            and line.flags & layout.FLAG_HAS_STATS
            and not line.flags & layout.FLAG_PENDING
        ):
            stats = {
                "abs_min": line.abs_min,
                "abs_max": line.abs_max,
                "nan": line.nan_count,
                "+inf": line.pos_inf_count,
                "-inf": line.neg_inf_count,
                "zero": line.zero_count,
            }
        out.append((ring.text(r.name_id), stats))
    return out


def _first_different(ran, again):
    from ovf_ring.report import format_8_2e

    # the counts first: an output with no finite value has abs max 0 in the record
    for key in ("nan", "+inf", "-inf", "abs_max", "abs_min", "zero"):
        a, b = ran[key], again[key]
        if a != b and not (a != a and b != b):  # NaN statistics equal each other
            show = (lambda v: format_8_2e(v).strip()) if key.startswith("abs") else str
            name = key.replace("_", " ") if key.startswith("abs") else f"{key} count"
            return f"first difference: output {name} {show(a)} in the run, {show(b)} in the replay"
    return ""


def _stats(tensor):
    s = _ovf.stats(tensor) if tensor.device.type == "cpu" else _ovf.device_stats(tensor)
    if s is None or not s["has_stats"]:
        return None
    return {
        "abs_min": s["abs_min"],
        "abs_max": s["abs_max"],
        "nan": s["nan"],
        "+inf": s["pos_inf"],
        "-inf": s["neg_inf"],
        "zero": s["zero"],
    }


def _first_floating(value):
    """The first floating tensor in a module's output (nested tuples, lists, dicts),
    as the runtime's first output line is."""
    if isinstance(value, torch.Tensor):
        return value if value.is_floating_point() else None
    items = value.values() if isinstance(value, dict) else value
    if isinstance(value, (tuple, list, dict)):
        for v in items:
            found = _first_floating(v)
            if found is not None:
                return found
    return None
