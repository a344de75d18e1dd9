"""Helpers of the end-to-end tests: real gdb and real LLDB, a real Python with torch (OVF_PYTHON,
default the one running pytest: the venv's on the main leg, Debian's on trixie), one debugger
process per test, each under a timeout. The ovf under test is tests/python/build_paths.py's:
the build tree (OVF_BUILD_DIR, default build/), or with OVF_TEST_INSTALLED=1 the one pip
installed for the interpreter running pytest.

A test body is written once and runs under both debuggers through the `debugger` fixture
(conftest.py): a Debugger runs a list of commands in batch mode (`gdb -batch -nx -ex ...`,
`lldb -b -o ...`) and knows the few commands and messages that differ between the two.

The pieces: bounded_process.py (the environment, runs under a timeout), debuggers_base.py
(the Debugger interface, the cut mark), debuggers_gdb.py and debuggers_lldb.py (the two
debuggers); every name the tests import is importable from here.
"""

import os
import re
import signal
import subprocess

import pytest
from bounded_process import TIMEOUT, clean_env, run_bounded
from build_paths import (  # the ovf under test and the interpreter (tests/python, conftest.py)
    FRONT_ENDS,
    GDB_LAUNCHER,
    LLDB_LAUNCHER,
    PACKAGE,
    PACKAGE_PARENT,
    PYTHON,
)
from debuggers_base import CUT_MARK, Debugger
from debuggers_gdb import GDB_SCRIPT, Gdb
from debuggers_lldb import LLDB_SCRIPT, Lldb

__all__ = [
    "CUT_MARK",
    "DEBUGGERS",
    "DIVERGE",
    "Debugger",
    "FRONT_ENDS",
    "GDB_LAUNCHER",
    "GDB_SCRIPT",
    "Gdb",
    "LLDB_LAUNCHER",
    "LLDB_SCRIPT",
    "Lldb",
    "PACKAGE",
    "PACKAGE_PARENT",
    "PYTHON",
    "SCRIPT",
    "TIMEOUT",
    "TOP",
    "abort_core",
    "between",
    "clean_env",
    "reference_report",
    "run_bounded",
    "run_python",
    "stop_summary",
]

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(TOP, "tests", "e2e", "scripts", "diverge.py")
DIVERGE = ["--inf-at", "blocks.1.amp:2"]  # diverge.py's usual run: inf in batch 2


DEBUGGERS = {"gdb": Gdb(), "lldb": Lldb()}


def abort_core(
    tmp_path, package_parent=None, args=DIVERGE, script=SCRIPT, timeout=TIMEOUT, ovf_args=()
):
    """A kernel core of `script` (diverge.py) run under `python3 -m ovf --on-nan abort
    [ovf_args]` with the ovf package in `package_parent`: (core path, the run's stdout); skips
    where the kernel writes none here."""
    with open("/proc/sys/kernel/core_pattern") as f:
        if f.read().strip() not in ("core", "core.%p"):
            pytest.skip("kernel cores do not go to the working directory here (core_pattern)")
    env = clean_env(PYTHONPATH=package_parent or PACKAGE_PARENT)
    out = subprocess.run(
        [
            "sh",
            "-c",
            f"ulimit -c unlimited && exec {PYTHON} -m ovf --on-nan abort {' '.join(ovf_args)}"
            f" {script} {' '.join(args)}",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode in (-signal.SIGABRT, 128 + signal.SIGABRT), out.stderr
    cores = [p for p in os.listdir(tmp_path) if p.startswith("core")]
    if not cores:
        pytest.skip("no core file was written (core dumps disabled?)")
    return tmp_path / cores[0], out.stdout


def between(text, start, end=CUT_MARK):
    """The part of `text` from `start` up to `end`."""
    at = text.find(start)
    stop = text.find(end, at) if at >= 0 else -1
    assert at >= 0 and stop >= 0, f"no {start!r} ... {end!r} in:\n{text}"
    return text[at:stop]


def run_python(args, cwd=None, env=None, timeout=TIMEOUT):
    out = subprocess.run(
        [PYTHON, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env or clean_env(PYTHONPATH=PACKAGE_PARENT),
    )
    return out


def reference_report(script_args):
    """What ovf.DebugUnderflowOverflow prints for the same run: (batch, module, report text)."""
    out = run_python([SCRIPT, "--reference", *script_args])
    assert "DebugUnderflowOverflow: inf/nan detected" in out.stderr, out.stderr
    report = out.stdout[out.stdout.index("\nDetected inf/nan") :]
    batch = int(re.search(r"Detected inf/nan during batch_number=(\d+)", report).group(1))
    headers = re.findall(r"^ {17} (\S*) (\S+)$", report, re.M)
    return batch, headers[-1], report


def stop_summary(text):
    """(title, batch, module, class) of the first ovf stop summary in a debugger's output."""
    m = re.search(r"^ovf: (.*) at batch (\d+)(?:, frame \d+)?\n     (\S*) \((\S+)\):", text, re.M)
    assert m, text
    return m.group(1), int(m.group(2)), m.group(3), m.group(4)
