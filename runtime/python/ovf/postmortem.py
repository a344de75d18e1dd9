"""python3 -m ovf.postmortem CORE... [--frames N] [--json] [--plot FILE]

ovf's frames from core files, with no debugger (machines without gdb): each
core's process and rank, its first non-finite value and last frames; given one
core per rank, which rank went non-finite first. Kernel cores and gcore files.

The reading is ovf_ring's (plugin/ovf_ring/postmortem.py), shipped beside
this package; this module only parses arguments and prints. It does not import
torch, so it starts in a fraction of a second. Exit status: 0, or 2 when a file
could not be read, or only in part (one line on stderr says why).
"""

import argparse
import json
import os
import sys
import traceback

from . import _plot


def _parser():
    p = argparse.ArgumentParser(
        prog="python3 -m ovf.postmortem",
        description=__doc__.split("\n\n")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("cores", nargs="+", metavar="CORE", help="core files, e.g. one per rank")
    p.add_argument(
        "--frames",
        type=_count,
        default=None,
        metavar="N",
        help="frames listed per core (default: the runtime's max_frames_to_save; 0: none)",
    )
    p.add_argument("--json", action="store_true", help="one JSON document instead of text")
    p.add_argument(
        "--python",
        action="store_true",
        help=(
            "also the Python stack and the producing frame's locals at the latest event "
            "(ovf py-bt, ovf py-locals)"
        ),
    )
    _plot.add_arguments(p)
    return p


def _count(text):
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a count (an integer >= 0)")
    return int(text)


def _report(postmortem, cores, count, python=False):
    """Prints each readable core's summary and frames, then the ranks' order;
    the errors go to stderr, one line each."""
    sections = []
    for core in cores:
        if core.error:
            print(core.error, file=sys.stderr)
        if core.ring is None:
            continue
        text = postmortem.summary(core, ring_notes=count == 0)
        if count != 0:
            text += postmortem.frames(core, count)
        if python:
            text += postmortem.python_stack(core)
        sections.append(text)
    if len([c for c in cores if c.ring is not None]) > 1:
        sections.append("\n".join(postmortem.ordering(cores)) + "\n")
    sys.stdout.write("\n".join(sections))


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        # ovf's ring reader, installed (and built) beside this package.
        from ovf_ring import postmortem
    except ImportError as e:
        print(
            f"ovf: cannot import ovf_ring, which is installed beside the ovf package ({e}); "
            "reinstall ovf",
            file=sys.stderr,
        )
        return 2
    if args.plot is not None and not _plot.plot_name_ok(args.plot):
        return 2
    cores = []
    try:
        cores = [postmortem.open_core(path) for path in args.cores]
        if args.json:
            json.dump(postmortem.as_json(cores, args.frames), sys.stdout, indent=1)
            sys.stdout.write("\n")
            for core in cores:
                if core.error:
                    print(core.error, file=sys.stderr)
        else:
            _report(postmortem, cores, args.frames, args.python)
        said = sys.stderr if args.json else sys.stdout
        if args.plot is not None and not _plot.plot_cores(cores, args, said):
            return 2
    except BrokenPipeError:  # `... | head`: the reader has what it wanted
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - so that the exit's flush does not fail again
        return 0
    except Exception as e:  # noqa: BLE001 - a hostile core gets one line, never a traceback
        if os.environ.get("OVF_DEBUG"):
            traceback.print_exc()
        print(
            (
                f"ovf: internal error reading {' '.join(args.cores)} ({type(e).__name__}: {e}); "
                "OVF_DEBUG=1 shows the traceback"
            ),
            file=sys.stderr,
        )
        return 2
    finally:
        for core in cores:
            core.close()
    return 2 if any(core.error for core in cores) else 0


if __name__ == "__main__":
    sys.exit(main())
