"""python3 -m ovf.postmortem on kernel cores, without a debugger: a two-rank Gloo
job in abort mode where rank 1 goes non-finite and rank 0 a second later, so both
ranks write a core; a core whose runtime library has gone; and every kind of bad
file, each one line on stderr and exit status 2."""

import json
import os
import re
import resource
import shutil
import struct
import subprocess

import pytest
from ranks_harness import (
    BUILD,
    PYTHON,
    RANKS_SCRIPT,
    TOP,
    assert_amp_replay,
    env,
    kernel_cores_here,
    rank_stdout,
    run,
    torchrun,
)

DIVERGE = os.path.join(TOP, "tests", "e2e", "scripts", "diverge.py")
CLOCK = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{9}"
FIRST = r"record \d+, batch 2, blocks\.1\.amp \(Amplifier\) output"
NO_RING = "no ovf ring in this core file (no symbol ovf_state, and no ring header in its memory)"


def postmortem(*args, cwd=None):
    return subprocess.run(
        [PYTHON, "-m", "ovf.postmortem", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env(),
        cwd=cwd,
    )


def _core_in(directory):
    cores = [name for name in os.listdir(directory) if name.startswith("core")]
    if not cores:
        pytest.skip(f"no core file was written in {directory} (core dumps disabled?)")
    assert len(cores) == 1, cores
    return os.path.join(directory, cores[0])


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """{rank: (core, what the rank printed)} of one abort-mode job where rank 1
    goes non-finite at batch 2 and rank 0 one second into the same batch."""
    why = kernel_cores_here()
    if why:
        pytest.skip(why)
    top = tmp_path_factory.mktemp("two_ranks")
    out = run(
        torchrun(
            2,
            top / "logs",
            "-m",
            "ovf",
            "--on-nan",
            "abort",
            RANKS_SCRIPT,
            "--inf-at",
            "1:2",
            "--inf-at",
            "0:2:1",
            "--rank-dirs",
            top / "ranks",
        ),
        env=env(),
    )
    assert out.returncode != 0, out.stdout
    return {
        rank: (_core_in(top / "ranks" / f"rank{rank}"), rank_stdout(top / "logs", rank))
        for rank in (0, 1)
    }


def _listing(text):
    return text[text.index("Last 21 forward frames:") :]


def test_each_rank_core_lists_the_frames_the_rank_reported(two_ranks):
    for rank, (core, printed) in two_ranks.items():
        out = postmortem(core)
        assert out.returncode == 0 and out.stderr == "", out.stderr
        lines = out.stdout.splitlines()
        assert re.fullmatch(
            rf"{re.escape(core)}: process \d+ \(rank {rank} of 2, cpu\), batch 2, \d+ frames",
            lines[0],
        ), lines[0]
        assert re.fullmatch(rf"first non-finite: {FIRST}, at {CLOCK}", lines[1]), lines[1]
        # The same frames as the report the rank printed before it aborted.
        assert _listing(printed).startswith(_listing(out.stdout)), out.stdout


def test_both_cores_are_listed_and_the_first_rank_is_named(two_ranks):
    (core0, _), (core1, _) = two_ranks[0], two_ranks[1]
    for order in ((core0, core1), (core1, core0)):
        out = postmortem(*order, "--frames", "2")
        assert out.returncode == 0 and out.stderr == "", out.stderr
        assert out.stdout.count("Last 2 forward frames:") == 2
        tail = out.stdout.splitlines()[-4:]
        assert tail[0] == "ovf: first non-finite value of each core, earliest first:"
        w = max(len(f"rank 0 ({core0})"), len(f"rank 1 ({core1})"))
        assert re.fullmatch(
            rf"  {re.escape(f'rank 1 ({core1})'):<{w}}  {CLOCK}  {FIRST}", tail[1]
        ), tail
        later = re.fullmatch(
            rf"  {re.escape(f'rank 0 ({core0})')} *  \+(\d+\.\d{{6}}) s +  {FIRST}", tail[2]
        )
        assert later and 0.9 < float(later.group(1)) < 30, tail  # rank 0 waited 1 s into batch 2
        assert tail[3] == f"ovf: rank 1 ({core1}) went non-finite first"


def test_json_gives_the_order_and_each_first_nonfinite_value(two_ranks):
    (core0, _), (core1, _) = two_ranks[0], two_ranks[1]
    out = postmortem(core0, core1, "--json", "--frames", "3")
    assert out.returncode == 0 and out.stderr == "", out.stderr
    doc = json.loads(out.stdout)
    assert doc["order"] == [core1, core0] and doc["first"] == {"path": core1, "rank": 1}
    for core, rank in ((core0, 0), (core1, 1)):
        entry = next(c for c in doc["cores"] if c["path"] == core)
        assert (entry["rank"], entry["world_size"], entry["batch"]) == (rank, 2, 2)
        first = entry["first_nonfinite"]
        assert (first["batch"], first["module"], first["class"], first["label"], first["kind"]) == (
            2,
            "blocks.1.amp",
            "Amplifier",
            "output",
            "output",
        )
        assert len(entry["frames"]) == 3 and entry["frames"][-1]["module"] == "blocks.1.amp"
    t = {c["rank"]: c["first_nonfinite"]["timestamp_ns"] for c in doc["cores"]}
    assert t[1] < t[0]


def test_a_core_whose_runtime_library_is_gone_is_found_by_scanning(tmp_path):
    why = kernel_cores_here()
    if why:
        pytest.skip(why)
    package = tmp_path / "moved"
    shutil.copytree(os.path.join(BUILD, "python"), package)
    work = tmp_path / "work"
    work.mkdir()
    ran = run(
        [PYTHON, "-m", "ovf", "--on-nan", "abort", DIVERGE, "--inf-at", "blocks.1.amp:2"],
        env=env(PYTHONPATH=str(package)),
        cwd=work,
        timeout=120,
    )
    assert ran.returncode != 0
    core = _core_in(work)
    library = package / "ovf" / "libovf_runtime.so"
    shutil.rmtree(package)
    out = postmortem(core)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    lines = out.stdout.splitlines()
    # under the first non-finite value, what the replay at its module event found
    assert_amp_replay(lines[2:6])
    assert re.fullmatch(
        rf"ovf: found the ring by scanning memory at 0x[0-9a-f]+ in {re.escape(str(library))} "
        r"\(no symbol ovf_state\)",
        lines[6],
    ), lines[6]
    assert lines[7] == f"ovf: the runtime library {library} was not found"
    assert _listing(ran.stdout).startswith(_listing(out.stdout))


@pytest.fixture(scope="module")
def plain_core(tmp_path_factory):
    """A kernel core of a Python process that never loaded ovf."""
    why = kernel_cores_here()
    if why:
        pytest.skip(why)
    hard = resource.getrlimit(resource.RLIMIT_CORE)[1]  # not 0: kernel_cores_here
    work = tmp_path_factory.mktemp("plain")
    subprocess.run(
        [PYTHON, "-c", "import os; os.abort()"],
        cwd=work,
        timeout=60,
        env=env(),
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (hard, hard)),
    )
    return _core_in(work)


