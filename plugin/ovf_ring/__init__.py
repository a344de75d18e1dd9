"""ovf's ring reader: the runtime's frame ring (runtime/include/ovf/ring.h)
decoded from a process's or core file's memory with plain reads: its layout,
records, frames, events, the event snapshot, and their text and JSON forms.

No debugger code: the debugger command layer (ovf_plugin) and `python3 -m
ovf.postmortem` both use it. What it reads comes through a Target (target.py):
a debugger's memory, a core file (core_target.py) or /proc (proc_target.py).
"""
