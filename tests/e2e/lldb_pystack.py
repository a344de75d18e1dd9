"""The Python stack of a CPython 3.11 process stopped under LLDB, for the
end-to-end tests (LLDB has no `py-bt`).

LLDB 19 cannot unwind the native stack past a function that GCC split into
hot and cold parts (its function range then spans both; the unwinder takes the
cold part's CFI), and Debian's python3 and ovf's runtime have such functions:
`bt` stops a frame or two above ovf_stop_event and never reaches
_PyEval_EvalFrameDefault. So this walks CPython's own frame list instead, as
gdb's libpython.py does, from `_PyRuntime` with python3.11-dbg's types, only
reading memory, and prints it in py-bt's format:

    (lldb) command script import tests/e2e/lldb_pystack.py
    (lldb) script lldb_pystack.show(lldb.debugger)
"""

import linecache

import lldb

MAX_FRAMES = 512


def _read_varint(table, i):
    b = table[i]
    i += 1
    value = b & 63
    shift = 0
    while b & 64:
        b = table[i]
        i += 1
        shift += 6
        value |= (b & 63) << shift
    return value, i


def _read_signed_varint(table, i):
    value, i = _read_varint(table, i)
    return (-(value >> 1) if value & 1 else value >> 1), i


def addr2line(table, first_line, offset):
    """CPython 3.11's PyCode_Addr2Line over the co_linetable bytes: the line of
    the instruction at byte `offset`, or -1."""
    line, address, i = first_line, 0, 0
    while i < len(table):
        head = table[i]
        i += 1
        code, end = (head >> 3) & 15, address + 2 * ((head & 7) + 1)
        if code == 15:  # no location
            delta = None
        elif code == 14:  # long form: line delta, end line, column, end column
            delta, i = _read_signed_varint(table, i)
            for _ in range(3):
                _, i = _read_varint(table, i)
        elif code == 13:  # no column
            delta, i = _read_signed_varint(table, i)
        elif code >= 10:  # one line form
            delta, i = code - 10, i + 2
        else:  # short form
            delta, i = 0, i + 1
        if delta is not None:
            line += delta
        if address <= offset < end:
            return -1 if delta is None else line
        address = end
    return -1


def _bytes(process, target, obj, what):
    """The payload of a PyBytesObject (`what` "bytes") or an ASCII/compact str."""
    if not obj.GetValueAsUnsigned():
        return b""
    error = lldb.SBError()
    if what == "bytes":
        bytes_obj = obj.Cast(target.FindFirstType("PyBytesObject").GetPointerType())
        size = bytes_obj.GetValueForExpressionPath("->ob_base.ob_size").GetValueAsSigned()
        start = bytes_obj.GetValueForExpressionPath("->ob_sval").GetLoadAddress()
        return process.ReadMemory(start, max(0, min(size, 1 << 20)), error) or b""
    header = target.FindFirstType("PyASCIIObject").GetByteSize()
    text = process.ReadCStringFromMemory(obj.GetValueAsUnsigned() + header, 4096, error)
    return (text or "").encode()


def python_frames(debugger):
    """[(filename, line, function)] of the current thread's Python stack, innermost first."""
    target = debugger.GetSelectedTarget()
    process = target.GetProcess()
    tstate_type = target.FindFirstType("PyThreadState").GetPointerType()
    current = target.FindFirstGlobalVariable("_PyRuntime").GetValueForExpressionPath(
        ".gilstate.tstate_current._value"
    )
    frame = current.Cast(tstate_type).GetValueForExpressionPath("->cframe->current_frame")
    frames = []
    while frame.GetValueAsUnsigned() and len(frames) < MAX_FRAMES:
        code = frame.GetValueForExpressionPath("->f_code")
        start = code.GetValueForExpressionPath("->co_code_adaptive").GetLoadAddress()
        offset = frame.GetValueForExpressionPath("->prev_instr").GetValueAsUnsigned() - start
        table = _bytes(process, target, code.GetValueForExpressionPath("->co_linetable"), "bytes")
        first = code.GetValueForExpressionPath("->co_firstlineno").GetValueAsSigned()
        frames.append(
            (
                _bytes(
                    process, target, code.GetValueForExpressionPath("->co_filename"), "str"
                ).decode(),
                addr2line(table, first, offset),
                _bytes(
                    process, target, code.GetValueForExpressionPath("->co_name"), "str"
                ).decode(),
            )
        )
        frame = frame.GetValueForExpressionPath("->previous")
    return frames


def show(debugger):
    print("Python frames (most recent call first):")
    for filename, line, function in python_frames(debugger):
        print(f'  File "{filename}", line {line}, in {function}')
        source = linecache.getline(filename, line).strip() if line > 0 else ""
        if source:
            print(f"    {source}")