def _cut(core, path, size):
    with open(core, "rb") as src, open(path, "wb") as dst:
        dst.write(src.read(size))
    return path


def _state_offset(core):
    """The file offset of the ring header in `core`, found as postmortem finds it."""
    from ovf_ring.core_target import CoreTarget
    from ovf_ring.ring import locate

    target = CoreTarget(core)
    try:
        return target.file_offset(locate(target).address)
    finally:
        target.close()


def test_bad_files_are_one_line_and_exit_status_2(tmp_path, two_ranks, plain_core):
    core = two_ranks[1][0]
    state, size = _state_offset(core), os.path.getsize(core)
    future = tmp_path / "future"
    shutil.copy(core, future)
    with open(future, "r+b") as f:
        f.seek(state + 8)  # layout_version
        f.write(struct.pack("<I", 99))
    (tmp_path / "garbage").write_bytes(bytes(range(256)) * 64)
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "adir").mkdir()
    fifo = tmp_path / "fifo"  # opening it would block for ever
    os.mkfifo(fifo)
    cut_4k, cut_ring = (
        _cut(core, tmp_path / "cut-4k", 4096),
        _cut(core, tmp_path / "cut-ring", state),
    )
    P = re.escape
    cases = {  # file: what stderr says, a regular expression
        tmp_path
        / "garbage": rf"ovf: {P(str(tmp_path / 'garbage'))} is not a core file \(not an ELF file\)",
        tmp_path
        / "empty": rf"ovf: {P(str(tmp_path / 'empty'))} is not a core file \(not an ELF file\)",
        cut_4k: rf"ovf: {P(str(cut_4k))} is not a readable core file \(truncated or corrupt: .+\)",
        cut_ring: (
            rf"ovf: {P(str(cut_ring))} is cut short \({state} of {size} bytes\): cannot read"
            r" ovf_state at "
            r"0x[0-9a-f]+: 0x[0-9a-f]+ lies past the end of the file"
        ),
        tmp_path / "adir": (
            rf"ovf: {P(str(tmp_path / 'adir'))} is not a core file \(not a regular file: a"
            r" directory\)"
        ),
        fifo: rf"ovf: {P(str(fifo))} is not a core file \(not a regular file: a FIFO\)",
        tmp_path
        / "missing": rf"ovf: cannot open {P(str(tmp_path / 'missing'))}: No such file or directory",
        plain_core: rf"ovf: {P(plain_core)}: {P(NO_RING)}",
        future: (
            rf"ovf: {P(str(future))}: the ring has layout version 99, newer than this ovf debugger"
            r" extension "
            r"reads \(\d+\); use the extension that ships with the runtime \(version"
            r" \d+\.\d+\.\d+\)"
        ),
        PYTHON: (
            rf"ovf: {PYTHON} is not a core file \((an executable|a shared library or a PIE"
            r" executable)\)"
        ),
    }
    for path, message in cases.items():
        out = postmortem(path)
        assert out.returncode == 2 and out.stdout == "", (path, out.stdout, out.stderr)
        assert re.fullmatch(message + "\n", out.stderr), (path, out.stderr)


