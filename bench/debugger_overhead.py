"""What the debugger side costs: a diverging run under gdb with `ovf break-on-nan` armed,
against the same run with ovf and no debugger, and against a naive conditional gdb
breakpoint on every module forward; and `ovf frames 1000` on a core whose ring is full.

    /usr/bin/python3 bench/debugger_overhead.py [--reps 3] [--steps 20000] [--naive-steps 300]
                                                [--quick]

The workload is tests/e2e/scripts/diverge.py, an unmodified training loop of a tiny model
(14 module forwards a step, about 0.3 ms a step): `--steps N --inf-at blocks.1.amp:N-1`, so
the first inf comes in the last step and a run to the event is nearly the whole run. Many
small forwards are the worst case for anything that costs per forward. Every mode is a fresh
process; the modes of a repetition run one after the other, their order rotating from one
repetition to the next; the table shows medians. OpenBLAS, OpenMP and MKL are pinned to one
thread through the environment (OMP_NUM_THREADS=1 also gives torch one intra-op thread); the
inferior's torch.get_num_threads() is printed.

Modes (ovf on in all; "ovf env" is what the bootstrap reads: PYTHONPATH=<build>/python/ovf/
_bootstrap, OVF_ENABLE=1, OVF_ON_NAN=continue, OVF_STOP=nan,inf):
  a  no debugger: python3 diverge.py with the ovf env, to its exit
  d  gdb, nothing armed: the same under `gdb -batch -x gdb/ovf-gdb.py -ex run` (gdb's own cost)
  b  gdb, `ovf break-on-nan`, `run`: time to the stop (then kill); and b+ the whole run
     (`delete` the breakpoint at the stop, `continue` to the exit)
  c  gdb, a naive breakpoint on the pybind11 forward hook of ovf (called once per module
     forward) with a gdb condition that is false until the event (the ring's
     first_nonfinite_seq is set); on --naive-steps, with a and d on the same short run
  e  LLDB (lldb-19, or $OVF_LLDB), nothing armed: `lldb -b -O 'command script import
     lldb/ovf_lldb.py' -o run` (LLDB's own cost)
  l  LLDB, `ovf break-on-nan`, `run`: time to the stop (then kill)
  Under LLDB the program writes into lldb's own stdout (target.output-path), not through the
  pseudo-terminal LLDB would copy its output from, so its step lines are timed as they come.
Times: "to exit" is launch to exit; "to event" is launch to the stop (b, c) or to the line
the script prints after the event's step (a, d); "ms/step" is the steady state, from the
script's `step 0` line to its `step N-2` line (start-up and the event excluded).

The core: `gcore` at the stop of a --steps run (its ring has wrapped: 65536 records held),
then `gdb -batch -x gdb/ovf-gdb.py python3 core` timed with and without `-ex 'ovf frames 1000'`,
and inside gdb the command alone, a second call, and ovf_plugin's decoding and formatting
alone (the bytes gdb returned for the first call, served again from memory). plugin/ has no
core-file reader of its own (its ProcTarget reads a live process's /proc/PID/mem), so the
decoder is timed only inside gdb. The same core is then opened with LLDB (`lldb -c core python3`;
LLDB reads gdb's ELF cores), timed the same way (the command alone with `script`).
Targets: b / a and l / a, launch to the event, <= 1.15; `ovf frames 1000` answers in < 1 s
under both debuggers.
Exit status 1 when a target is missed.
"""

import argparse
import os
import platform
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _debugger_core import GDB_SIDE, make_core, time_core, time_core_lldb  # noqa: E402
from _debugger_machine import (  # noqa: E402
    build_description,
    cpu_model,
    gdb_version,
    inferior_threads,
    lldb_version,
    load_average,
    median,
    spread,
)
from _debugger_runs import (  # noqa: E402
    LLDB_EXE,
    PACKAGE,
    PINNED,
    PYTHON,
    REPO,
    SCRIPT,
    mode_a,
    mode_b,
    mode_b_whole,
    mode_c,
    mode_d,
    mode_e,
    mode_l,
)
from _verdict import exit_status, print_targets  # noqa: E402

