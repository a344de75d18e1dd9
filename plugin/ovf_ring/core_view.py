"""A core file that a debugger has open, read by ovf's own ELF reader.

gdb and LLDB read a core's memory through their own core support, and each
draws the core's edges differently: both refuse a whole read that runs past
the end of a file cut short, LLDB one that runs into the part of a segment
that was never dumped (p_filesz < p_memsz), and gdb counts read-only segments
among the writable ones. A core cut right after the ring's header also loses
the loader's list of libraries, so neither debugger has the symbol ovf_state,
while the NT_FILE note at the file's start still says where the runtime was.
The same core then gave three answers. So the ring of a core is located and
read by the reader of `python3 -m ovf.postmortem` (CoreTarget): the same
segments, the same bytes, the same scan. The debugger adds only what the user
told it and the file cannot say: the symbol of a library found on its search
path after it moved.
"""

import os

from .errors import OvfError
from .target import Target, TargetMemoryError


class DebuggerCore(Target):
    """The memory of a core as CoreTarget reads it, with the debugger's symbols first."""

    def __init__(self, debugger, core):
        self.debugger = debugger  # the front end's Target, whose kind() is "core"
        self.core = core  # a CoreTarget over the same file

    def kind(self):
        return "core"

    def read_memory(self, address, size):
        return self.core.read_memory(address, size)

    def write_memory(self, address, data):
        raise TargetMemoryError("a core file is read-only")

    def find_data_symbol(self, name):
        address = self.debugger.find_data_symbol(name)
        return address if address is not None else self.core.find_data_symbol(name)

    def memory_regions(self):
        return self.core.memory_regions()

    def missing_library(self, name_part):
        # NT_FILE's path first, as postmortem says it; the debugger's list where the
        # core names no files.
        return self.core.missing_library(name_part) or self.debugger.missing_library(name_part)

    def close(self):
        self.core.close()


def _identity(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class CoreFiles:
    """The DebuggerCore of the core file a debugger has open, kept while that file is
    the same (one command reads the ring many times; `core-file` may change it)."""

    def __init__(self):
        self._key = None
        self._view = None

    def view(self, debugger):
        """A DebuggerCore, or None where ovf cannot read the file itself (no path from
        the debugger, not an ELF core such as a minidump, no pyelftools): then the
        debugger's own reads are all there is."""
        find = getattr(debugger, "core_file", None)
        path = find() if find is not None else None
        key = (path, _identity(path)) if path else None
        if key is None or key[1] is None:
            return None
        if key != self._key:
            self.close()
            # pyelftools only now: importing it at load pulls in pdb and readline,
            # which LLDB 19's Python (its own readline module) cannot import.
            from .core_target import CoreTarget

            try:
                self._view = DebuggerCore(debugger, CoreTarget(path))
            except OvfError:
                self._view = None
            self._key = key
        if self._view is not None:
            self._view.debugger = debugger
        return self._view

    def close(self):
        if self._view is not None:
            self._view.close()
        self._key = self._view = None
