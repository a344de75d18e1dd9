"""ovf's debugger-side core, shared by the GDB and LLDB front ends.

The ring reader (the package ovf_ring, beside this one) decodes the runtime's
frame ring; this package is the debugger command layer on top: what is armed,
the stop breakpoint's decisions, and every ``ovf`` command's options and output.
It never imports ``gdb`` or ``lldb``: a front end hands it the program's memory
(``ovf_ring.target.Target``), its debugger control (``control.Control``) and its
own words (``wording.Wording``), and prints what the commands return.
"""

PLUGIN_VERSION = "0.1.0"
