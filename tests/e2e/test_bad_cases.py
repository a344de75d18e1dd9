"""Each bad case is one clear line from ovf, never a Python traceback (Debugger.run
checks that for every test), under gdb and LLDB."""

import os
import re
import sys

from harness import DEBUGGERS, PYTHON, SCRIPT, TOP, run_python

sys.path.insert(0, os.path.join(TOP, "plugin"))
from ovf_ring.core_target import (
    CoreTarget,
)  # noqa: E402 - the reader of ovf.postmortem, no debugger
from ovf_ring.layout import LAYOUT_VERSION  # noqa: E402
from ovf_ring.ring import locate  # noqa: E402


def test_no_process_and_a_process_that_exited(debugger):
    out = debugger.run(
        ["ovf frames", "run", "ovf frames", "ovf status"], program=[PYTHON, "-c", "pass"]
    )
    assert (
        out.count(
            f"ovf: no process: `run` it, attach with `{debugger.attach}`, or open a core file"
        )
        == 2
    )
    assert "ovf: no process yet: `run` it" in out and "debugger: nothing armed" in out


def test_no_runtime_in_the_process(debugger):
    out = debugger.run(
        ["run", "ovf frames", "ovf status", "kill"],
        program=[PYTHON, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTRAP)"],
    )
    assert out.count("ovf: no ovf runtime in this process (no symbol ovf_state)") == 2


def test_garbage_core(debugger, tmp_path):
    core = tmp_path / "core"
    core.write_bytes(os.urandom(1 << 16))
    out = debugger.run(["ovf frames"], core=core)
    # gdb opens no process; LLDB refuses to make the target at all (`lldb -c` stops there).
    assert "ovf: no process: `run` it" in out or debugger.refuses_core(out), out


def test_layout_version_from_the_future(debugger):
    out = debugger.run(
        [
            "ovf break-on-nan",
            "run",
            debugger.poke_u32("ovf_state", 8, LAYOUT_VERSION + 1),
            "ovf frames",
            "ovf status",
            "kill",
        ],
        program=[PYTHON, SCRIPT, "--inf-at", "blocks.1.amp:2"],
    )
    assert (
        out.count(
            f"ovf: the ring has layout version {LAYOUT_VERSION + 1}, newer than this ovf debugger"
            f" extension reads ({LAYOUT_VERSION}); use the extension that ships with the runtime"
            " (version 0.1.0)"
        )
        == 2
    )


def test_hostile_module_names_are_escaped(debugger):
    out = debugger.run(
        ["ovf break-on-nan --module 'extra.*'", "run", "ovf frames 2", "kill"],
        program=[PYTHON, SCRIPT, "--hostile", "--inf-at", "blocks.2.amp:1"],
    )
    escaped = "extra.evil\\x1b[2J\\x1b]0;pwned\\x07\\\\"
    assert f"     {escaped} (Amplifier): input[0] abs max nan" in out  # the stop summary
    assert f"                  {escaped} Amplifier\n" in out  # ovf frames
    assert "\x1b" not in out and "\x07" not in out


def test_wrong_arguments(debugger):
    out = debugger.run(
        [
            "ovf frames --bogus",
            "ovf frames 0",
            "ovf break-on-nan --nan --inf",
            "ovf break-on-nan --if 'x >'",
            "ovf watch",
            "ovf abort-after soon",
            "ovf nosuch",
            "help ovf frames",
        ]
    )
    assert "ovf frames: unrecognized arguments: --bogus\nusage: ovf frames [-h]" in out
    assert "ovf frames: argument N: '0' is not a count (an integer from 1 to 1073741824)" in out
    assert "ovf break-on-nan: argument --inf: not allowed with argument --nan" in out
    assert "ovf: --if 'x >' is not a Python expression: invalid syntax" in out
    assert "ovf watch: give --batches, --above, --below, --headroom or --cast (or 'off')" in out
    assert "ovf abort-after: argument N: 'soon' is not a batch number" in out
    assert debugger.unknown_subcommand("nosuch") in out
    assert re.search(
        r"List the last frames in the reference's report format\.\n\nusage: ovf frames", out
    )


