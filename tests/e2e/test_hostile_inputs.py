"""Hostile input, round three (issue 23), under gdb and LLDB: each bad case is one line
saying what was wrong and what to do (Debugger.run checks that no traceback and no
internal error shows), and nothing a user types can take the debugger's memory."""

from harness import DIVERGE, PYTHON, SCRIPT


def test_if_refuses_a_huge_string_or_tuple_before_making_it(debugger):
    constant = "'%2147483647d' % 1 == ''"
    from_a_field = "len((0,) * (batch * 10**9)) > 0"
    out = debugger.run(
        [
            f'ovf break-on-nan --if "{constant}"',
            "ovf status",
            f'ovf break-on-nan --if "{from_a_field}"',
            "run",
            "kill",
        ],
        program=[PYTHON, SCRIPT, *DIVERGE],
        timeout=60,
    )
    assert (
        "ovf: --if \"'%2147483647d' % 1 == ''\": '%2147483647d' % 1 would make a string of "
        "2147483647 characters (at most 10000)\n" in out
    )
    assert "debugger: nothing armed" in out
    # the expression is fine with neutral values; batch 2's event makes it too big: the
    # stop says so (and stops: an --if that cannot be decided keeps the event)
    assert (
        "ovf: --if 'len((0,) * (batch * 10**9)) > 0': (0,) * (batch * 10 ** 9) would make a "
        "tuple of 2000000000 items (at most 10000)\n" in out
    )
    assert "ovf: first non-finite value (inf) at batch 2" in out, out


def test_thresholds_a_double_cannot_hold_empty_lists_and_an_empty_if_are_refused(debugger):
    out = debugger.run(
        [
            "ovf watch --above 1e400",
            "ovf watch --below 1e-400",
            "ovf trace-batches 1,,3",
            "ovf watch --batches 1,3,",
            "ovf break-on-nan --if ''",
            "ovf break-on-nan --if '  '",
            "ovf status",
        ],
        program=[PYTHON, SCRIPT, *DIVERGE],
        timeout=60,
    )
    assert (
        "ovf watch: argument --above: '1e400' reads as inf in a double: give 0 or a magnitude "
        "from 5e-324 to 1.8e+308\n" in out
    )
    assert (
        "ovf watch: argument --below: '1e-400' reads as 0.0 in a double: give 0 or a magnitude "
        "from 5e-324 to 1.8e+308\n" in out
    )
    # as `python3 -m ovf --trace-batches 1,,3` says it (tests/python/test_hostile_options.py)
    assert (
        "ovf trace-batches: argument LIST: '1,,3' has an empty batch number: give batch "
        "numbers separated by single commas, e.g. 1,3\n" in out
    )
    assert (
        "ovf watch: argument --batches: '1,3,' has an empty batch number: give batch "
        "numbers separated by single commas, e.g. 1,3\n" in out
    )
    empty = (
        "ovf: --if is empty: give an expression over the event's fields, e.g. "
        "--if 'absmax > 1e4', or leave --if out\n"
    )
    assert out.count(empty) == 2, out
    assert "debugger: nothing armed" in out


LONG_NAMES = """
import torch
from torch import nn

LONG = "n" * (1 << 20)
model = nn.Sequential()
model.add_module("first", nn.Linear(2, 2))
model.add_module(LONG, nn.Linear(2, 2))
globals()["v" * (1 << 20)] = 7
for batch in range(3):
    with torch.no_grad():
        getattr(model, LONG).weight.fill_(1e38 if batch == 2 else 1.0)
    model(torch.full((1, 2), 1e10))
"""


def test_a_megabyte_module_or_local_name_shows_its_start_and_its_size(debugger, tmp_path):
    script = tmp_path / "long_names.py"
    script.write_text(LONG_NAMES)
    out = debugger.run(
        ["ovf break-on-nan", "run", "ovf frames 2", "ovf py-locals", "kill"],
        program=[PYTHON, str(script)],
    )
    module = "n" * 200 + "... (a name of 1048576 bytes)"
    local = "v" * 200 + "... (a name of 1048576 bytes)"
    assert "<bad name id" not in out and "n" * 201 not in out and "v" * 201 not in out
    assert f"                  {module} Linear\n" in out, out  # ovf frames
    assert f"                  {local}: int = 7\n" in out, out  # ovf py-locals


def many_locals_script(count):
    body = "\n".join(f"    v{i} = {i}" for i in range(count))
    return (
        "import torch\nfrom torch import nn\n\n\ndef train(model):\n"
        f"{body}\n    return model(torch.full((1, 2), 1e10))  # inf: 1e38 * 1e10\n\n\n"
        "model = nn.Linear(2, 2)\nwith torch.no_grad():\n    model.weight.fill_(1e38)\n"
        "train(model)\n"
    )


def test_py_locals_says_what_the_snapshot_did_not_keep(debugger, tmp_path):
    """A frame of 301 locals (model, v0 ... v299): the snapshot keeps the first 256
    (ring.h, OVF_SNAPSHOT_LOCALS) and counts them all; a listing says how many it
    lacks, and a name it did not keep is not called missing from the frame."""
    script = tmp_path / "many_locals.py"
    script.write_text(many_locals_script(300))
    out = debugger.run(
        [
            "ovf break-on-nan",
            "run",
            "ovf py-locals",
            "ovf py-locals v99 v254 v255 v299 nosuch",
            "kill",
        ],
        program=[PYTHON, str(script)],
    )
    assert out.count("                  v99: int = 99\n") == 2, out
    assert out.count("                  v254: int = 254\n") == 2, out
    assert "v255: int" not in out
    assert (
        "ovf: ... and 45 more locals not kept: the snapshot keeps the first 256 locals of a "
        "frame\n" in out
    )
    assert (
        "ovf: v255, v299, nosuch are not in the snapshot (it keeps the first 256 locals of a "
        "frame; this one has 301)\n" in out
    )
    assert "no local named" not in out
