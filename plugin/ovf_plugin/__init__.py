"""ovf's debugger-side core, shared by the GDB and LLDB front ends.

It decodes the runtime's frame ring (runtime/include/ovf/ring.h) from raw bytes,
models frames, and implements every ``ovf`` command's logic and output. It never
imports ``gdb`` or ``lldb``: a front end hands it a ``Target`` (target.py) and
prints what the commands return.
"""

PLUGIN_VERSION = "0.1.0"
