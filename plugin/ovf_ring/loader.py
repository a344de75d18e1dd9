"""The dynamic loader's list of loaded libraries, read from the program's
memory (glibc's `_r_debug.r_map` chain of `struct link_map`): what a process
had loaded, whether or not a debugger could open each file."""

import struct

from .target import TargetMemoryError

MAX_LIBRARIES = 4096  # cap on the list read from a core (untrusted memory)
MAX_PATH = 4096


def loaded_libraries(target, r_debug):
    """[(load bias, path)] from the `_r_debug` at address `r_debug`; what could
    be read of a cut core (the list ends at the first unreadable entry)."""
    libraries = []
    try:
        entry = struct.unpack("<Q", target.read_memory(r_debug + 8, 8))[0]  # r_debug.r_map
        seen = set()
        while entry and entry not in seen and len(libraries) < MAX_LIBRARIES:
            seen.add(entry)
            # struct link_map { l_addr; l_name; l_ld; l_next; l_prev; }
            l_addr, l_name, _, l_next = struct.unpack("<4Q", target.read_memory(entry, 32))
            path = _c_string(target, l_name) if l_name else ""
            if path:
                libraries.append((l_addr, path))
            entry = l_next
    except TargetMemoryError:
        pass
    return libraries


def _c_string(target, address):
    """The NUL-terminated file name at `address` ("" where unreadable), read in
    small pieces: a name near the end of a mapping must not fail as a whole."""
    data = b""
    while len(data) < MAX_PATH:
        try:
            chunk = target.read_memory(address + len(data), 64)
        except TargetMemoryError:
            return ""
        end = chunk.find(b"\0")
        if end >= 0:
            return (data + chunk[:end]).decode("utf-8", "surrogateescape")
        data += chunk
    return ""
