"""One core file, one answer: gdb, LLDB and python3 -m ovf.postmortem locate the same ring
(or refuse with the same line) in the same core, line for line. Where the debuggers read
through their own core support they disagreed: a core cut right after the ring's header
(its loader list cut away, its last segment short) was a listing for postmortem and "no
ovf ring" for both debuggers; a segment dumped only in part (p_filesz < p_memsz) hid the
ring from LLDB alone."""

import os
import shutil
import sys

import pytest
from harness import CUT_MARK, TOP, abort_core, run_python

sys.path.insert(0, os.path.join(TOP, "plugin"))
import crafted_cores  # noqa: E402 - tests/python, put on sys.path by conftest.py
from ovf_ring import layout  # noqa: E402
from ovf_ring.core_target import CoreTarget  # noqa: E402
from ovf_ring.ring import locate  # noqa: E402

FRAMES = 2


def postmortem_answer(core):
    """postmortem's lines about the ring of `core`: stderr (its one-line errors, which name
    the file first, as it takes several cores), then the listing after the summary (its
    process, its first non-finite value and the indented lines under it: the replay's,
    the verdict's; `ovf frames` prints none of them)."""
    out = run_python(["-m", "ovf.postmortem", "--frames", str(FRAMES), str(core)])
    errors = [line.replace(f"ovf: {core}: ", "ovf: ") for line in out.stderr.splitlines()]
    listing = out.stdout.splitlines()
    if listing:
        assert listing[0].startswith(f"{core}: process "), out.stdout
        assert listing[1].startswith("first non-finite: "), out.stdout
        listing = listing[2:]
        while listing and listing[0].startswith("  "):
            listing.pop(0)
    return errors + listing


def debugger_answer(debugger, core):
    """The debugger's lines for `ovf frames N` on `core`: its own echo of the command and
    LLDB's "error: " before a refusal left out."""
    out = debugger.run([debugger.cut(), f"ovf frames {FRAMES}", debugger.cut()], core=core)
    if debugger.refuses_core(out):
        pytest.fail(f"{debugger.name} would not open {core}:\n{out}")
    first = out.index(CUT_MARK) + len(CUT_MARK) + 1
    text = out[first : out.index(CUT_MARK, first)]
    return [
        line.removeprefix("error: ")
        for line in text.splitlines()
        if not line.startswith("(lldb) ") and line.strip()
    ]


def assert_agree(debugger, core):
    expected = postmortem_answer(core)
    assert expected, f"postmortem said nothing about {core}"
    assert debugger_answer(debugger, core) == expected
    return expected


@pytest.fixture(scope="module")
def real_core(tmp_path_factory):
    """A kernel core of diverge.py stopped at its inf (abort mode), and the file offset
    just past its ring's header. Removed after the module's tests, passed or not: pytest's
    retention policy keeps a module's directory (800 MB here) whatever its tests did."""
    work = tmp_path_factory.mktemp("real")
    try:
        core, _ = abort_core(work)
        target = CoreTarget(str(core))
        try:
            end = target.file_offset(locate(target).address) + layout.HEADER_SIZE
        finally:
            target.close()
        yield core, end
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_a_full_real_core(debugger, real_core):
    core, _ = real_core
    lines = assert_agree(debugger, core)
    # (A note may come first: a ring found by scanning where the build changed meanwhile.)
    assert f"Last {FRAMES} forward frames:" in lines and lines[-1] == "     inf      inf output"


def test_a_real_core_cut_right_after_the_ring_header(debugger, real_core, tmp_path):
    core, end = real_core
    cut = tmp_path / "core.cut"
    with open(core, "rb") as f, open(cut, "wb") as g:
        while f.tell() < end:
            g.write(f.read(min(1 << 24, end - f.tell())))
    assert os.path.getsize(cut) == end
    size = os.path.getsize(core)
    lines = assert_agree(debugger, cut)
    assert lines[0] == (
        f"ovf: {cut} is cut short ({end} of {size} bytes); what it lacks shows as unreadable"
    )
    assert lines[-1] == "     inf      inf output", lines


def test_a_crafted_core_without_nt_file(debugger, tmp_path):
    core = crafted_cores.ring_core(tmp_path / "core")
    lines = assert_agree(debugger, core)
    assert lines[0] == "ovf: found the ring by scanning memory at 0x10000000 (no symbol ovf_state)"
    assert lines[-1] == "                  model.layer Linear", lines


def test_a_crafted_core_without_a_ring_is_the_same_refusal(debugger, tmp_path):
    # 320 MiB of writable memory to scan (the scan stops at 256), and 64 MiB read-only
    # (no place for the ring: not scanned, not counted).
    zeros = [(0x1_0000_0000 + i * (16 << 20), 16, True) for i in range(20)]
    zeros.append((0x2_0000_0000, 64, False))
    core = crafted_cores.ring_core(tmp_path / "core", ring=False, zeros=zeros)
    lines = assert_agree(debugger, core)
    assert lines == [
        "ovf: no ovf ring in this core file (no symbol ovf_state, and no ring header in its "
        "memory; the scan for the ring stopped after 256 MiB of 320 MiB of writable memory "
        "(256 MiB or 10 s at most))"
    ], lines
