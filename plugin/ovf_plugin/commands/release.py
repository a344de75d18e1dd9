"""Let a process in wait mode go on (OVF_ON_NAN=wait / on_nan="wait").

Such a process printed its report and the attach command, and waits until a
debugger sets the control block's wait_released; `continue` then resumes it.
"""

from .. import layout
from ..errors import OvfError
from ..target import TargetMemoryError

NAME = "release"


def add_arguments(p):
    pass


def run(session, args):
    if session.target.kind() != "live":
        raise OvfError("ovf release: needs a running process (attach with gdb -p PID)")
    ring = session.ring()
    offset, data = layout.encode_control_field("wait_released", 1)
    try:
        session.target.write_memory(ring.address + offset, data)
    except TargetMemoryError as e:
        raise OvfError(f"ovf release: cannot write the control block: {e}") from None
    mode = layout.ON_EVENT_NAMES[ring.control.on_event] if ring.control.on_event < 5 else "unknown"
    if ring.control.on_event != layout.ON_EVENT_WAIT:
        return f"ovf: released (the runtime's mode is '{mode}', so nothing was waiting)\n"
    return "ovf: released; `continue` lets training go on\n"
