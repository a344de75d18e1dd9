"""The e2e tests' child processes: a minimal environment for them, and a run under a timeout
that, on timeout, kills the whole process tree (a debugger's inferior may hold the output
pipe open) and fails the test with what was printed."""

import os
import signal
import subprocess

import pytest
from build_paths import PACKAGE  # the ovf under test (tests/python, conftest.py)

TIMEOUT = 120


def clean_env(**extra):
    """A minimal environment: nothing of the caller's PYTHONPATH or OVF_* leaks in."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "OVF_PACKAGE_DIR": PACKAGE,
    }
    env.update(extra)
    return env


def _tree(pid):
    """`pid` and its descendants (to kill what a timed-out debugger left running)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def run_bounded(argv, timeout=TIMEOUT, **kwargs):
    """stdout+stderr of `argv`; on timeout the whole process tree is killed (a debugger's
    inferior may hold the output pipe open) and the test fails with what was printed."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
        **kwargs,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for pid in reversed(_tree(proc.pid)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        out, _ = proc.communicate(timeout=30)
        pytest.fail(f"{os.path.basename(argv[0])} ran longer than {timeout} s; its output:\n{out}")
    return out
