"""What an e2e test body needs from one debugger (the Debugger interface that
debuggers_gdb.Gdb and debuggers_lldb.Lldb implement), the cut mark a test splits a
debugger's output at, and the checks every debugger run passes: no Python traceback,
no plugin internals in what the debugger printed."""

from bounded_process import TIMEOUT

CUT_MARK = "----8<----"  # printed by Debugger.cut: where a command's output ends


def _check(text, inferior_traceback):
    """Whatever happened, the debugger side never shows a Python traceback."""
    if not inferior_traceback:
        assert "Traceback" not in text.replace("Traceback (most recent call first)", ""), text
    assert "Python Exception" not in text, text
    assert "ovf_plugin" not in text and "ovf_gdb" not in text and "ovf_lldb_sb" not in text, text
    assert "internal error" not in text, text


class Debugger:
    """What a test body needs from one debugger."""

    name = ""
    attach = ""  # how the plugin's messages name attaching: "gdb -p PID"
    list_breakpoints = ""

    def run(
        self,
        commands,
        program=None,
        core=None,
        pid=None,
        cwd=None,
        env=None,
        timeout=TIMEOUT,
        load=True,
        inferior_traceback=False,
        cpp_names=False,
    ):
        """Runs `commands` in one batch-mode debugger with ovf loaded (unless not `load`) on
        `program` (argv), a `core` file of PYTHON, or the process `pid` (or on PYTHON alone);
        returns its output. Commands after a failing one still run. `cpp_names`: the test
        names C++ functions (see Gdb.run)."""
        raise NotImplementedError

    def cut(self):
        """A command that prints CUT_MARK on a line of its own."""
        raise NotImplementedError

    def hits(self, out):
        """How many times the debugger reported a stop at ovf_stop_event."""
        raise NotImplementedError
