"""Helpers of the end-to-end tests: real gdb and real LLDB, a real Python with torch (OVF_PYTHON,
default the one running pytest: the venv's on the main leg, Debian's on trixie), one debugger
process per test, each under a timeout. The ovf under test is tests/python/build_paths.py's:
the build tree (OVF_BUILD_DIR, default build/), or with OVF_TEST_INSTALLED=1 the one pip
installed for the interpreter running pytest.

A test body is written once and runs under both debuggers through the `debugger` fixture
(conftest.py): a Debugger runs a list of commands in batch mode (`gdb -batch -nx -ex ...`,
`lldb -b -o ...`) and knows the few commands and messages that differ between the two.
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile

import pytest
from build_paths import (  # the ovf under test and the interpreter (tests/python, conftest.py)
    FRONT_ENDS,
    GDB_LAUNCHER,
    LLDB_LAUNCHER,
    PACKAGE,
    PACKAGE_PARENT,
    PYTHON,
)

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(TOP, "tests", "e2e", "scripts", "diverge.py")
DIVERGE = ["--inf-at", "blocks.1.amp:2"]  # diverge.py's usual run: inf in batch 2
GDB_SCRIPT = os.path.join(FRONT_ENDS, "gdb", "ovf-gdb.py")
LLDB_SCRIPT = os.path.join(FRONT_ENDS, "lldb", "ovf_lldb.py")
TIMEOUT = 120
CUT_MARK = "----8<----"  # printed by Debugger.cut: where a command's output ends



def clean_env(**extra):
    """A minimal environment: nothing of the caller's PYTHONPATH or OVF_* leaks in."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "OVF_PACKAGE_DIR": PACKAGE,
    }
    env.update(extra)
    return env


def _tree(pid):
    """`pid` and its descendants (to kill what a timed-out debugger left running)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def run_bounded(argv, timeout=TIMEOUT, **kwargs):
    """stdout+stderr of `argv`; on timeout the whole process tree is killed (a debugger's
    inferior may hold the output pipe open) and the test fails with what was printed."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
        **kwargs,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for pid in reversed(_tree(proc.pid)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        out, _ = proc.communicate(timeout=30)
        pytest.fail(f"{os.path.basename(argv[0])} ran longer than {timeout} s; its output:\n{out}")
    return out


def _check(text, inferior_traceback):
    """Whatever happened, the debugger side never shows a Python traceback."""
    if not inferior_traceback:
        assert "Traceback" not in text.replace("Traceback (most recent call first)", ""), text
    assert "Python Exception" not in text, text
    assert "ovf_plugin" not in text and "ovf_gdb" not in text and "ovf_lldb_sb" not in text, text
    assert "internal error" not in text, text


class Debugger:
    """What a test body needs from one debugger."""

    name = ""
    attach = ""  # how the plugin's messages name attaching: "gdb -p PID"
    list_breakpoints = ""

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
    ):
        """Runs `commands` in one batch-mode debugger with ovf loaded (unless not `load`) on
        `program` (argv), a `core` file of PYTHON, or the process `pid` (or on PYTHON alone);
        returns its output. Commands after a failing one still run."""
        raise NotImplementedError

    def cut(self):
        """A command that prints CUT_MARK on a line of its own."""
        raise NotImplementedError

    def hits(self, out):
        """How many times the debugger reported a stop at ovf_stop_event."""
        raise NotImplementedError


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
    ):
        argv = ["gdb", "-batch", "-nx", "-iex", "set debuginfod enabled off"]
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


