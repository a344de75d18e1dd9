"""Hostile input, round three (issue 23), in Python mode and in the readers the
debuggers share with it: what an --if expression makes is bounded before it is made,
options the debuggers refuse are refused by `python3 -m ovf` in the same words, and
`ovf py-locals` says what the event snapshot did not keep. Each run of ovf is a
child process of its own."""

import json
import os
import struct
import subprocess
import sys
from types import SimpleNamespace

import pytest
from build_paths import PACKAGE_PARENT, PYTHON
from test_plugin_layout import run_against_ring_h

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "plugin"))
from ovf_ring import layout, python_stack, snapshot  # noqa: E402

NAN_SCRIPT = os.path.join(HERE, "scripts", "nan_at_batch2.py")
# An event's fields where the sizes come from: batch and numel as a big run has them.
FIELDS = {
    "absmax": 1.0,
    "absmin": 1.0,
    "nan": 0,
    "inf": 0,
    "module": "m",
    "cls": "",
    "batch": 2,
    "kind": "output",
    "label": "output",
    "dtype": "float32",
    "event": "nan",
    "numel": 1000,
    "op": "",
    "producer": True,
}
# The evaluator alone, in a child whose address space is a quarter of a gigabyte: what
# it refuses must be refused before it is made, and at once.
EVALUATE = """
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (256 << 20, 256 << 20))
from ovf_plugin.condition import Condition
from ovf_ring.errors import OvfError
start = time.monotonic()
try:
    Condition(sys.argv[1])(json.loads(sys.argv[2]))
    print("accepted")
except OvfError as e:
    print(e)
print(f"{time.monotonic() - start:.3f}")
"""


def env(**extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith("OVF_") and k != "PYTHONPATH"}
    e["PYTHONPATH"] = PACKAGE_PARENT
    e.update(extra)
    return e


