"""The `ovf` prefix command and one gdb.Command per ovf_plugin command."""

import os
import traceback

from ovf_plugin import commands
from ovf_plugin.session import Session
from ovf_plugin.wording import GDB
from ovf_ring.errors import OvfError

import gdb

from .breakpoint import on_stop
from .control import GdbControl
from .target import GdbTarget

_session = None


class OvfPrefix(gdb.Command):
    """Find the first inf/nan of a PyTorch run and stop there.

    Each command has `help ovf NAME` and --help; docs/commands.md has them all."""

    def __init__(self):
        super().__init__("ovf", gdb.COMMAND_USER, gdb.COMPLETE_NONE, prefix=True)

    def invoke(self, arg, from_tty):
        self.dont_repeat()
        if arg.strip():  # gdb hands unknown subcommands to the prefix
            raise gdb.GdbError(f'Undefined ovf command: "{arg.split()[0]}".  Try "help ovf".')
        gdb.write(f"{self.__doc__.splitlines()[0]}\n{commands.summary()}\n")


class OvfCommand(gdb.Command):
    """Runs one ovf_plugin command; its errors are one-line gdb errors."""

    def __init__(self, name):
        super().__init__(f"ovf {name}", gdb.COMMAND_USER, gdb.COMPLETE_NONE)
        self.name = name

    def invoke(self, arg, from_tty):
        self.dont_repeat()
        try:
            text = commands.execute(_session, self.name, gdb.string_to_argv(arg))
        except OvfError as e:
            raise gdb.GdbError(str(e)) from None
        except gdb.error as e:
            raise gdb.GdbError(f"ovf {self.name}: {e}") from None
        except Exception as e:  # noqa: BLE001 - the user gets one line, never a traceback
            if os.environ.get("OVF_DEBUG"):
                traceback.print_exc()
            raise gdb.GdbError(
                f"ovf {self.name}: internal error ({type(e).__name__}: {e}); "
                "OVF_DEBUG=1 shows the traceback"
            ) from None
        gdb.write(text)


def register(package_dirs=()):
    """Registers the commands once per gdb (sourcing the script twice is harmless)."""
    global _session
    if _session is not None:
        return
    _session = Session(GdbTarget(), GdbControl(), GDB, package_dirs)
    OvfPrefix()
    for name in commands.COMMANDS:
        doc = (
            commands.COMMANDS[name].__doc__.strip().splitlines()[0]
            + "\n\n"
            + commands.help_text(name)
        )
        type(f"Ovf_{name.replace('-', '_')}", (OvfCommand,), {"__doc__": doc})(name)
    gdb.events.stop.connect(on_stop)
