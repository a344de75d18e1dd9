"""How a benchmark's run ends (no torch here: the debugger benchmark's parent
process does not load it)."""


def print_targets(missed, met):
    """One `TARGET MISSED: ...` line per missed target, or the line `met` when none was."""
    for m in missed:
        print(f"TARGET MISSED: {m}")
    if not missed:
        print(met)


def exit_status(missed, quick):
    """1 when a target was missed in a full run. A --quick run is a smoke test
    (the test command runs every benchmark that way so that none can rot): its
    timings are too short to judge, so it says so and passes."""
    if quick and missed:
        print("(--quick: a smoke test; targets are judged on full runs only)")
        return 0
    return 1 if missed else 0
