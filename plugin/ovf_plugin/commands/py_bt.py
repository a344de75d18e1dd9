"""Show the Python stack where the latest event's value was made.

The runtime took it at the event (its snapshot): works in gdb and LLDB, live
and on core files, on every CPython, without python3-dbg. The program's own
innermost frame is marked; `ovf py-locals` shows its locals.
"""

import linecache

from .. import snapshot
from ..report import escape_text

NAME = "py-bt"


def add_arguments(p):
    pass


def run(session, args):
    ring = session.ring()
    snap = snapshot.read(ring)
    out = [snapshot.stale_note(ring, snap) + "Traceback (most recent call first):"]
    for f in snap.frames:
        out.append(
            f'  File "{f.file}", line {f.line}, in {f.function}'
            + ("    <- the program's code (ovf py-locals)" if f.user else "")
        )
        source = _source_line(f.file, f.line)
        if source:
            out.append(f"    {source}")
    if len(snap.frames) == snapshot.MAX_FRAMES:
        out.append(f"  ... (the snapshot keeps the innermost {snapshot.MAX_FRAMES} frames)")
    return "\n".join(out) + "\n"


def _source_line(path, line):
    """The line's text as the file on this machine has it now ("" if unreadable),
    escaped: a source file is as untrusted as the names in the ring."""
    try:
        text = linecache.getline(path, line).strip()
    except (OSError, UnicodeDecodeError, ValueError):
        return ""
    return escape_text(text.encode("utf-8", "surrogateescape"))