def test_a_core_cut_short_after_the_header_lists_what_is_there(tmp_path, two_ranks):
    core = two_ranks[1][0]
    cut = _cut(core, tmp_path / "cut", _state_offset(core) + 4096)  # the header, not the records
    out = postmortem(cut, "--frames", "2")
    assert out.returncode == 2
    assert (
        out.stderr
        == f"ovf: {cut} is cut short ({_state_offset(core) + 4096} of {os.path.getsize(core)} "
        "bytes); what it lacks shows as unreadable\n"
    )
    assert re.match(
        rf"{re.escape(str(cut))}: process \d+ \(rank 1 of 2, cpu\), batch 2", out.stdout
    ), out.stdout


def test_a_bad_file_among_good_cores_does_not_hide_them(tmp_path, two_ranks):
    (tmp_path / "garbage").write_bytes(b"\0" * 1000)
    out = postmortem(two_ranks[0][0], tmp_path / "garbage", two_ranks[1][0], "--frames", "0")
    assert out.returncode == 2
    assert out.stderr == f"ovf: {tmp_path / 'garbage'} is not a core file (not an ELF file)\n"
    assert out.stdout.splitlines()[-1] == f"ovf: rank 1 ({two_ranks[1][0]}) went non-finite first"


def test_usage_errors_exit_2():
    out = postmortem()
    assert out.returncode == 2 and "usage: python3 -m ovf.postmortem" in out.stderr
    out = postmortem("core", "--frames", "x")
    assert out.returncode == 2 and "--frames: 'x' is not a count (an integer >= 0)" in out.stderr


def test_crafted_cores_cost_neither_memory_nor_time(tmp_path):
    """A 1 GiB string arena backed by a 1.2 MB file is not loaded (names are read one
    at a time, each bounded); a terabyte of writable segments is not scanned whole."""
    import time

    import crafted_cores

    def limited():  # 1 GiB of address space: the whole arena could not even be mapped
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    arena = tmp_path / "arena"
    crafted_cores.huge_name_arena(arena)
    out = subprocess.run(
        [PYTHON, "-m", "ovf.postmortem", "--frames", "1", str(arena)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env(),
        preexec_fn=limited,
    )
    assert "MemoryError" not in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert out.returncode == 0 and "process 4242 (not distributed, cpu), batch 0" in out.stdout, out
    # each name bounded: its first bytes and its size, read without the rest
    long_name = "A" * 200 + f"... (a name of {(1 << 30) - 1} bytes)"
    assert f"                  {long_name} {long_name}\n" in out.stdout, out.stdout

    scan = tmp_path / "scan"
    crafted_cores.endless_scan(scan)
    started = time.monotonic()
    out = postmortem(scan)
    took = time.monotonic() - started
    assert out.returncode == 2 and took < 60, (took, out.stderr)
    assert re.fullmatch(
        rf"ovf: {re.escape(str(scan))}: no ovf ring in this core file \(no symbol ovf_state, "
        r"and no ring header in its memory; the scan for the ring stopped after \d+ MiB of "
        r"1048544 MiB of writable memory \(256 MiB or 10 s at most\)\)\n",
        out.stderr,
    ), out.stderr
