"""A core file named on the debugger's command line that the debugger itself
could not open (cut short after the ring's header: gdb's BFD then calls it "not
a core dump", LLDB "Unexpected EOF"). ovf reads it with its own ELF reader, so
that every tool gives the same answer as python3 -m ovf.postmortem."""

import os

from .errors import OvfError


def _own_arguments():
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return [a.decode("utf-8", "surrogateescape") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def named_core(core_flags, positional_core):
    """The path given after one of `core_flags` ("-c", "--core") or as
    `--core=PATH`, else the second positional argument when `positional_core`
    (gdb's `gdb PROGRAM CORE`); None when there is none."""
    args = _own_arguments()[1:]
    positional = []
    i = 0
    while i < len(args):
        a = args[i]
        if a in core_flags and i + 1 < len(args):
            return args[i + 1]
        if any(a.startswith(flag + "=") for flag in core_flags):
            return a.split("=", 1)[1]
        if a == "--args":
            break  # what follows is the program's own command line
        if a.startswith("-"):
            # options of gdb / lldb that take a value in the next argument
            i += (
                2
                if a
                in ("-ex", "-x", "-iex", "-ix", "-o", "-O", "-s", "-S", "-p", "--pid", "-e", "-cd")
                else 1
            )
            continue
        positional.append(a)
        i += 1
    return positional[1] if positional_core and len(positional) >= 2 else None


def open_unopened(path, why):
    """A CoreTarget over `path`, with `why` (the debugger's refusal) noted; OvfError if
    ovf cannot read it either."""
    if path is None or not os.path.isfile(path):
        return None
    # pyelftools only now: importing it at load pulls in pdb and readline, which
    # LLDB 19's Python (its own readline module) cannot import.
    from .core_target import CoreTarget

    target = CoreTarget(path)
    cut = (
        f", cut short: {target.size} of {target.expected_size} bytes"
        if target.size < target.expected_size
        else ""
    )
    target.note = f"ovf: the debugger could not open {path} ({why}{cut}); ovf read it itself"
    return target


def refusal(error):
    """Whether `error` (an OvfError of ring.locate) says there is no process at all."""
    return isinstance(error, OvfError) and str(error).startswith("ovf: no process")
