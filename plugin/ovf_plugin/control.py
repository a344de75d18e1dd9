"""What the plugin needs from a debugger beyond reading memory (ovf_ring's
Target): a stop breakpoint and the environment of the next `run`. Core files
and the post-mortem reader have no such thing; each front end implements it."""

import abc


class Control(abc.ABC):
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

    @abc.abstractmethod
    def resume(self):
        """Continues the stopped process as the debugger's `continue` does (the next
        stop is reported as usual); returns text to print, if any."""

    @abc.abstractmethod
    def stop_breakpoint_enabled(self):
        """Whether the stop breakpoint exists and is enabled (the user may have deleted
        or disabled it since)."""