class Lldb(Debugger):
    name = "lldb"
    attach = "lldb -p PID"
    list_breakpoints = "breakpoint list"
    # LLDB has no py-bt of its own: `bt` shows the stop in ovf_stop_event (LLDB 19 cannot
    # unwind further through GCC's hot/cold-split functions), `ovf py-bt` the Python stack.
    py_bt = ["bt", "ovf py-bt"]
    # LLDB's report of a stop at ovf_stop_event
    HIT = re.compile(
        r"^\* thread #1, name = '[^']+', stop reason = breakpoint 1\.1\n"
        r"    frame #0: 0x[0-9a-f]+ libovf_runtime\.so`ovf_stop_event",
        re.M,
    )

    def __init__(self, executable="lldb-19"):
        self.executable = executable

    def available(self):
        if shutil.which(self.executable) is None:
            return f"{self.executable} is not installed"
        out = run_bounded(
            [self.executable, "--no-lldbinit", "-b", "-o", "script print('py-' + 'ok')"], 60
        )
        return None if "py-ok" in out else f"{self.executable} has no Python"

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
    ):
        # `lldb -b -o` stops at the first command that fails, whatever
        # interpreter.stop-command-source-on-error says; `command source -e false` goes on.
        with tempfile.NamedTemporaryFile("w", prefix="ovf-e2e-", suffix=".lldb", delete=False) as f:
            f.write("".join(command + "\n" for command in commands))
        pre = []
        if load:
            pre += ["-O", f"command script import {LLDB_SCRIPT}"]
        argv = [*pre, "-o", f"command source -e false {f.name}"]
        if program is not None:
            argv += ["--", *program]
        elif core is not None:
            argv += ["-c", str(core), PYTHON]
        elif pid is not None:
            argv += ["-p", str(pid)]
        else:
            argv.append(PYTHON)
        # The inferior writes straight into lldb's own stdout, as under gdb (by default
        # LLDB gives it a pseudo-terminal and copies its output when it gets to it):
        # /proc/$$/fd/1 is lldb's stdout once sh has exec'ed it.
        shell = (
            'exec "$0" --no-lldbinit -b -O "settings set target.input-path /dev/null" '
            '-O "settings set target.output-path /proc/$$/fd/1" '
            '-O "settings set target.error-path /proc/$$/fd/1" "$@"'
        )
        try:
            text = run_bounded(
                ["sh", "-c", shell, self.executable, *argv],
                timeout,
                cwd=cwd,
                env=env or clean_env(),
            )
        finally:
            os.unlink(f.name)
        _check(text, inferior_traceback)
        # LLDB echoes each command (gdb does not): drop the cut's, so that what
        # precedes a cut is the previous command's output alone, as under gdb.
        return text.replace(f"(lldb) {self.cut()}\n", "")

    def cut(self):
        half = len(CUT_MARK) // 2  # the echoed command must not hold the mark
        return f"script print('{CUT_MARK[:half]}' + '{CUT_MARK[half:]}')"

    def hits(self, out):
        return len(self.HIT.findall(out))

    def stop_report(self, event):
        return (
            r"stop reason = breakpoint 1\.1\n    frame #0: 0x[0-9a-f]+ "
            rf"libovf_runtime\.so`ovf_stop_event\(record=0x[0-9a-f]+, event={event}\)"
        )

    def exit_code(self, out):
        m = re.search(r"^Process \d+ exited with status = (\d+) ", out, re.M)
        return int(m.group(1)) if m else None

    def unknown_subcommand(self, name):
        return f"invalid command 'ovf {name}'."

    def gcore(self, path):
        return f"process save-core -s modified-memory {path}"  # the default style keeps only stacks

    def refuses_core(self, out):
        return (
            re.search(r"^error: (Unknown core file format|Unexpected EOF)", out, re.M) is not None
        )

    def poke_u32(self, symbol, offset, value):
        return f"memory write -s 4 -- '(char *)&{symbol} + {offset}' {value}"

    def disable(self, number):
        return f"breakpoint disable {number}"

    def delete(self, number):
        return f"breakpoint delete {number}"

    def breakpoint_listed(self, out, pending, enabled):
        if pending:
            where = r"locations = 0 \(pending\)"
        else:
            where = r"locations = 1, resolved = 1, hit count = 0" + (
                "" if enabled else r" Options: disabled"
            )
        return re.search(rf"^1: name = 'ovf_stop_event', {where}", out, re.M) is not None

    def no_breakpoints(self, out):
        return "No breakpoints currently set." in out

    def search_path(self, old_dir, new_dir):
        return f"settings append target.exec-search-paths {new_dir}"

    def launcher(self, commands, program):
        argv = [LLDB_LAUNCHER, "--no-lldbinit", "-b"]
        for command in commands:
            argv += ["-o", command]
        return argv + ["--", *program]

    show_locals = "frame variable"

    def select_function(self, function):
        # LLDB has no `frame function`; its script interpreter selects the frame.
        return (
            "script [lldb.thread.SetSelectedFrame(f.idx) for f in lldb.thread"
            f" if (f.GetFunctionName() or '').startswith('{function}(')][:1]"
        )

    def native_frames(self, backtrace):
        return [
            (name, path or None, int(line) if line else None)
            for name, path, line in re.findall(
                r"^\s+\*? ?frame #\d+: 0x[0-9a-f]+ [^`\n]+`(.+?)(?:\(.*\))?"
                r"(?: at ([^:\s]+):(\d+)(?::\d+)?| \+ \d+)?$",
                backtrace,
                re.M,
            )
        ]

    def local_tensor(self, text, name):
        pattern = (
            rf"^\(at::Tensor\) {name} = \{{\n\s+at::TensorBase = \{{\n"
            r"\s+impl_ = \(target_ = 0x[0-9a-f]+\)"
        )
        return re.search(pattern, text, re.M) is not None

    def local_value(self, text, name, cpp_type, members):
        pattern = rf"^\({re.escape(cpp_type)}\) {name} = \({re.escape(members)}\)$"
        return re.search(pattern, text, re.M) is not None

    def python_line(self, out, function, source):
        # The stop is in ovf_stop_event, and CPython's own frames hold the forward's line.
        return (
            self.HIT.search(out) is not None
            and re.search(
                r"^  \* frame #0: 0x[0-9a-f]+ libovf_runtime\.so`ovf_stop_event", out, re.M
            )
            is not None
            and re.search(
                rf'File ".*diverge.py", line \d+, in {function}(?:    <- [^\n]*)?\n'
                rf"    {re.escape(source)}",
                out,
            )
            is not None
        )


