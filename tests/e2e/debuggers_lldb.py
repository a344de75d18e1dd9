"""The e2e tests' LLDB: runs a test's commands in one batch-mode LLDB (`lldb -b`, through
`command source -e false` so that commands after a failing one still run) with ovf_lldb.py
loaded, and knows LLDB's spelling of the commands and messages that differ from gdb's
(debuggers_gdb.py)."""

import os
import re
import shutil
import tempfile

from bounded_process import TIMEOUT, clean_env, run_bounded
from build_paths import BUILD, FRONT_ENDS, LLDB_LAUNCHER, PYTHON
from debuggers_base import CUT_MARK, Debugger, _check

LLDB_SCRIPT = os.path.join(FRONT_ENDS, "lldb", "ovf_lldb.py")
LLDB_INDEX_CACHE = os.path.join(BUILD, "lldb-index-cache")


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
        cpp_names=False,  # LLDB's index cache (below) keeps its symbol tables between runs
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
        # LLDB's own index cache (symbol tables it parsed, by module UUID) is kept under the
        # build: pip's torch loads 3 GB of libraries whose symbols every session parses
        # again otherwise (about 3.5 s a session of the ~120 an e2e run starts).
        shell = (
            'exec "$0" --no-lldbinit -b -O "settings set target.input-path /dev/null" '
            '-O "settings set target.output-path /proc/$$/fd/1" '
            '-O "settings set target.error-path /proc/$$/fd/1" '
            '-O "settings set symbols.enable-lldb-index-cache true" '
            f'-O "settings set symbols.lldb-index-cache-path {LLDB_INDEX_CACHE}" "$@"'
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
        # `memory write` reads its values as hex: 10 would write 16
        return f"memory write -s 4 -- '(char *)&{symbol} + {offset}' {value:#x}"

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
