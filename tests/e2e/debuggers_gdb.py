"""The e2e tests' gdb: runs a test's commands in one batch-mode gdb (`gdb -batch -nx -ex ...`)
with ovf-gdb.py loaded, and knows gdb's spelling of the commands and messages that differ
from LLDB's (debuggers_lldb.py)."""

import os
import re
import shutil
import subprocess

from bounded_process import TIMEOUT, clean_env, run_bounded
from build_paths import FRONT_ENDS, GDB_LAUNCHER, PYTHON
from debuggers_base import CUT_MARK, Debugger, _check

GDB_SCRIPT = os.path.join(FRONT_ENDS, "gdb", "ovf-gdb.py")


class Gdb(Debugger):
    name = "gdb"
    attach = "gdb -p PID"
    list_breakpoints = "info breakpoints"
    py_bt = ["ovf py-bt"]
    # gdb's report of a stop at ovf_stop_event, from the blank line it prints first
    # gdb names the thread only in a program that has started more than one
    HIT = re.compile(r'\n(?:Thread 1 "[^"]+" hit )?Breakpoint 1, ovf_stop_event \(')

    def available(self):
        if shutil.which("gdb") is None:
            return "gdb is not installed"
        out = subprocess.run(
            ["gdb", "-batch", "-nx", "-ex", "python print('py-ok')"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return None if "py-ok" in out.stdout else "gdb has no Python"

    def run(
        self,
        commands,
        program=None,
        core=None,
        pid=None,
        cwd=None,
        env=None,
        timeout=TIMEOUT,
        load=True,
        inferior_traceback=False,
        cpp_names=False,
    ):
        argv = ["gdb", "-batch", "-nx", "-iex", "set debuginfod enabled off"]
        if not cpp_names:
            # gdb demangles every C++ symbol of every library as it loads it: pip's torch
            # (libtorch_cpu and libtorch_cuda, 1 GB with 600k symbols, no DWARF) costs
            # about 8 s of CPU a session, most of a gdb test's time, and gdb keeps no cache
            # of it (LLDB does, see debuggers_lldb.py). ovf's stop function and its ring are
            # C symbols; only tests that name C++ functions (test_cpp_api, cpp_names=True)
            # and the launcher's tests run gdb as users do, demangling.
            argv += ["-iex", "set demangle-style none"]
        if load:
            argv += ["-x", GDB_SCRIPT]
        for command in commands:
            argv += ["-ex", command]
        if program is not None:
            argv += ["--args", *program]
        elif core is not None:
            argv += [PYTHON, str(core)]
        elif pid is not None:
            argv += ["-p", str(pid)]
        else:
            argv.append(PYTHON)
        text = run_bounded(argv, timeout, cwd=cwd, env=env or clean_env())
        _check(text, inferior_traceback)
        return text

    def cut(self):
        return f"echo {CUT_MARK}\\n"

    def hits(self, out):
        return len(self.HIT.findall(out))

    def stop_report(self, event):
        """A regex for the debugger's own report of a stop at ovf_stop_event(..., event)."""
        return (
            # (the thread's name is the program's: "python3", a venv's "python"; none in a
            # program of one thread)
            r'(?:Thread 1 "[^"]+" hit )?Breakpoint 1, ovf_stop_event \(record=0x[0-9a-f]+,'
            rf' event={event}\)'
        )

    def exit_code(self, out):
        """The inferior's exit status as the debugger reported it, or None."""
        if re.search(r"^\[Inferior 1 \(process \d+\) exited normally\]$", out, re.M):
            return 0
        m = re.search(r"^\[Inferior 1 \(process \d+\) exited with code (\d+)\]$", out, re.M)
        return int(m.group(1), 8) if m else None

    def unknown_subcommand(self, name):
        return f'Undefined ovf command: "{name}".  Try "help ovf".'

    def gcore(self, path):
        return f"gcore {path}"

    def refuses_core(self, out):
        """Whether the debugger would not open the core file at all (ovf not reached)."""
        return False

    def poke_u32(self, symbol, offset, value):
        return f"set {{unsigned int}}((char *)&{symbol} + {offset}) = {value}"

    def disable(self, number):
        return f"disable {number}"

    def delete(self, number):
        return f"delete {number}"

    def breakpoint_listed(self, out, pending, enabled):
        """Whether `info breakpoints` listed breakpoint 1 on ovf_stop_event as asked."""
        where = r"<PENDING>\s+ovf_stop_event" if pending else r"0x[0-9a-f]+ in ovf_stop_event"
        return (
            re.search(rf"^1\s+breakpoint\s+keep {'y' if enabled else 'n'}\s+{where}", out, re.M)
            is not None
        )

    def no_breakpoints(self, out):
        # gdb 13; gdb 16 says "No breakpoints, watchpoints, tracepoints, or catchpoints."
        return re.search(r"^No breakpoints(,| or) watchpoints", out, re.M) is not None

    def search_path(self, old_dir, new_dir):
        """The command that points the debugger at a library that moved from `old_dir` to
        `new_dir`."""
        return f"set solib-search-path {new_dir}"

    def launcher(self, commands, program):
        """argv of ovf-gdb running `commands` in batch mode on `program`."""
        argv = [GDB_LAUNCHER, "-batch", "-nx"]
        for command in commands:
            argv += ["-ex", command]
        return argv + ["--args", *program]

    # C++ programs: the native stack and a frame's locals
    show_locals = "info locals"

    def select_function(self, function):
        """A command that selects the innermost frame of `function`."""
        return f"frame function {function}"

    def native_frames(self, backtrace):
        """[(function, source file, line)] of `bt`'s output, innermost first (file and
        line None where the debugger shows none)."""
        return [
            (re.sub(r"\([^()]*\)$", "", name), path or None, int(line) if line else None)
            for name, path, line in re.findall(
                r"^#\d+\s+(?:0x[0-9a-f]+ in )?(.+?) \(.*?\)(?: at (\S+):(\d+)| from \S+)?$",
                backtrace,
                re.M,
            )
        ]

    def local_tensor(self, text, name):
        """Whether `show_locals` printed the at::Tensor `name`, alive (its impl pointer)."""
        pattern = rf"^{name} = \{{<at::TensorBase> = \{{impl_ = \{{target_ = 0x[0-9a-f]+\}}\}}"
        return re.search(pattern, text, re.M) is not None

    def local_value(self, text, name, cpp_type, members):
        """Whether `show_locals` printed `name` (a `cpp_type`) with these members (`a = b`)."""
        return re.search(rf"^{name} = \{{{re.escape(members)}\}}$", text, re.M) is not None

    def python_line(self, out, function, source):
        """Whether the Python stack (py_bt's output) has `function` in diverge.py at `source`."""
        return (
            re.search(
                rf'File ".*diverge.py", line \d+, in {function}(?:    <- [^\n]*)?\n'
                rf"    {re.escape(source)}",
                out,
            )
            is not None
        )
