"""`--if EXPR` in Python mode (`python3 -m ovf --if ...`, OVF_IF): the debuggers'
expression (ovf_plugin.condition: parsed, never eval'd, bounded) over the same
fields decides each NaN/Inf/backward event in the process itself. The event is
read from the ring as a debugger reads it, by plain memory reads of this
process, and only once the runtime's own filters passed it (--stop, --module,
--after-batch). An expression that fails on an event keeps the event, and says
why once."""

import os
import sys

from ovf_plugin.condition import Condition
from ovf_ring.errors import OvfError
from ovf_ring.event import condition_holds, event_at
from ovf_ring.proc_target import ProcTarget
from ovf_ring.ring import locate

from . import _options, _ovf


def parse(text, where="--if"):
    """The Condition of `text`, or OptionError with the debuggers' one-line reason."""
    try:
        return Condition(text)
    except OvfError as e:
        raise _options.OptionError(f"{e} ({where})") from None


def install(text):
    """Every later event stands only where `text` holds for one of its lines."""
    condition = parse(text)
    said = []

    def decide(seq, events):
        ring = locate(ProcTarget(os.getpid(), {"ovf_state": _ovf.state_address()}))
        event = event_at(ring, seq, events)
        if event is None:
            return True
        try:
            return condition_holds(condition, ring, event, events)
        except OvfError as e:
            if not said:
                said.append(e)
                print(f"{e}; the event stands", file=sys.stderr, flush=True)
            return True

    _ovf.set_event_condition(decide)


def remove():
    _ovf.set_event_condition(None)