FRAMES_TARGET_S = 1.0
RATIO_TARGET = 1.15


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--reps", type=int, default=3, help="repetitions of every mode (>= 3 for a result)"
    )
    p.add_argument(
        "--steps", type=int, default=60000, help="steps of the main run (the event in the last)"
    )
    p.add_argument(
        "--naive-steps", type=int, default=300, help="steps of the naive breakpoint's shorter run"
    )
    p.add_argument("--frames", type=int, default=1000, help="N of `ovf frames N` on the core")
    p.add_argument("--quick", action="store_true", help="smoke test: 1 repetition, short runs")
    args = p.parse_args()
    if args.quick:
        args.reps, args.steps, args.naive_steps = 1, 2000, 60
    for need in (PYTHON, shutil.which("gdb"), os.path.join(PACKAGE, "libovf_runtime.so")):
        if not need or not os.path.exists(need):
            raise SystemExit(
                f"debugger_overhead: {need or 'gdb'} is missing (build with `ninja -C build`)"
            )

    title = "ovf debugger overhead (bench/debugger_overhead.py)"
    print(title)
    print("=" * len(title))
    print(f"cpu:      {cpu_model()}, {os.cpu_count()} logical cores visible")
    print(
        f"python:   {platform.python_version()} ({PYTHON}); torch, intra-op and inter-op threads in"
        f" the inferior's environment: {inferior_threads()}"
    )
    print(
        f"threads:  {' '.join(f'{k}={v}' for k, v in PINNED.items())} in every process's"
        " environment"
    )
    print(f"gdb:      {gdb_version()}")
    has_lldb = lldb_version() is not None
    print(
        f"lldb:     {lldb_version() if has_lldb else f'{LLDB_EXE} is not installed: no LLDB rows'}"
    )
    print(f"ovf:      {build_description()}")
    print(f"load:     {load_average()} at start")
    print(
        f"workload: {os.path.relpath(SCRIPT, REPO)} --steps {args.steps} --inf-at"
        f" blocks.1.amp:{args.steps - 1} (14 module forwards a step); naive breakpoint on --steps"
        f" {args.naive_steps}"
    )
    print(
        f"method:   {args.reps} repetitions, modes interleaved round-robin (order rotating),"
        " medians; fresh processes"
    )
    print(flush=True)

    modes = [
        ("a", "no debugger", mode_a, args.steps),
        ("d", "gdb, nothing armed", mode_d, args.steps),
        ("b", "gdb, ovf break-on-nan, to the stop", mode_b, args.steps),
        ("b+", "gdb, ovf break-on-nan, stop, delete, continue to exit", mode_b_whole, args.steps),
        ("a'", "no debugger (short run)", mode_a, args.naive_steps),
        ("d'", "gdb, nothing armed (short run)", mode_d, args.naive_steps),
        (
            "c",
            "gdb, naive conditional breakpoint per forward (short run)",
            mode_c,
            args.naive_steps,
        ),
    ]
    if has_lldb:
        modes += [
            ("e", "lldb, nothing armed", mode_e, args.steps),
            ("l", "lldb, ovf break-on-nan, to the stop", mode_l, args.steps),
        ]
    results = {key: [] for key, *_ in modes}
    for rep in range(args.reps):
        order = modes[rep % len(modes) :] + modes[: rep % len(modes)]
        for key, _, fn, steps in order:
            results[key].append(fn(steps))
        print(f"repetition {rep + 1}/{args.reps} done; load {load_average()}", flush=True)
    print()

    def med(key, field):
        return median([r[field] for r in results[key] if field in r])

    def cell(key, field, digits=3):
        values = [r[field] for r in results[key] if field in r]
        if not values:
            return f"{'-':>22}"
        return (
            f"{median(values):8.{digits}f} "
            f"({min(values):5.{digits - 1}f}-{max(values):<5.{digits - 1}f})"
        )

    print(
        f"{'mode':<4} {'what':<60} {'steps':>6} {'to event s (min-max)':>22} "
        f"{'to exit s (min-max)':>22} "
        f"{'ms/step (min-max)':>22}"
    )
    print("-" * 140)
    for key, what, _, steps in modes:
        print(
            f"{key:<4} {what:<60} {steps:>6} {cell(key, 'event')} {cell(key, 'exit')} "
            f"{cell(key, 'ms/step', 4)}"
        )
    print()
    a_exit, a_event, a_step = med("a", "exit"), med("a", "event"), med("a", "ms/step")
    b_event, bw_exit, b_step = med("b", "event"), med("b+", "exit"), med("b", "ms/step")
    d_exit, d_step = med("d", "exit"), med("d", "ms/step")
    fixed = d_exit - a_exit
    hooks = med("c", "hook calls")
    per_hit_ms = (med("c", "event") - med("d'", "event")) / hooks * 1e3
    naive_at_main = med("d", "event") + per_hit_ms / 1e3 * hooks / args.naive_steps * args.steps
    ratio_b = b_event / a_event
    c_ratio = med("c", "event") / med("a'", "exit")
    print("ratios (medians)")
    print(f"  b  to the stop / a to the event          {ratio_b:7.3f}   (target <= {RATIO_TARGET})")
    print(f"  b  to the stop / a to exit               {b_event / a_exit:7.3f}")
    print(f"  b+ whole run   / a whole run             {bw_exit / a_exit:7.3f}")
    print(
        f"  b+ whole run   / d gdb, nothing armed    {bw_exit / d_exit:7.3f}   (what arming ovf"
        " adds under gdb)"
    )
    print(
        f"  d  gdb, nothing armed / a                {d_exit / a_exit:7.3f}   (gdb's own cost:"
        f" +{fixed:.2f} s)"
    )
    print(
        f"  b  stop latency: event to gdb's prompt   {med('b', 'latency'):7.3f} s (ovf's summary"
        " included)"
    )
    print(
        f"  b  ms/step / a ms/step (steady state)    {b_step / a_step:7.3f}   (start-up excluded)"
    )
    print(f"  d  ms/step / a ms/step (steady state)    {d_step / a_step:7.3f}")
    print(
        f"  c  naive, to the stop / a' to exit       {c_ratio:7.3f}   "
        f"({hooks:.0f} breakpoint hits, {per_hit_ms:.3f} ms each over d')"
    )
    print(
        f"  c  naive on the main run, estimated / a  {naive_at_main / a_exit:7.1f}   "
        f"(about {naive_at_main:.0f} s; b's breakpoint is hit once)"
    )
    if has_lldb:
        e_exit, l_event, l_step = med("e", "exit"), med("l", "event"), med("l", "ms/step")
        ratio_l = l_event / a_event
        print(
            f"  l  lldb to the stop / a to the event     {ratio_l:7.3f}   (target <="
            f" {RATIO_TARGET})"
        )
        print(f"  l  lldb to the stop / a to exit          {l_event / a_exit:7.3f}")
        print(
            f"  e  lldb, nothing armed / a               {e_exit / a_exit:7.3f}   "
            f"(LLDB's own cost: +{e_exit - a_exit:.2f} s)"
        )
        print(
            f"  l  ms/step / a ms/step (steady state)    {l_step / a_step:7.3f}   (start-up"
            " excluded)"
        )
    if fixed > 0:
        print(
            f"  gdb's fixed cost of {fixed:.2f} s is paid once a run (start-up, symbols of every"
            f" library the script loads); b/a <= {RATIO_TARGET} from runs of about"
            f" {fixed / (RATIO_TARGET - 1):.0f} s without a debugger"
        )
    if has_lldb and e_exit > a_exit:
        print(
            f"  LLDB's fixed cost of {e_exit - a_exit:.2f} s likewise: l/a <= {RATIO_TARGET} from"
            f" runs of about {(e_exit - a_exit) / (RATIO_TARGET - 1):.0f} s"
        )
    print(flush=True)

    with tempfile.TemporaryDirectory(prefix="ovf-bench-") as tmp:
        core, info = make_core(args.steps, tmp)
        side = os.path.join(tmp, "gdb_side.py")
        with open(side, "w") as f:
            f.write(GDB_SIDE)
        core_runs = [time_core(core, side, args.frames) for _ in range(args.reps)]
        lldb_runs = (
            [time_core_lldb(core, args.frames) for _ in range(args.reps)] if has_lldb else []
        )
    print(
        f"core:     gcore at the stop of the main run: {info['core bytes'] / 2**20:.0f} MiB, "
        f"{info['records written']} records written, ring capacity {info['capacity']} (full), "
        f"{info['frames written']} frames written"
    )
    print(f"`ovf frames {args.frames}` on it ({args.reps} fresh gdb processes, medians)")
    rows = [
        ("gdb -batch python3 core (gdb loads the core, no command)", "gdb load"),
        (f"gdb -batch python3 core -ex 'ovf frames {args.frames}'", "gdb + frames"),
        ("the command alone, inside gdb (first call)", "command"),
        ("the command again, same gdb", "command again"),
        ("ovf_plugin alone: decode + format, same bytes", "plugin alone"),
    ]
    for what, field in rows:
        values = [r[field] for r in core_runs]
        print(f"  {what:<58} {median(values):8.3f} s   ({spread(values)})")
    print(f"  bytes the command read through gdb: {core_runs[0]['bytes read'] / 2**20:.2f} MiB")
    lldb_rows = [
        ("lldb -b -c core python3 (LLDB loads the core, no command)", "lldb load"),
        (f"lldb -b -o 'ovf frames {args.frames}' -c core python3", "lldb + frames"),
        ("the command alone, inside lldb (first call)", "command"),
        ("the command again, same lldb", "command again"),
    ]
    for what, field in lldb_rows if lldb_runs else ():
        values = [r[field] for r in lldb_runs]
        print(f"  {what:<58} {median(values):8.3f} s   ({spread(values)})")
    print(
        "  the Python decoder has no core-file reader of its own in plugin/: timed inside gdb only"
    )
    print(f"load:     {load_average()} at end")
    print()

    command = median([r["command"] for r in core_runs])
    whole = median([r["gdb + frames"] for r in core_runs])
    missed = []
    if ratio_b > RATIO_TARGET:
        missed.append(
            f"b/a = {ratio_b:.3f} > {RATIO_TARGET} (launch to the event, gdb's start-up included)"
        )
    if command >= FRAMES_TARGET_S:
        missed.append(f"`ovf frames {args.frames}` took {command:.3f} s >= {FRAMES_TARGET_S} s")
    if has_lldb:
        lldb_command = median([r["command"] for r in lldb_runs])
        if ratio_l > RATIO_TARGET:
            missed.append(
                f"l/a = {ratio_l:.3f} > {RATIO_TARGET} (launch to the event, LLDB's start-up"
                " included)"
            )
        if lldb_command >= FRAMES_TARGET_S:
            missed.append(
                f"`ovf frames {args.frames}` took {lldb_command:.3f} s >= {FRAMES_TARGET_S} s under"
                " lldb"
            )
    print(
        f"steady state: a step under gdb with ovf break-on-nan armed takes {b_step / a_step:.3f}x"
        " the time it takes without a debugger"
        f" ({'within' if b_step / a_step <= RATIO_TARGET else 'beyond'} {RATIO_TARGET})"
    )
    print(
        f"ovf frames {args.frames}: the command answers in {command:.3f} s "
        f"({'<' if command < FRAMES_TARGET_S else '>='} {FRAMES_TARGET_S} s); "
        f"gdb started on the core with it: {whole:.3f} s"
    )
    if has_lldb:
        print(
            f"ovf frames {args.frames} under lldb: the command answers in {lldb_command:.3f} s;"
            " lldb started on the core with it:"
            f" {median([r['lldb + frames'] for r in lldb_runs]):.3f} s"
        )
    print_targets(missed, "targets met")
    if args.reps < 3:
        print("(fewer than 3 repetitions: a smoke test, not a result)")
    return exit_status(missed, args.quick)


if __name__ == "__main__":
    sys.exit(main())
