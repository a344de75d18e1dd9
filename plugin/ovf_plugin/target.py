"""The small interface each debugger front end implements for the plugin.

Everything the plugin knows about the debugged program comes through here, as
plain memory reads, so that a live process and a core file are read the same
way and no code ever runs in the inferior.
"""

import abc


class TargetMemoryError(Exception):
    """A read or write the target refused (unmapped, not in the core, no process)."""


class Target(abc.ABC):
    """What the plugin needs from a debugger."""

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

    def missing_library(self, name_part):
        """The path of a shared library whose name contains `name_part` that the
        process had loaded but the debugger could not open, or None."""
        return None

    def library_hint(self):
        """How the user points this debugger at a library that moved; "" if
        there is no such setting."""
        return "point the debugger at it with: set solib-search-path DIR"

    @abc.abstractmethod
    def set_stop_breakpoint(self, function, callback):
        """Puts an ordinary, user-visible breakpoint on `function` (pending until
        the library loads) and returns a handle; `callback()` runs when it is hit,
        before the debugger reports the stop, and returns False to continue
        silently. Reuses the handle's breakpoint while the user has not deleted it."""

    @abc.abstractmethod
    def get_environment(self, name):
        """The value the inferior will be started with for `name`, or None."""

    @abc.abstractmethod
    def set_environment(self, name, value):
        """Sets (value a str) or unsets (value None) a variable of the inferior's
        environment for the next `run`."""
