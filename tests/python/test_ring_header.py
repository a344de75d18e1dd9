"""The ring header as a reader sees it: raw bytes at ovf_state's address."""

import ctypes
import os
import subprocess

from build_paths import PACKAGE_PARENT, PYTHON

PROBE = """
import ctypes, struct, sys
from ovf import _ovf
addr = _ovf.state_address()
raw = ctypes.string_at(addr, 1024)
magic, version, header, record, capacity = struct.unpack_from("<QIIII", raw, 0)
pid, rank, local_rank, world, device = struct.unpack_from("<iiiii", raw, 96)
print(hex(magic), version, header, record, capacity, pid, rank, local_rank, world, device)
"""


def probe(**env):
    full = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
    full.update(env, PYTHONPATH=PACKAGE_PARENT)
    p = subprocess.run([PYTHON, "-c", PROBE], capture_output=True, text=True, env=full, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.split()


def test_header_identity_and_defaults():
    fields = probe()
    assert fields[:5] == ["0x474e49522d46564f", "9", "1024", "256", "65536"]
    assert fields[6:] == ["-1", "-1", "1", "-1"]


def test_rank_and_capacity_come_from_the_environment():
    fields = probe(RANK="1", LOCAL_RANK="1", WORLD_SIZE="2", OVF_RING_CAPACITY="1000")
    assert fields[4] == "1024"  # rounded up to a power of two
    assert fields[6:9] == ["1", "1", "2"]


def test_pid_is_the_process_id():
    from ovf import _ovf

    pid = ctypes.c_int32.from_address(_ovf.state_address() + 96).value
    assert pid == os.getpid()


def test_package_version_matches_the_runtime_and_import_is_lazy():
    probe = (
        "import sys, ovf; assert 'torch' not in sys.modules; "
        "from ovf import _ovf; print(ovf.__version__ == _ovf.__version__)"
    )
    p = subprocess.run(
        [PYTHON, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=PACKAGE_PARENT),
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "True"