def evaluate(expression):
    p = subprocess.run(
        [PYTHON, "-c", EVALUATE, expression, json.dumps(FIELDS)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env(),
    )
    assert p.returncode == 0 and p.stderr == "", p.stderr
    message, seconds = p.stdout.splitlines()
    assert float(seconds) < 2, seconds
    return message


def python_mode(*options):
    """`python3 -m ovf OPTIONS nan_at_batch2.py`: exit code, stderr, and the most memory
    it held (KiB), measured by a parent of its own."""
    measure = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "sys.stdout.write(p.stderr)\n"
        "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    p = subprocess.run(
        [PYTHON, "-c", measure, PYTHON, "-m", "ovf", *options, NAN_SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        env=env(),
    )
    *stderr, last = p.stdout.splitlines(keepends=True)
    code, kib = map(int, last.split())
    return code, "".join(stderr), kib


@pytest.mark.parametrize(
    "expression, message",
    [
        (
            "'%2147483647d' % 1 == ''",
            "ovf: --if \"'%2147483647d' % 1 == ''\": '%2147483647d' % 1 would make a string "
            "of 2147483647 characters (at most 10000)",
        ),
        (
            "'%.*f' % (10**9, 1.0) == ''",
            "ovf: --if \"'%.*f' % (10**9, 1.0) == ''\": '%.*f' % (10 ** 9, 1.0) would make a "
            "string of at least 1000000000 characters (at most 10000)",
        ),
        (
            "len((0,)*10**9) > 0",
            "ovf: --if 'len((0,)*10**9) > 0': (0,) * 10 ** 9 would make a tuple of 1000000000 "
            "items (at most 10000)",
        ),
        (
            "len((0,)*10**8) > 0",
            "ovf: --if 'len((0,)*10**8) > 0': (0,) * 10 ** 8 would make a tuple of 100000000 "
            "items (at most 10000)",
        ),
        (
            "len(('ab',) * 5000 + ('c',)) > 0",
            "ovf: --if \"len(('ab',) * 5000 + ('c',)) > 0\": ('ab',) * 5000 would make a tuple "
            "of 5000 items holding 15000 items and characters in all (at most 10000)",
        ),
        (
            "'x' * 6000 + 'y' * 6000 == ''",
            "ovf: --if \"'x' * 6000 + 'y' * 6000 == ''\": 'x' * 6000 + 'y' * 6000 would make a "
            "string of 12000 characters (at most 10000)",
        ),
        # the sizes come from the event's fields: refused when the event is decided
        (
            "len((0,) * (batch * 10**9)) > 0",
            "ovf: --if 'len((0,) * (batch * 10**9)) > 0': (0,) * (batch * 10 ** 9) would make "
            "a tuple of 2000000000 items (at most 10000)",
        ),
        (
            "'%*d' % (numel * 1000, 1) == ''",
            "ovf: --if \"'%*d' % (numel * 1000, 1) == ''\": '%*d' % (numel * 1000, 1) would "
            "make a string of 1000000 characters (at most 10000)",
        ),
        (
            "module * numel**3 == ''",
            "ovf: --if \"module * numel**3 == ''\": module * numel ** 3 would make a string of "
            "1000000000 characters (at most 10000)",
        ),
        # within the bound: made, and it holds
        ("'%5.2f|%-3s|%%' % (absmax, module) == ' 1.00|m  |%'", "accepted"),
        ("len((module,) * 5000) == 5000 and len('ab' * 5000) == 10000", "accepted"),
    ],
)
def test_if_refuses_what_would_be_too_big_before_making_it(expression, message):
    assert evaluate(expression) == message


def test_python_mode_refuses_a_huge_constant_string_at_once_and_small():
    code, stderr, kib = python_mode("--if", "'%2147483647d' % 1 == ''")
    assert (code, stderr) == (
        2,
        "ovf: --if \"'%2147483647d' % 1 == ''\": '%2147483647d' % 1 would make a string "
        "of 2147483647 characters (at most 10000)\n",
    )
    assert kib < 1536 << 10, kib  # torch's own import is most of it; the string was 2 GB


def test_python_mode_refuses_a_huge_tuple_sized_by_a_field_when_the_event_comes():
    code, stderr, kib = python_mode("--if", "len((0,) * (batch * 10**9)) > 0")
    assert code == 1 and "ovf.NonFiniteError" in stderr, stderr
    assert (
        "ovf: --if 'len((0,) * (batch * 10**9)) > 0': (0,) * (batch * 10 ** 9) would make a "
        "tuple of 2000000000 items (at most 10000); the event stands\n" in stderr
    )
    assert kib < 1536 << 10, kib


@pytest.mark.parametrize(
    "options, message",
    [
        # the debuggers' `ovf trace-batches 1,,3` says the same (tests/e2e/test_hostile_inputs.py)
        (
            ["--trace-batches", "1,,3"],
            "ovf: --trace-batches '1,,3' has an empty batch number: give batch numbers "
            "separated by single commas, e.g. 1,3",
        ),
        (
            ["--trace-batches", "1,3,"],
            "ovf: --trace-batches '1,3,' has an empty batch number: give batch numbers "
            "separated by single commas, e.g. 1,3",
        ),
        (
            ["--if", ""],
            "ovf: --if is empty: give an expression over the event's fields, e.g. "
            "--if 'absmax > 1e4', or leave --if out",
        ),
        (
            ["--if", " \t "],
            "ovf: --if is empty: give an expression over the event's fields, e.g. "
            "--if 'absmax > 1e4', or leave --if out",
        ),
    ],
)
def test_python_mode_refuses_what_the_debuggers_refuse(options, message):
    p = subprocess.run(
        [PYTHON, "-m", "ovf", *options, NAN_SCRIPT],
        capture_output=True,
        text=True,
        timeout=60,
        env=env(),
    )
    assert (p.returncode, p.stderr, p.stdout) == (2, message + "\n", "")


class SnapshotRing:
    """What python_stack reads of a ring, around a snapshot made here: one user frame
    `train` whose first `kept` locals v0, v1, ... are ints, of `total` in the frame."""

    def __init__(self, version, kept, total):
        self.names = ["train.py", "train", "int"] + [f"v{i}" for i in range(kept)]
        self.names += [str(i) for i in range(kept)]
        header = struct.pack(
            "<QIIQIIIII20x",
            snapshot.MAGIC,
            version,
            snapshot.size_of(version),
            5,
            1,
            kept,
            1,
            7,
            total if version >= 2 else 0,
        )
        frames = struct.pack("<IIiI", 0, 1, 9, snapshot.FLAG_USER).ljust(64 * 16, b"\0")
        local = struct.Struct(f"<IIIBBbB{snapshot.DIMS}qQQQQQdd")
        values = b"".join(
            local.pack(3 + i, 2, snapshot.LOCAL_VALUE, 0, 0, -1, 0, 3 + kept + i, *[0] * 14)
            for i in range(kept)
        )
        self.memory = header + frames + values
        self.header = SimpleNamespace(snapshot_addr=0x1000, last_event_seq=5)
        self.target = SimpleNamespace(read_memory=self.read_memory)

    def read_memory(self, address, size):
        return self.memory[address - 0x1000 :][:size]

    def text(self, name_id):
        return self.names[name_id]

    def record(self, seq):
        return SimpleNamespace(diagnosis_id=layout.NO_ID)


def notes(ring, *names):
    return [line for line in python_stack.local_values(ring, names).splitlines() if "ovf:" in line]


def test_py_locals_says_how_many_locals_a_snapshot_did_not_keep():
    ring = SnapshotRing(2, 256, 301)
    listing = python_stack.local_values(ring)
    assert listing.count(": int = ") == 256 and "v256" not in listing
    assert notes(ring)[1:] == [
        "ovf: ... and 45 more locals not kept: the snapshot keeps the first 256 locals of a frame"
    ]
    assert notes(ring, "v99", "v300", "nosuch")[1:] == [
        "ovf: v300, nosuch are not in the snapshot (it keeps the first 256 locals of a frame; "
        "this one has 301)"
    ]
    # a runtime of snapshot version 1 kept 64 and did not count the rest
    old = SnapshotRing(1, 64, 0)
    assert notes(old)[1:] == [
        "ovf: ... and maybe more locals: the snapshot keeps the first 64 locals of a frame"
    ]
    assert notes(old, "v99")[1:] == [
        "ovf: v99 is not in the snapshot (it keeps the first 64 locals of a frame)"
    ]
    # a frame kept whole: a name it lacks is not the frame's
    whole = SnapshotRing(2, 10, 10)
    assert notes(whole)[1:] == []
    assert notes(whole, "v3", "v99")[1:] == ["ovf: no local named v99 in that frame"]


def test_the_snapshot_reader_has_the_runtime_s_layout(tmp_path):
    program = (
        '#include <cstddef>\n#include <cstdio>\n#include "ovf/ring.h"\nint main() {\n'
        '  std::printf("%zu %zu %u %u\\n", sizeof(ovf_snapshot),'
        " offsetof(ovf_snapshot, frame_locals), OVF_SNAPSHOT_VERSION, OVF_SNAPSHOT_LOCALS);\n"
        "}\n"
    )
    size, offset, version, kept = map(int, run_against_ring_h(tmp_path, "snap", program).split())
    assert (size, offset, version, kept) == (
        snapshot.SIZE,
        40,
        snapshot.VERSION,
        snapshot.MAX_LOCALS,
    )
