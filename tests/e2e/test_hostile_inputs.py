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
