"""A Target over an ELF core file, read with pyelftools: no debugger needed.

A kernel core and gdb's `gcore` both hold the process's writable memory as
PT_LOAD segments and, in the NT_FILE note, which file was mapped where. That
is enough to find the runtime: NT_FILE gives libovf_runtime.so's load address,
the library's own .dynsym gives `ovf_state`'s offset in it. If the library has
moved or been rebuilt since the core was written, ring.locate falls back to
scanning the writable segments for the ring's magic, as the gdb side does.

The core is untrusted input: every failure of pyelftools on a garbage or
truncated file becomes one OvfError line.
"""

import bisect
import os
import stat

from .elf import ELFFile, missing_file, parse_errors, runtime_symbol
from .errors import OvfError
from .target import Target, TargetMemoryError

_ELF_TYPES = {
    "ET_EXEC": "an executable",
    "ET_DYN": "a shared library or a PIE executable",
    "ET_REL": "an object file",
}
PF_W = 2


class CoreTarget(Target):
    def __init__(self, path):
        if ELFFile is None:
            raise OvfError(
                "ovf: reading a core file needs pyelftools (Debian: apt install python3-pyelftools)"
            )
        self.path = path
        try:
            # Only a regular file: opening a FIFO or a device would block or never end.
            mode = os.stat(path).st_mode
            if not stat.S_ISREG(mode):
                raise OvfError(
                    f"ovf: {path} is not a core file (not a regular file: {_file_type(mode)})"
                )
            self._file = open(path, "rb")
        except OSError as e:
            raise OvfError(f"ovf: cannot open {path}: {e.strerror}") from None
        try:
            self._load()
        except OvfError:
            self.close()
            raise
        except parse_errors() as e:
            self.close()
            raise OvfError(
                f"ovf: {path} is not a readable core file (truncated or corrupt: {e})"
            ) from None

    def _load(self):
        size = os.fstat(self._file.fileno()).st_size
        if self._file.read(4) != b"\x7fELF":
            raise OvfError(f"ovf: {self.path} is not a core file (not an ELF file)")
        self._file.seek(0)
        elf = ELFFile(self._file)
        if elf.header.e_type != "ET_CORE":
            what = _ELF_TYPES.get(elf.header.e_type, f"an ELF file of type {elf.header.e_type}")
            raise OvfError(f"ovf: {self.path} is not a core file ({what})")
        self._segments = []  # (vaddr, end, file offset, bytes in the file, writable), by vaddr
        self.mappings = []  # NT_FILE: (start, end, file offset, path)
        self.expected_size = (
            size  # what the program headers promise; more if the file was cut short
        )
        for segment in elf.iter_segments():
            h = segment.header
            self.expected_size = max(self.expected_size, h.p_offset + h.p_filesz)
            if h.p_type == "PT_LOAD":
                # Bytes past the end of a truncated core are not there to read.
                in_file = max(0, min(h.p_filesz, size - h.p_offset))
                self._segments.append(
                    (h.p_vaddr, h.p_vaddr + h.p_memsz, h.p_offset, in_file, bool(h.p_flags & PF_W))
                )
            elif h.p_type == "PT_NOTE" and h.p_offset + h.p_filesz <= size:
                self.mappings += _file_mappings(segment)
        self._segments.sort()
        self._starts = [s[0] for s in self._segments]
        self._symbols = {}
        self.size = size

    def close(self):
        self._file.close()

    def cut_short(self):
        """The line that says the file is shorter than its program headers promise,
        or "": postmortem prints it as an error, the debuggers above their listing."""
        if self.size >= self.expected_size:
            return ""
        return (
            f"ovf: {self.path} is cut short ({self.size} of {self.expected_size} bytes); "
            "what it lacks shows as unreadable"
        )

    # ------------------------------------------------------------ Target

    def kind(self):
        return "core"

    def file_offset(self, address):
        """Where the byte at `address` is (or would be) in the file, or None."""
        i = bisect.bisect_right(self._starts, address) - 1
        if i < 0 or address >= self._segments[i][1]:
            return None
        start, _, offset, _, _ = self._segments[i]
        return offset + address - start

    def read_memory(self, address, size):
        out = bytearray()
        at = address
        while len(out) < size:
            i = bisect.bisect_right(self._starts, at) - 1
            if i < 0 or at >= self._segments[i][1]:
                raise TargetMemoryError(f"0x{at:x} is not in the core file")
            start, end, offset, in_file, _ = self._segments[i]
            available = min(end, start + in_file) - at
            if available <= 0:
                if offset + at - start >= self.size:
                    raise TargetMemoryError(f"0x{at:x} lies past the end of the file")
                raise TargetMemoryError(f"0x{at:x} was not dumped into the core file")
            want = min(available, size - len(out))
            self._file.seek(offset + at - start)
            chunk = self._file.read(want)
            if len(chunk) != want:
                raise TargetMemoryError(f"cannot read 0x{at:x} from the core file")
            out += chunk
            at += want
        return bytes(out)

    def write_memory(self, address, data):
        raise TargetMemoryError("a core file is read-only")

    def find_data_symbol(self, name):
        if name not in self._symbols:
            self._symbols[name] = runtime_symbol(self.mappings, name)
        return self._symbols[name]

    def memory_regions(self):
        """Writable segments, each named by the file mapped at its start (an
        anonymous one, such as a library's .bss, by nothing)."""
        regions = []
        for start, _end, _, in_file, writable in self._segments:
            if writable and in_file:
                path = next((p for a, b, _, p in self.mappings if a <= start < b), "")
                regions.append((start, start + in_file, path))
        return regions

    def missing_library(self, name_part):
        return missing_file(self.mappings, name_part)


def _file_type(mode):
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a file"


def _file_mappings(segment):
    """[(start, end, file offset, path)] of the NT_FILE notes in `segment`."""
    found = []
    for note in segment.iter_notes():
        if note["n_type"] != "NT_FILE":
            continue
        desc = note["n_desc"]
        for entry, name in zip(desc["Elf_Nt_File_Entry"], desc["filename"], strict=False):
            path = name.decode("utf-8", "surrogateescape") if isinstance(name, bytes) else name
            found.append(
                (entry["vm_start"], entry["vm_end"], entry["page_offset"] * desc["page_size"], path)
            )
    return found
