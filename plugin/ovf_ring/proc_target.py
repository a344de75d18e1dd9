"""A Target over /proc/PID/mem: reads a live process with no debugger.

For tools and tests that look at a process of the same user (or this very
process) without stopping it: `python3 -m ovf.ranks --pid` reads every rank
of a job this way. A process that is running may tear records while they are
read; the ring's sequence numbers catch that.
"""

import errno
import os

from .elf import RUNTIME_LIBRARY, missing_file, runtime_symbol
from .errors import OvfError
from .target import Target, TargetMemoryError


class ProcTarget(Target):
    def __init__(self, pid, symbols=None):
        """`symbols` maps data symbol names to addresses where the caller knows
        them (this very process: {"ovf_state": ovf._ovf.state_address()}); other
        names are looked up in the runtime library's .dynsym at its load address
        in /proc/PID/maps. OvfError: the process's memory cannot be opened."""
        self.process_id = pid
        self.symbols = dict(symbols or {})
        self._maps = None
        try:
            self._mem = open(f"/proc/{pid}/mem", "r+b" if pid == os.getpid() else "rb", buffering=0)
        except OSError as e:
            raise OvfError(_open_error(pid, e)) from None

    def close(self):
        self._mem.close()

    def kind(self):
        return "live"

    def pid(self):
        return self.process_id

    def read_memory(self, address, size):
        try:
            self._mem.seek(address)
            data = self._mem.read(size)
        except (OSError, OverflowError, ValueError) as e:
            raise TargetMemoryError(f"cannot read {size} bytes at 0x{address:x}: {e}") from None
        if data is None or len(data) != size:
            raise TargetMemoryError(f"cannot read {size} bytes at 0x{address:x}")
        return data

    def write_memory(self, address, data):
        try:
            self._mem.seek(address)
            self._mem.write(data)
        except (OSError, OverflowError, ValueError) as e:
            raise TargetMemoryError(f"cannot write at 0x{address:x}: {e}") from None

    def find_data_symbol(self, name):
        if name not in self.symbols:
            self.symbols[name] = runtime_symbol(self.mappings(), name)
        return self.symbols[name]

    def mappings(self):
        if self._maps is None:
            self._maps = file_mappings(self.process_id)
        return self._maps

    def memory_regions(self):
        return writable_regions(self.process_id)

    def missing_library(self, name_part):
        return missing_file(self.mappings(), name_part)


def _open_error(pid, e):
    if e.errno == errno.ENOENT:
        return f"ovf: there is no process {pid} on this host"
    if e.errno in (errno.EACCES, errno.EPERM):
        return (
            f"ovf: cannot read the memory of process {pid} ({e.strerror}): it needs the same "
            "user and, where Yama's ptrace_scope is 1 or more, CAP_SYS_PTRACE; `gcore "
            f"{pid}` and then the core file works as well"
        )
    return f"ovf: cannot read the memory of process {pid}: {e.strerror}"


def _maps(pid):
    """[(start, end, permissions, file offset, path)] of /proc/PID/maps; [] when it
    cannot be read (a remote process, one that exited)."""
    found = []
    try:
        with open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) < 5:
                    continue
                start, end = (int(x, 16) for x in fields[0].split("-"))
                path = fields[5].strip() if len(fields) > 5 else ""
                found.append((start, end, fields[1], int(fields[2], 16), path))
    except (OSError, ValueError):
        pass
    return found


def file_mappings(pid):
    """[(start, end, file offset, path)] of the files a local process maps, as a
    core's NT_FILE note lists them."""
    return [(a, b, offset, path) for a, b, _, offset, path in _maps(pid) if path.startswith("/")]


def writable_regions(pid):
    """[(start, end, path)] of a local process's writable mappings (the magic
    scan's search space); [] when they cannot be read."""
    return [(a, b, path) for a, b, perms, _, path in _maps(pid) if "w" in perms]


def runtime_processes():
    """{pid: job} of this host's processes that have ovf's runtime library mapped
    and whose maps this user may read; job: what tells one torch.distributed job
    from another ("127.0.0.1:29500 run 7f3a"), "" outside one."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/maps") as maps:
                if any(RUNTIME_LIBRARY in line for line in maps):
                    found[int(entry)] = _job(int(entry))
        except OSError:
            continue  # another user's, or it exited
    return dict(sorted(found.items()))


def _job(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            pairs = [item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item]
    except OSError:
        return ""
    env = {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}
    if "MASTER_PORT" not in env:
        return ""
    run = env.get("TORCHELASTIC_RUN_ID")
    return f"{env.get('MASTER_ADDR', '?')}:{env['MASTER_PORT']}" + (f" run {run}" if run else "")
