"""Where the ovf under test is, and the interpreter the tests start. A module of its own
so test files can import it whatever other conftest.py is loaded.

- The build tree (default): OVF_BUILD_DIR (default <repo>/build); its python/ directory
  goes first on sys.path and on the children's PYTHONPATH.
- A pip-installed ovf (OVF_TEST_INSTALLED=1): the one the interpreter running pytest
  imports (tools/test.sh runs the end-to-end tests so, in a fresh venv with the wheel).
PYTHON: OVF_PYTHON, default the interpreter running pytest (the venv's)."""

import importlib.util
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("OVF_BUILD_DIR", os.path.join(REPO, "build"))
PYTHON = os.environ.get("OVF_PYTHON", sys.executable)
INSTALLED = os.environ.get("OVF_TEST_INSTALLED") == "1"
# The last line on stderr of a run that --on-nan warn let go on after a NaN/Inf (exit status 1).
WENT_ON = (
    "ovf: non-finite values were found (the report above) and --on-nan warn let the run go "
    "on; exit status 1"
)

if INSTALLED:
    _spec = importlib.util.find_spec("ovf")  # without importing it (nor torch)
    if _spec is None or not _spec.submodule_search_locations:
        raise RuntimeError(f"OVF_TEST_INSTALLED=1, but {sys.executable} has no ovf installed")
    PACKAGE_PARENT = os.path.dirname(list(_spec.submodule_search_locations)[0])
    # The console scripts beside the interpreter: <venv>/bin/ovf-gdb, ovf-lldb.
    GDB_LAUNCHER = os.path.join(os.path.dirname(PYTHON), "ovf-gdb")
    LLDB_LAUNCHER = os.path.join(os.path.dirname(PYTHON), "ovf-lldb")
    FRONT_ENDS = os.path.join(PACKAGE_PARENT, "ovf", "debuggers")
else:
    PACKAGE_PARENT = os.path.join(BUILD, "python")
    if not os.path.isfile(os.path.join(PACKAGE_PARENT, "ovf", "libovf_runtime.so")):
        raise RuntimeError(f"ovf is not built in {BUILD}: run tools/setup.sh first (README.md)")
    if PACKAGE_PARENT not in sys.path:
        sys.path.insert(0, PACKAGE_PARENT)
    GDB_LAUNCHER = os.path.join(REPO, "gdb", "ovf-gdb")
    LLDB_LAUNCHER = os.path.join(REPO, "lldb", "ovf-lldb")
    FRONT_ENDS = REPO
PACKAGE = os.path.join(PACKAGE_PARENT, "ovf")


_HARNESS_VARIABLES = ("OVF_BUILD_DIR", "OVF_PYTHON", "OVF_TEST_INSTALLED")


def run_ovf_child(args, timeout=120, **env):
    """Runs PYTHON with `args` against the ovf under test, in the environment of the
    tests less every OVF_ variable but this module's own (a child that imports it
    finds the same build), plus `env`; returns the CompletedProcess."""
    import subprocess

    child = {
        k: v for k, v in os.environ.items() if not k.startswith("OVF_") or k in _HARNESS_VARIABLES
    }
    child["PYTHONPATH"] = PACKAGE_PARENT
    child.update(env)
    return subprocess.run(
        [PYTHON, *args], capture_output=True, text=True, timeout=timeout, env=child
    )
