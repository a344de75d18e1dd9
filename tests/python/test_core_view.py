"""A core a debugger has open is read by postmortem's reader (ovf_ring/core_view.py): the
debugger's own reads are not used, its symbols come first. No debugger needed here: a
stand-in Target plays one that refuses every read, as gdb and LLDB refuse reads that run
past a cut file's end or into a segment's undumped tail."""

import os
import sys

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "plugin"))

import crafted_cores  # noqa: E402
from ovf_plugin import commands  # noqa: E402
from ovf_plugin.session import Session  # noqa: E402
from ovf_ring import postmortem  # noqa: E402
from ovf_ring.errors import OvfError  # noqa: E402
from ovf_ring.target import Target, TargetMemoryError  # noqa: E402

SCANNED = "ovf: found the ring by scanning memory at 0x10000000 (no symbol ovf_state)"


class RefusingDebugger(Target):
    """A debugger with a core open that can read none of it."""

    def __init__(self, path, symbols=None):
        self.path = path
        self.symbols = symbols or {}
        self.reads = 0

    def kind(self):
        return "core"

    def core_file(self):
        return self.path

    def read_memory(self, address, size):
        self.reads += 1
        raise TargetMemoryError(f"cannot access memory at 0x{address:x}")

    def write_memory(self, address, data):
        raise TargetMemoryError("read-only")

    def find_data_symbol(self, name):
        return self.symbols.get(name)

    def memory_regions(self):
        return []


def frames(target):
    return commands.execute(Session(target), "frames", [])


def postmortem_lines(path):
    core = postmortem.open_core(str(path))
    try:
        return ([core.error] if core.error else []) + postmortem.frames(core).splitlines()
    finally:
        core.close()


def test_the_debugger_lists_what_postmortem_lists(tmp_path):
    path = crafted_cores.ring_core(tmp_path / "core")
    debugger = RefusingDebugger(str(path))
    out = frames(debugger)
    assert out.splitlines() == postmortem_lines(path)
    assert out.splitlines()[0] == SCANNED and out.endswith("model.layer Linear\n"), out
    assert debugger.reads == 0


def test_the_debuggers_symbol_comes_first(tmp_path):
    path = crafted_cores.ring_core(tmp_path / "core")
    out = frames(RefusingDebugger(str(path), {"ovf_state": 0x1000_0000}))
    assert "scanning" not in out and out.endswith("model.layer Linear\n"), out


def test_a_cut_core_says_so_first(tmp_path):
    path = crafted_cores.ring_core(tmp_path / "core")
    size = os.path.getsize(path)
    os.truncate(path, size - 4)  # the end of the string table
    out = frames(RefusingDebugger(str(path))).splitlines()
    assert out == postmortem_lines(path)
    assert out[:2] == [
        f"ovf: {path} is cut short ({size - 4} of {size} bytes); what it lacks shows as unreadable",
        SCANNED,
    ], out


def test_the_same_refusal(tmp_path):
    path = crafted_cores.ring_core(tmp_path / "core", ring=False)
    with pytest.raises(OvfError) as refused:
        frames(RefusingDebugger(str(path)))
    assert str(refused.value) == postmortem.open_core(str(path)).error.replace(f"{path}: ", "")


def test_without_a_file_ovf_can_read_the_debuggers_reads_are_all_there_is(tmp_path):
    path = tmp_path / "minidump"
    path.write_bytes(b"MDMP" + bytes(60))
    debugger = RefusingDebugger(str(path), {"ovf_state": 0x1000_0000})
    with pytest.raises(OvfError, match="^ovf: cannot read ovf_state at 0x10000000: cannot access"):
        frames(debugger)
    assert debugger.reads == 1
