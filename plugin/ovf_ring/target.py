"""The memory of a process or core file, as the ring reader needs it.

Everything ovf knows about the debugged program comes through here, as plain
memory reads, so that a live process and a core file are read the same way and
no code ever runs in the inferior. Debugger front ends, the core-file reader
(core_target.py) and the /proc reader (proc_target.py) implement it.
"""

import abc


class TargetMemoryError(Exception):
    """A read or write the target refused (unmapped, not in the core, no process)."""


class Target(abc.ABC):
    """Memory reads (and, live, the few writes to the control block)."""

    @abc.abstractmethod
    def kind(self):
        """ "live" (a running or stopped process), "core" (a core file), or "none"."""

    @abc.abstractmethod
    def read_memory(self, address, size):
        """`size` bytes at `address` as bytes; raises TargetMemoryError."""

    @abc.abstractmethod
    def write_memory(self, address, data):
        """Writes bytes at `address` of a live process; raises TargetMemoryError."""

    @abc.abstractmethod
    def find_data_symbol(self, name):
        """The address of the data symbol `name` (dynamic symbols suffice), or None."""

    @abc.abstractmethod
    def memory_regions(self):
        """[(start, end, path)] of the writable memory of the process or core,
        for the magic scan when the symbol cannot be found; path may be ""."""

    def core_file(self):
        """The path of the core file the debugger has open, or None: ovf then
        reads the ring from that file itself (core_view.py)."""
        return None

    def missing_library(self, name_part):
        """The path of a shared library whose name contains `name_part` that the
        process had loaded but the debugger could not open, or None."""
        return None

    def pid(self):
        """The live process's id on this host, or None (a core, no process)."""
        return None
