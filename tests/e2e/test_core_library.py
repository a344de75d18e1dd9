"""Core files whose runtime library is stripped, or moved since the core was written, under
gdb and LLDB: the dynamic symbol `ovf_state` suffices; without the library the ring is found
by scanning the core's memory, and the debugger's own search path brings the symbol back."""

import os
import re
import shutil
import subprocess

import pytest
from harness import PACKAGE, abort_core, between


def stripped_package(parent):
    """A copy of the ovf package under `parent`/ovf whose runtime library has no symbol table
    and no debug info left, only its dynamic symbols."""
    if shutil.which("strip") is None:
        pytest.skip("strip (binutils) is not installed")
    shutil.copytree(PACKAGE, parent / "ovf", ignore=shutil.ignore_patterns("__pycache__"))
    library = parent / "ovf" / "libovf_runtime.so"
    subprocess.run(["strip", "--strip-all", str(library)], check=True)
    symbols = subprocess.run(["nm", "-D", str(library)], capture_output=True, text=True).stdout
    assert re.search(r" B ovf_state$", symbols, re.M), symbols
    return library


def test_stripped_runtime(debugger, tmp_path):
    stripped_package(tmp_path / "pkg")
    core, stdout = abort_core(tmp_path, package_parent=str(tmp_path / "pkg"))
    out = debugger.run(["ovf frames", debugger.cut()], core=core)
    assert "scanning" not in out and "was not found" not in out, out
    assert stdout[stdout.index("Last 21 forward frames:") :].startswith(
        between(out, "Last 21 forward frames:")
    )


def test_moved_runtime(debugger, tmp_path):
    library = stripped_package(tmp_path / "pkg")
    core, stdout = abort_core(tmp_path, package_parent=str(tmp_path / "pkg"))
    report = stdout[stdout.index("Last 21 forward frames:") :]
    os.rename(tmp_path / "pkg", tmp_path / "moved")  # as if the core went to another machine
    out = debugger.run(["ovf frames", debugger.cut()], core=core)
    # The ring is found by its header in the core's memory, and ovf says how.
    assert re.search(
        r"^ovf: found the ring by scanning memory at 0x[0-9a-f]+ in \S*libovf_runtime\.so "
        r"\(no symbol ovf_state\)$",
        out,
        re.M,
    ), out
    assert f"ovf: the runtime library {library} was not found" in out, out
    assert report.startswith(between(out, "Last 21 forward frames:"))
    # Pointed at the library's new place, the debugger has the symbol again: no scan.
    hint = debugger.search_path(library.parent, tmp_path / "moved" / "ovf")
    out = debugger.run([hint, "ovf frames", debugger.cut()], core=core)
    assert "scanning" not in out and "was not found" not in out, out
    assert report.startswith(between(out, "Last 21 forward frames:"))
