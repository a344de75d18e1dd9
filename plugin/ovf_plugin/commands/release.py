"""Let a process in wait mode go on (OVF_ON_NAN=wait / on_nan="wait").

Such a process printed its report and the attach command, and waits until a
debugger sets the control block's wait_released; `continue` then resumes it.
"""

from ovf_ring import layout
from ovf_ring.errors import OvfError
from ovf_ring.target import TargetMemoryError

NAME = "release"


def add_arguments(p):
    pass


def run(session, args):
    if session.target.kind() != "live":
        raise OvfError(
            f"ovf release: needs a running process (attach with {session.wording.attach})"
        )
    ring = session.ring()
    offset, data = layout.encode_control_field("wait_released", 1)
    try:
        session.target.write_memory(ring.address + offset, data)
    except TargetMemoryError as e:
        raise OvfError(f"ovf release: cannot write the control block: {e}") from None
    # Whether it waits cannot be read (the loop is in the runtime's code, and
    # break-on-nan may just have switched the mode to "continue"): say what happens.
    return "ovf: released: a process waiting in wait mode goes on at `continue`\n"
