"""The console scripts `ovf-gdb` and `ovf-lldb` of a pip-installed ovf: they run the
debugger front end's own launcher (ovf/debuggers/<debugger>/ovf-<debugger>, a shell
script that resolves the program and loads ovf's commands), with the same arguments."""

import os
import sys


def _exec_launcher(debugger):
    launcher = os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "debuggers", debugger, f"ovf-{debugger}"
    )
    if not os.access(launcher, os.X_OK):
        sys.exit(
            f"ovf-{debugger}: {launcher} is missing: this ovf was not installed with pip "
            f"(a build tree runs <source>/{debugger}/ovf-{debugger}); reinstall it"
        )
    os.execv(launcher, [launcher, *sys.argv[1:]])


def gdb():
    _exec_launcher("gdb")


def lldb():
    _exec_launcher("lldb")
