"""Is the replay the run? Its modules' output statistics against the ring's, bit for bit.

The replay at a module event (_replay.py) runs the step's forward again; if it ran the
same values, each module call before the producing op made the same output, and the
one-pass statistics the runtime wrote for it in the run (abs min, abs max, NaN / +Inf /
-Inf / zero counts of its first output tensor) come out identical. The first module
whose statistics differ is where the replay left the run: a kernel that does not give
the same bits twice, state the step changed that the replay did not restore (a module
that counts its calls, noise from outside torch's generators), or the machine.

The run's records are read in place from this process's own ring (_OwnRing): the
frames of the held forward, from where it began (Held.start_seq) to the event's.
"""

import ctypes
import struct

import torch

from . import _ovf

_write_seq_address = None  # of ovf_state.write_seq, once known


def write_seq():
    """The ring's next record seq (cheap: one read of the header, for every held step)."""
    global _write_seq_address
    if _write_seq_address is None:
        from ovf_ring import layout  # ring.h's offsets, beside this package

        _write_seq_address = _ovf.state_address() + layout.HEADER_OFFSETS["write_seq"][0]
    return ctypes.c_uint64.from_address(_write_seq_address).value


class Outputs:
    """The replay's module calls in the order they returned: [(module, stats or None)]."""

    def __init__(self):
        self.calls = []

    def add(self, module, output):
        tensor = _first_floating(output)
        self.calls.append((module, stats_of(tensor) if tensor is not None else None))


def first_difference(root, start_seq, event_seq, outputs, found, whole=False):
    """Where the replay's outputs first differ from the run's frames of the forward that
    began at `start_seq` (up to the event FRAME `event_seq`), in words, or "" where
    they agree (or cannot be compared: said in words too). `found`: the replay named
    its producer, so it stopped before the event's module returned. `whole`: the replay
    ran the whole forward (a backward's replay: the event, the optimizer's STEP, came
    after the run's other modules too, its loss module's)."""
    from ovf_ring.report import format_8_2e

    run = _run_outputs(_OwnRing(), start_seq, event_seq)
    if run is None:
        return "not compared with the run (its records of the step are no longer in the ring)"
    replayed = outputs.calls
    if found:
        run = run[:-1]  # the event's module: the replay ended inside it
    if whole:
        run = run[: len(replayed)]
    paths = {m: p for p, m in root.named_modules()}
    for i, (name, ran) in enumerate(run):
        if i >= len(replayed):
            return f"at {name} (the run returned from it; the replay ended before)"
        module, again = replayed[i]
        if ran is None or again is None:
            continue
        different = _first_different(ran, again, format_8_2e)
        if different:
            return f"at {name or paths.get(module) or type(module).__name__} ({different})"
    return ""


def first_nonfinite_only_in_run(root, start_seq, event_seq, outputs):
    """(module path, its class, the run's stats, the replay's) of the first module call whose output
    held NaN/Inf in the run and none in the replay, or None (also where the run's records
    are gone): the compiled run against its eager replay, whose last bits differ anyway."""
    run = _run_outputs(_OwnRing(), start_seq, event_seq)
    paths = {m: p for p, m in root.named_modules()}
    for (name, ran), (module, again) in zip(run or [], outputs.calls, strict=False):
        if ran is None or again is None:
            continue
        if holds_nonfinite(ran) and not holds_nonfinite(again):
            return name or paths.get(module) or "", type(module).__name__, ran, again
    return None


def holds_nonfinite(stats):
    """Whether statistics (stats_of's, _record_stats's) count a NaN or an Inf."""
    return bool(stats["nan"] or stats["+inf"] or stats["-inf"])


class _OwnRing:
    """This process's ring read in place with ctypes: header fields one at a time,
    records and names. Never the header whole: a copy of it in the heap, magic and all,
    is what a core reader's scan for the ring would find, stale, in a core cut short
    before the real one."""

    def __init__(self):
        from ovf_ring import layout

        base = _ovf.state_address()

        def field(name, kind):
            return kind.from_address(base + layout.HEADER_OFFSETS[name][0]).value

        self.capacity = field("record_capacity", ctypes.c_uint32)
        self.records = field("records_addr", ctypes.c_uint64)
        self.write_seq = field("write_seq", ctypes.c_uint64)
        self.names_index = field("names_index_addr", ctypes.c_uint64)
        self.names_arena = field("names_arena_addr", ctypes.c_uint64)
        self.names_count = field("names_count", ctypes.c_uint32)

    def record(self, seq):
        """The record `seq`, or None where the ring no longer (or not yet) holds it."""
        from ovf_ring import layout

        if seq >= self.write_seq or self.write_seq - seq > self.capacity:
            return None
        slot = self.records + (seq & (self.capacity - 1)) * layout.RECORD_SIZE
        r = layout.decode_record(ctypes.string_at(slot, layout.RECORD_SIZE))
        return r if r.seq == seq else None

    def text(self, name_id):
        if name_id >= self.names_count:
            return ""
        offset, length = struct.unpack("<II", ctypes.string_at(self.names_index + 8 * name_id, 8))
        return ctypes.string_at(self.names_arena + offset, length).decode("utf-8", "replace")


def _run_outputs(ring, start_seq, event_seq):
    """[(module path, stats of its first output line)] of the run's frames from
    `start_seq` to the event FRAME `event_seq`, oldest first; None where gone."""
    from ovf_ring import layout
    from ovf_ring.frames import MAX_LINES

    out, frame_seq = [], None
    for seq in range(start_seq, min(ring.write_seq, event_seq + 1 + MAX_LINES)):
        r = ring.record(seq)
        if r is None:
            return None
        if r.flags & layout.FLAG_REPLAY:
            continue
        if r.kind == layout.KIND_FRAME:
            if seq > event_seq:
                break
            frame_seq = seq
            out.append((ring.text(r.name_id), None))
        elif r.kind == layout.KIND_OUTPUT and r.frame_seq == frame_seq and out[-1][1] is None:
            # (a line whose device statistics are still on their way holds zeros)
            if r.flags & layout.FLAG_HAS_STATS and not r.flags & layout.FLAG_PENDING:
                out[-1] = (out[-1][0], _record_stats(r))
    return out


def _record_stats(r):
    return {
        "abs_min": r.abs_min,
        "abs_max": r.abs_max,
        "nan": r.nan_count,
        "+inf": r.pos_inf_count,
        "-inf": r.neg_inf_count,
        "zero": r.zero_count,
    }


def _first_different(ran, again, format_8_2e):
    # the counts first: an output with no finite value has abs max 0 in the record
    for key in ("nan", "+inf", "-inf", "abs_max", "abs_min", "zero"):
        a, b = ran[key], again[key]
        if a != b and not (a != a and b != b):  # NaN statistics equal each other
            show = (lambda v: format_8_2e(v).strip()) if key.startswith("abs") else str
            name = key.replace("_", " ") if key.startswith("abs") else f"{key} count"
            return f"first difference: output {name} {show(a)} in the run, {show(b)} in the replay"
    return ""


def stats_of(tensor):
    """The one-pass statistics of `tensor` (the runtime's engine, on its device), or None."""
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
