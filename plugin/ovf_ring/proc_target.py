"""A Target over /proc/PID/mem: reads a live process with no debugger.

For tools and tests that look at a process of the same user (or this very
process) without stopping it. A process that is running may tear records
while they are read; the ring's sequence numbers catch that.
"""

import os

from .target import Target, TargetMemoryError


class ProcTarget(Target):
    def __init__(self, pid, symbols):
        """`symbols` maps data symbol names to addresses (the process cannot be
        asked: e.g. {"ovf_state": ovf._ovf.state_address()})."""
        self.pid = pid
        self.symbols = dict(symbols)
        self._mem = open(f"/proc/{pid}/mem", "r+b" if pid == os.getpid() else "rb", buffering=0)

    def close(self):
        self._mem.close()

    def kind(self):
        return "live"

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
        return self.symbols.get(name)

    def memory_regions(self):
        return writable_regions(self.pid)


def writable_regions(pid):
    """[(start, end, path)] of a local process's writable mappings, from
    /proc/PID/maps (the magic scan's search space); [] when it cannot be read
    (a remote process, one that exited)."""
    regions = []
    try:
        with open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) >= 2 and "w" in fields[1]:
                    start, end = (int(x, 16) for x in fields[0].split("-"))
                    regions.append((start, end, fields[5].strip() if len(fields) > 5 else ""))
    except OSError:
        pass
    return regions
