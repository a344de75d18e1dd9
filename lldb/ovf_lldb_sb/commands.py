"""The `ovf` container command and one `command script add` class per
ovf_plugin command, with the GDB front end's names, options and output."""

import os
import shlex
import traceback

from ovf_plugin import commands
from ovf_ring.errors import OvfError

import lldb

from . import sessions

# No backticks: this text goes through an LLDB command line, which evaluates them.
HELP = "Find the first inf/nan of a PyTorch run and stop there (help ovf NAME, or NAME --help)."


class OvfCommand:
    """Runs one ovf_plugin command (NAME); errors are one-line LLDB errors."""

    NAME = ""

    def __init__(self, debugger, internal_dict):
        pass

    def get_short_help(self):
        return commands.COMMANDS[self.NAME].__doc__.strip().splitlines()[0]

    def get_long_help(self):
        return self.get_short_help() + "\n\n" + commands.help_text(self.NAME)

    def __call__(self, debugger, command, exe_ctx, result):
        session = sessions.find(debugger)
        if session is None:  # a debugger made after the import: its own session
            session, _ = sessions.create(debugger, _package_dirs)
        try:
            argv = shlex.split(command)
        except ValueError as e:
            result.SetError(f"ovf {self.NAME}: {e}")
            return
        try:
            with session.target.pinned(exe_ctx.GetTarget()):
                text = commands.execute(session, self.NAME, argv)
        except OvfError as e:
            result.SetError(str(e))
            return
        except Exception as e:  # noqa: BLE001 - the user gets one line, never a traceback
            if os.environ.get("OVF_DEBUG"):
                traceback.print_exc()
            result.SetError(
                f"ovf {self.NAME}: internal error ({type(e).__name__}: {e}); "
                "OVF_DEBUG=1 shows the traceback"
            )
            return
        result.Print(text)
        result.SetStatus(lldb.eReturnStatusSuccessFinishResult)


def _class_name(name):
    return "Ovf" + "".join(part.capitalize() for part in name.split("-"))


COMMAND_CLASSES = {
    name: type(_class_name(name), (OvfCommand,), {"NAME": name, "__doc__": module.__doc__})
    for name, module in commands.COMMANDS.items()
}

_package_dirs = ()


def register(debugger, module_name, package_dirs=()):
    """Adds `ovf` and its subcommands to `debugger`, whose Python namespace
    holds `module_name` (the imported ovf_lldb.py, which exports the classes).
    Importing twice is harmless: the subcommands are overwritten."""
    global _package_dirs
    _package_dirs = tuple(package_dirs)
    sessions.create(debugger, _package_dirs)
    interpreter = debugger.GetCommandInterpreter()
    result = lldb.SBCommandReturnObject()
    # Fails once the container exists (a second import): keep it.
    interpreter.HandleCommand(f'command container add -h "{HELP}" ovf', result)
    for name, cls in COMMAND_CLASSES.items():
        result = lldb.SBCommandReturnObject()
        interpreter.HandleCommand(
            f"command script add -o -c {module_name}.{cls.__name__} ovf {name}", result
        )
        if not result.Succeeded():
            raise RuntimeError(f"ovf: cannot add `ovf {name}`: {(result.GetError() or '').strip()}")
