"""The picture of `ovf plot` from Python: DebugUnderflowOverflow.plot() and
`python3 -m ovf.postmortem CORE --plot FILE`.

The reading is ovf_ring.picture's, the drawing ovf_plugin.plot's, both installed
beside this package; matplotlib
never loads in the training process: plot() reads the process's own ring here
(plain Python, ovf_ring through /proc/self/mem), hands the collected picture
as JSON to a child `python3 -m ovf_plugin.plot`, and waits for it. The
post-mortem process reads cores and draws in itself. This module imports
neither torch nor matplotlib.
"""

import json
import os
import subprocess
import sys
import tempfile

# holds ovf_ring and ovf_plugin: the drawing child's PYTHONPATH
_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILD_TIMEOUT_S = 300


def plot_own_ring(
    path, module=None, batches=False, ops=False, last=None, cast=None, loss="overflow"
):
    """Draws this process's ring into `path`; returns the drawn matrix (dict)."""
    # ovf's ring reader, beside this package; reading only, no matplotlib here
    from ovf_ring import picture
    from ovf_ring.errors import OvfError
    from ovf_ring.proc_target import ProcTarget
    from ovf_ring.ring import locate

    from . import _ovf

    options = picture.Options(
        module=module, batches=batches, ops=ops, last=last, cast=cast, loss=loss
    )
    program = " ".join([os.path.basename(sys.executable), *sys.argv]).strip()
    target = ProcTarget(os.getpid(), {"ovf_state": _ovf.state_address()})
    try:
        collected = picture.collect(locate(target), options, program)
    except OvfError as e:
        raise RuntimeError(str(e)) from None
    finally:
        target.close()
    with tempfile.TemporaryDirectory(prefix="ovf-plot-") as scratch:
        data = os.path.join(scratch, "picture.json")
        with open(data, "w") as f:
            f.write(collected.to_json())
        env = dict(os.environ, PYTHONPATH=_PARENT, MPLBACKEND="Agg")
        child = subprocess.run(
            [sys.executable, "-m", "ovf_plugin.plot", data, os.path.abspath(path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
        )
    if child.returncode != 0:
        why = child.stderr.strip().splitlines()
        raise RuntimeError(
            why[-1] if why else f"ovf plot: the drawing process exited {child.returncode}"
        )
    return json.loads(child.stdout)["drawn"]


# ---------------------------------------------------------------- post-mortem


def add_arguments(p):
    """`--plot FILE` and its options, in python3 -m ovf.postmortem."""
    g = p.add_argument_group("the picture (ovf plot)")
    g.add_argument(
        "--plot",
        metavar="FILE",
        default=None,
        help=(
            "draw each core's ring into FILE (.png, .svg or .pdf; with several cores "
            "FILE.rankN.png, or FILE.pidN.png outside torch.distributed)"
        ),
    )
    g.add_argument("--module", metavar="GLOB", default=None, help="only modules that match")
    g.add_argument("--batches", action="store_true", help="one column per batch, not per frame")
    g.add_argument("--ops", action="store_true", help="the op observer's records as rows")
    g.add_argument("--last", type=_count, default=None, metavar="N", help="the newest N columns")
    g.add_argument(
        "--cast",
        choices=("fp16", "bf16", "fp8_e4m3", "fp8_e5m2"),
        default=None,
        help="cells: the share of values a cast to this type would lose (--cast-shares runs)",
    )
    g.add_argument(
        "--loss",
        choices=("overflow", "flush", "subnormal"),
        default="overflow",
        help="with --cast: what is lost (default overflow)",
    )


def _count(text):
    import argparse

    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count (an integer >= 1)")
    return int(text)


def plot_name_ok(path):
    """Whether `--plot FILE` names a picture: refused in one line before any core
    is read, not after a listing (an empty name drew nothing, without a word)."""
    from ovf_plugin.plot.render import FORMATS  # the drawing's own list; no matplotlib yet

    if not path.strip():
        print("ovf: --plot needs a file name, e.g. --plot ovf-plot.png", file=sys.stderr)
        return False
    if os.path.splitext(path)[1].lower().lstrip(".") not in FORMATS:
        print(f"ovf: --plot {path}: the file name must end in .png, .svg or .pdf", file=sys.stderr)
        return False
    return True


def plot_cores(cores, args, out):
    """Draws each readable core; the lines saying what was written go to `out`,
    errors to stderr. Returns True if every picture was drawn."""
    from ovf_plugin import plot  # the drawing, beside this package
    from ovf_ring.errors import OvfError

    options = plot.Options.from_args(args)
    readable = [c for c in cores if c.ring is not None]
    ok = True
    written = set()
    for core in readable:
        path = args.plot
        if len(readable) > 1:
            h = core.ring.header
            stem, ext = os.path.splitext(path)
            who = f"rank{h.rank}" if h.rank >= 0 else f"pid{h.pid}"
            path = f"{stem}.{who}{ext}"
            n = 2
            while path in written:  # two cores of one rank: several runs
                path, n = f"{stem}.{who}-{n}{ext}", n + 1
        written.add(path)
        program = plot.script_of(core.ring) or plot.command_line(core=core.path)
        try:
            _, text = plot.plot(core.ring, path, options, program, [c.path for c in cores])
        except OvfError as e:
            print(f"{e} ({core.path})", file=sys.stderr)
            ok = False
            continue
        out.write(text)
    return ok and len(readable) == len(cores)
