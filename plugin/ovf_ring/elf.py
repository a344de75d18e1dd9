"""ELF files read with pyelftools: the runtime library's symbols, for the
readers that find the ring without a debugger (a core file, /proc/PID/mem)."""

import os


def _import_pyelftools():
    """(ELFFile, ELFError), or (None, None) where the Python lacks pyelftools.
    pyelftools imports pdb, which imports rlcompleter, which calls
    readline.set_completer; LLDB's embedded Python names its own line editor
    readline (lldb_editline, without set_completer: LLDB 19 on Python 3.13), so
    the import fails there unless rlcompleter meets a readline that has one."""
    import sys
    import types

    editor = sys.modules.get("readline")
    stand_in = editor is not None and not hasattr(editor, "set_completer")
    if stand_in:
        sys.modules["readline"] = types.SimpleNamespace(set_completer=lambda *_: None)
    try:
        from elftools.common.exceptions import ELFError
        from elftools.elf.elffile import ELFFile

        return ELFFile, ELFError
    except (ImportError, AttributeError):  # only the readers of ELF files need it
        return None, None
    finally:
        if stand_in:
            sys.modules["readline"] = editor


ELFFile, ELFError = _import_pyelftools()

RUNTIME_LIBRARY = "libovf_runtime"

# pyelftools reports a short or malformed file by any of these, not only ELFError.
_PARSE_ERRORS = (
    ValueError,
    KeyError,
    IndexError,
    EOFError,
    OSError,
    AssertionError,
    TypeError,
    AttributeError,
    UnicodeDecodeError,
    ArithmeticError,
)


def parse_errors():
    from elftools.construct import ConstructError  # pyelftools' vendored construct

    return (ELFError, ConstructError, *_PARSE_ERRORS)


def missing_file(mappings, name_part):
    """The path of a mapped file whose name contains `name_part` that is not on this
    host's disk any more, or None; `mappings` as runtime_symbol takes them."""
    for _, _, _, path in mappings:
        if name_part in os.path.basename(path) and not os.path.isfile(path):
            return path
    return None


def runtime_symbol(mappings, name):
    """`name`'s address: the runtime library's load address in `mappings`
    ([(start, end, file offset, path)]: a core's NT_FILE note, a live process's
    /proc/PID/maps) plus the symbol's value in the library's .dynsym; None where
    the library is not mapped, gone, or not an ELF file any more."""
    entries = [m for m in mappings if os.path.basename(m[3]).startswith(RUNTIME_LIBRARY)]
    if not entries:
        return None
    path = entries[0][3]
    if not os.path.isfile(path):  # gone, or a FIFO / device in its place: the scan takes over
        return None
    try:
        with open(path, "rb") as f:
            library = ELFFile(f)
            dynsym = library.get_section_by_name(".dynsym")
            symbols = dynsym.get_symbol_by_name(name) if dynsym is not None else None
            if not symbols:
                return None
            loads = [s.header for s in library.iter_segments() if s.header.p_type == "PT_LOAD"]
            value = symbols[0]["st_value"]
    except parse_errors():
        return None  # gone, unreadable or not an ELF any more: the scan takes over
    # The mapping of the lowest file offset sits at base + the vaddr of that offset.
    start, _, offset, _ = min((m for m in entries if m[3] == path), key=lambda m: m[2])
    for h in loads:
        if h.p_offset <= offset < h.p_offset + max(h.p_filesz, 1):
            return start - (h.p_vaddr + offset - h.p_offset) + value
    return None