def test_a_core_file_cannot_be_armed(debugger, tmp_path):
    core = tmp_path / "gcore"
    debugger.run(
        ["ovf break-on-nan", "run", debugger.gcore(core), "kill"],
        program=[PYTHON, SCRIPT, "--inf-at", "blocks.0.amp:1"],
    )
    out = debugger.run(["ovf break-on-nan", "ovf release"], core=core)
    assert "ovf: a core file cannot be armed; `ovf frames` and `ovf status` read it" in out
    assert f"ovf release: needs a running process (attach with {debugger.attach})" in out


def test_refused_values_are_one_line_and_arm_nothing(debugger):
    # Before `run` and on the stopped process alike: the value is refused when typed, with
    # its limit; nothing is half written, and the commands that follow still work.
    refused = [
        f"ovf break-on-nan --after-batch {10**20}",
        "ovf break-on-nan --module " + "m" * 300,
        f"ovf trace-batches {10**23}",
        "ovf break-on-nan --if '9**9**9 > absmax'",
        "ovf break-on-nan --if \"abs.__self__.__import__('os').system('echo pwned')\"",
    ]
    out = debugger.run(
        [
            *refused,
            "ovf status",
            debugger.cut(),
            "ovf break-on-nan",
            "run",
            *refused,
            "ovf status",
            "kill",
        ],
        program=[PYTHON, SCRIPT, "--inf-at", "blocks.1.amp:2"],
    )
    assert (
        out.count(f"'{10**20}' is not a batch number (an integer from 0 to 9223372036854775807)")
        == 2
    )
    assert out.count("a module glob holds at most 255 bytes; this one has 300") == 2
    assert (
        out.count(f"'{10**23}' is not a batch number (an integer from 0 to 9223372036854775807)")
        == 2
    )
    assert (
        out.count("ovf: --if '9**9**9 > absmax': a number larger than 2**256 is not allowed") == 2
    )
    assert out.count("calling abs.__self__.__import__('os').system is not allowed") == 2
    assert "pwned" not in out.replace("echo pwned", "")
    assert "debugger: nothing armed" in out[: out.index("----8<----")]
    assert re.search(r"^ovf: first non-finite value \(inf\) at batch 2", out, re.M), out
    # the stopped process's control block is what `ovf break-on-nan` wrote, untouched by the
    # refusals
    assert "runtime: enabled, on event: continue, stops on: nan, inf, producer_only" in out


def test_a_core_cut_after_the_ring_header_reads_as_postmortem_reads_it(debugger, tmp_path):
    """gdb's BFD refuses such a file ("not a core dump"); ovf then reads the core named
    on the command line itself, so gdb, LLDB and python3 -m ovf.postmortem agree."""
    full, cut = tmp_path / "core.full", tmp_path / "core.cut"
    DEBUGGERS["gdb"].run(
        ["ovf break-on-nan", "run", f"gcore {full}", "kill"],
        program=[PYTHON, SCRIPT, "--inf-at", "blocks.1.amp:2"],
    )
    target = CoreTarget(str(full))
    offset = target.file_offset(locate(target).address)
    target.close()
    with open(full, "rb") as f, open(cut, "wb") as g:
        g.write(f.read(offset + 4096))  # the header and a few records, not the rest
    listing = run_python(["-m", "ovf.postmortem", "--frames", "2", str(cut)]).stdout
    expected = listing[listing.index("Last 2 forward frames:") :]
    out = debugger.run(["ovf frames 2"], core=cut)
    assert out[out.index("Last 2 forward frames:") :].startswith(expected.rstrip("\n")), out
    assert "blocks.1.amp Amplifier" in expected and "     inf      inf output" in expected
