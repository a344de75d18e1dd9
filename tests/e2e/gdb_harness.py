"""Helpers of the end-to-end tests: real gdb, real /usr/bin/python3 with torch, one gdb process
per test, each under a timeout. OVF_BUILD_DIR names the build (default build/)."""

import os
import re
import shutil
import subprocess

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("OVF_BUILD_DIR", os.path.join(TOP, "build"))
PACKAGE = os.path.join(BUILD, "python", "ovf")
PYTHON = "/usr/bin/python3"  # Debian's, with torch; another python3 on PATH may lack it
SCRIPT = os.path.join(TOP, "tests", "e2e", "scripts", "diverge.py")
GDB_SCRIPT = os.path.join(TOP, "gdb", "ovf-gdb.py")
TIMEOUT = 120


def _gdb_has_python():
    gdb = shutil.which("gdb")
    if gdb is None:
        return False
    out = subprocess.run([gdb, "-batch", "-nx", "-ex", "python print('py-ok')"], capture_output=True,
                         text=True, timeout=60)
    return "py-ok" in out.stdout


if not os.path.isfile(os.path.join(PACKAGE, "libovf_runtime.so")):
    raise RuntimeError(f"ovf is not built in {BUILD}: run cmake and ninja first (see README.md)")
requires_gdb = pytest.mark.skipif(not _gdb_has_python(), reason="gdb with Python is not installed")


def clean_env(**extra):
    """A minimal environment: nothing of the caller's PYTHONPATH or OVF_* leaks in."""
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8",
           "OVF_PACKAGE_DIR": PACKAGE}
    env.update(extra)
    return env


def run_gdb(commands, args, cwd=None, timeout=TIMEOUT, env=None, load=True):
    """gdb -batch -nx with ovf loaded, `commands` as -ex, then `args`; returns stdout+stderr."""
    argv = ["gdb", "-batch", "-nx", "-iex", "set debuginfod enabled off"]
    if load:
        argv += ["-x", GDB_SCRIPT]
    for command in commands:
        argv += ["-ex", command]
    out = subprocess.run(argv + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=timeout, cwd=cwd, env=env or clean_env())
    text = out.stdout
    assert "Traceback" not in text.replace("Traceback (most recent call first)", ""), text
    assert "Python Exception" not in text, text
    return text


CUT = "echo ----8<----\\n"  # a gdb command whose output marks where a command's output ends


def between(text, start, end="----8<----"):
    """The part of `text` from `start` up to `end`."""
    at = text.index(start)
    return text[at : text.index(end, at)]


def run_python(args, cwd=None, env=None, timeout=TIMEOUT):
    out = subprocess.run([PYTHON, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                         env=env or clean_env(PYTHONPATH=os.path.join(BUILD, "python")))
    return out


def reference_report(script_args):
    """What ovf.DebugUnderflowOverflow prints for the same run: (batch, module, report text)."""
    out = run_python([SCRIPT, "--reference", *script_args])
    assert "DebugUnderflowOverflow: inf/nan detected" in out.stderr, out.stderr
    report = out.stdout[out.stdout.index("\nDetected inf/nan"):]
    batch = int(re.search(r"Detected inf/nan during batch_number=(\d+)", report).group(1))
    headers = re.findall(r"^ {17} (\S*) (\S+)$", report, re.M)
    return batch, headers[-1], report


def stop_summary(text):
    """(title, batch, module, class) of the first ovf stop summary in gdb's output."""
    m = re.search(r"^ovf: (.*) at batch (\d+)(?:, frame \d+)?\n     (\S*) \((\S+)\):", text, re.M)
    assert m, text
    return m.group(1), int(m.group(2)), m.group(3), m.group(4)

