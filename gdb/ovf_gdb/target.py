"""ovf_ring's Target (the program's memory) over gdb's Python API."""

import re

from ovf_ring.proc_target import writable_regions
from ovf_ring.target import Target, TargetMemoryError
from ovf_ring.unopened_core import named_core

import gdb


class GdbTarget(Target):
    def kind(self):
        inferior = gdb.selected_inferior()
        if inferior.pid == 0:
            return "none"
        # gdb 13 has no Python call that names the target; a core file's reads
        # as "Local core dump file" in `info target`.
        if "core dump file" in gdb.execute("info target", to_string=True):
            return "core"
        return "live"

    def unopened_core_path(self):
        """`gdb PROGRAM CORE` or `gdb -c CORE`: the core gdb was given."""
        return named_core(("-c", "--core", "-core"), positional_core=True)

    def core_file(self):
        # gdb 17 says it (Inferior.corefile); gdb 13 and 16 only in `info target`:
        # "Local core dump file:\n\t`/path/core', file type elf64-x86-64."
        core = getattr(gdb.selected_inferior(), "corefile", None)
        if core is not None and getattr(core, "filename", None):
            return core.filename
        m = _CORE_FILE.search(gdb.execute("info target", to_string=True))
        return m.group(1) if m else None

    def pid(self):
        # A pid of this host only: gdbserver's (target remote) is another host's.
        inferior = gdb.selected_inferior()
        connection = getattr(inferior, "connection", None)
        if connection is None or getattr(connection, "type", "native") != "native":
            return None
        return inferior.pid or None

    def read_memory(self, address, size):
        try:
            return gdb.selected_inferior().read_memory(address, size).tobytes()
        except (gdb.MemoryError, gdb.error, OverflowError, ValueError) as e:
            raise TargetMemoryError(str(e)) from None

    def write_memory(self, address, data):
        try:
            gdb.selected_inferior().write_memory(address, data)
        except (gdb.MemoryError, gdb.error, OverflowError, ValueError) as e:
            raise TargetMemoryError(str(e)) from None

    def find_data_symbol(self, name):
        # Works from the dynamic symbol alone: lookup_global_symbol needs debug info.
        try:
            return int(gdb.parse_and_eval(f"(unsigned long)&{name}"))
        except gdb.error:
            return None

    def memory_regions(self):
        if self.kind() == "live":
            return writable_regions(gdb.selected_inferior().pid)
        return _core_sections()

    def missing_library(self, name_part):
        # A library the process had but gdb could not open is listed with no address.
        for line in gdb.execute("info sharedlibrary", to_string=True).splitlines():
            if name_part in line and line[:1].isspace():
                return line.split()[-1]
        return None


_CORE_FILE = re.compile(r"^Local core dump file:\n\t`(.*)', file type ", re.M)
_SECTION = re.compile(r"^\s*0x([0-9a-f]+) - 0x([0-9a-f]+) is (load\d+\w*)", re.M)
_MAPPING = re.compile(
    r"^\s*0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x[0-9a-f]+\s+0x[0-9a-f]+\s+(?:\S+\s+)?(/\S.*)$", re.M
)


def _core_sections():
    """The core's memory sections, each named by the file mapped there when the
    core was written (NT_FILE, via `info proc mappings`) or by the file mapped
    just before it (a library's .bss follows its file mappings)."""
    sections = [
        (int(a, 16), int(b, 16))
        for a, b, _ in _SECTION.findall(gdb.execute("info files", to_string=True))
    ]
    try:
        mappings = [
            (int(a, 16), int(b, 16), path.strip())
            for a, b, path in _MAPPING.findall(gdb.execute("info proc mappings", to_string=True))
        ]
    except gdb.error:
        mappings = []
    regions = []
    for start, end in sections:
        path = next((p for a, b, p in mappings if a <= start < b), "")
        regions.append((start, end, path))
    return regions
