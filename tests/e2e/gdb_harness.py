"""gdb-only helpers, for tests not yet written against harness.Debugger (the `debugger`
fixture runs one test body under gdb and LLDB). Everything else is in harness.py."""

import pytest

from harness import (
    BUILD,
    CUT_MARK,
    DEBUGGERS,
    GDB_SCRIPT,
    PACKAGE,
    PYTHON,
    SCRIPT,
    TIMEOUT,
    TOP,  # noqa: F401
    between,
    clean_env,
    reference_report,
    run_bounded,
    run_python,
    stop_summary,
)

requires_gdb = pytest.mark.skipif(
    DEBUGGERS["gdb"].available() is not None, reason="gdb with Python is not installed"
)
CUT = DEBUGGERS["gdb"].cut()  # a gdb command whose output marks where a command's output ends


__all__ = [
    "BUILD",
    "CUT",
    "CUT_MARK",
    "GDB_SCRIPT",
    "PACKAGE",
    "PYTHON",
    "SCRIPT",
    "TIMEOUT",
    "TOP",
    "between",
    "clean_env",
    "reference_report",
    "requires_gdb",
    "run_gdb",
    "run_python",
    "stop_summary",
]


def run_gdb(commands, args, cwd=None, timeout=TIMEOUT, env=None, load=True):
    """gdb -batch -nx with ovf loaded, `commands` as -ex, then `args`; returns stdout+stderr."""
    argv = ["gdb", "-batch", "-nx", "-iex", "set debuginfod enabled off"]
    if load:
        argv += ["-x", GDB_SCRIPT]
    for command in commands:
        argv += ["-ex", command]
    text = run_bounded(argv + list(args), timeout, cwd=cwd, env=env or clean_env())
    assert "Traceback" not in text.replace("Traceback (most recent call first)", ""), text
    assert "Python Exception" not in text, text
    return text