DEBUGGERS = {"gdb": Gdb(), "lldb": Lldb()}


def abort_core(tmp_path, package_parent=None, args=DIVERGE, script=SCRIPT, timeout=TIMEOUT):
    """A kernel core of `script` (diverge.py) run under `python3 -m ovf --on-nan abort` with the
    ovf package in `package_parent`: (core path, the run's stdout); skips where the kernel
    writes none here."""
    with open("/proc/sys/kernel/core_pattern") as f:
        if f.read().strip() not in ("core", "core.%p"):
            pytest.skip("kernel cores do not go to the working directory here (core_pattern)")
    env = clean_env(PYTHONPATH=package_parent or PACKAGE_PARENT)
    out = subprocess.run(
        [
            "sh",
            "-c",
            f"ulimit -c unlimited && exec {PYTHON} -m ovf --on-nan abort {script} {' '.join(args)}",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode in (-signal.SIGABRT, 128 + signal.SIGABRT), out.stderr
    cores = [p for p in os.listdir(tmp_path) if p.startswith("core")]
    if not cores:
        pytest.skip("no core file was written (core dumps disabled?)")
    return tmp_path / cores[0], out.stdout


def between(text, start, end=CUT_MARK):
    """The part of `text` from `start` up to `end`."""
    at = text.find(start)
    stop = text.find(end, at) if at >= 0 else -1
    assert at >= 0 and stop >= 0, f"no {start!r} ... {end!r} in:\n{text}"
    return text[at:stop]


def run_python(args, cwd=None, env=None, timeout=TIMEOUT):
    out = subprocess.run(
        [PYTHON, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env or clean_env(PYTHONPATH=PACKAGE_PARENT),
    )
    return out


def reference_report(script_args):
    """What ovf.DebugUnderflowOverflow prints for the same run: (batch, module, report text)."""
    out = run_python([SCRIPT, "--reference", *script_args])
    assert "DebugUnderflowOverflow: inf/nan detected" in out.stderr, out.stderr
    report = out.stdout[out.stdout.index("\nDetected inf/nan") :]
    batch = int(re.search(r"Detected inf/nan during batch_number=(\d+)", report).group(1))
    headers = re.findall(r"^ {17} (\S*) (\S+)$", report, re.M)
    return batch, headers[-1], report


def stop_summary(text):
    """(title, batch, module, class) of the first ovf stop summary in a debugger's output."""
    m = re.search(r"^ovf: (.*) at batch (\d+)(?:, frame \d+)?\n     (\S*) \((\S+)\):", text, re.M)
    assert m, text
    return m.group(1), int(m.group(2)), m.group(3), m.group(4)
