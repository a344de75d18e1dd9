"""python3 -m ovf [options] script.py [args...]: run an unmodified script with ovf on."""

import argparse
import os
import runpy
import sys

from . import _options

# The OVF_* variable each option sets (what the bootstrap reads in the script's process).
OPTION_OF = {
    "OVF_ON_NAN": "--on-nan",
    "OVF_MAX_FRAMES": "--max-frames",
    "OVF_TRACE_BATCHES": "--trace-batches",
    "OVF_ABORT_AFTER": "--abort-after",
    "OVF_MODULE": "--module",
    "OVF_AFTER_BATCH": "--after-batch",
    "OVF_HEADROOM": "--headroom",
    "OVF_RING_CAPACITY": "--ring-capacity",
    "OVF_WAIT_TIMEOUT": "--wait-timeout",
    "OVF_DEVICE_MODE": "--device-mode",
    "OVF_STOP": "--stop",
    "OVF_IF": "--if",
    "OVF_SCALER_SKIPS": "--scaler-skips",
    "OVF_SCALE_FLOOR": "--scale-floor",
    "OVF_EARLY_HORIZON": "--early-horizon",
    "OVF_UPDATE_RATIO": "--update-ratio",
    "OVF_EVENT_DIR": "--event-dir",
    "OVF_DUMP_BATCH": "--dump-batch",
    "OVF_REPLAY": "--no-replay",
    "OVF_COMPILED_OPS": "--compiled-ops",
}
# What --stop may name: the kinds of value that stop the run.
STOP_KINDS = ("nan", "inf")
# The variables set whether or not their option was typed, and the options (argparse
# dests) that set each: the ones a session's own value may stand for (_keep_session_options).
SET_BY_DEFAULT = {
    "OVF_ON_NAN": {"on_nan"},
    "OVF_MAX_FRAMES": {"max_frames"},
    "OVF_TRACE_BATCHES": {"trace_batches"},
    "OVF_ABORT_AFTER": {"abort_after"},
    "OVF_MODULE": {"module"},
    "OVF_AFTER_BATCH": {"after_batch"},
    "OVF_HEADROOM": {"headroom"},
    "OVF_STOP": {"stop"},
    "OVF_OBSERVE": {"ops", "backward", "optimizer_state", "cast_shares", "capture"},
}


def _parser():
    p = argparse.ArgumentParser(
        prog="python3 -m ovf",
        description=(
            "Run a PyTorch script with inf/nan detection in every module forward, "
            "without changing it. The report is DebugUnderflowOverflow's."
        ),
    )
    p.add_argument(
        "--on-nan",
        choices=_options.ON_EVENT_CHOICES,
        default="raise",
        help=(
            "what the first inf/nan does: raise (default), warn (report once, go on, exit 1), "
            "abort (report, then dump core), wait (report, wait for gdb/lldb to attach), "
            "pdb (replay the step and stop in pdb at the line of the op that made it, then "
            "raise)"
        ),
    )
    p.add_argument(
        "--max-frames", type=int, default=21, metavar="N", help="frames in the report (21)"
    )
    p.add_argument(
        "--trace-batches",
        default="",
        metavar="LIST",
        help="comma-separated batch numbers to trace frame by frame (0-indexed)",
    )
    p.add_argument("--abort-after", type=int, default=None, metavar="N", help="stop after batch N")
    p.add_argument("--module", default="", metavar="GLOB", help="only modules whose path matches")
    p.add_argument(
        "--stop",
        default="nan,inf",
        metavar="KINDS",
        help=(
            "what stops the run: nan, inf or nan,inf (default). With --stop nan an overflow "
            "to inf is recorded, not raised (a loss scaler that skips the step); "
            "ovf.expected_nonfinite() marks such a region in the code instead"
        ),
    )
    p.add_argument(
        "--after-batch", type=int, default=0, metavar="N", help="ignore batches before N"
    )
    p.add_argument(
        "--if",
        dest="condition",
        default=None,
        metavar="EXPR",
        help=(
            "stop only where EXPR holds for a line that fired, as the debuggers' "
            "`ovf break-on-nan --if` (names: absmax, absmin, nan, inf, numel, module, cls, "
            "batch, kind, label, dtype, event, op, producer)"
        ),
    )
    p.add_argument(
        "--ring-capacity", type=int, default=None, metavar="N", help="records kept (65536)"
    )
    p.add_argument(
        "--wait-timeout",
        type=float,
        default=None,
        metavar="S",
        help="with --on-nan wait: go on after S seconds without a debugger (default: wait)",
    )
    p.add_argument(
        "--device-mode",
        choices=sorted(_options.DEVICE_MODES),
        default=None,
        help=(
            "GPU tensors: fast (default; no sync in the hooks, the stop comes at most one "
            "batch late and names the exact frame) or exact (one sync per frame, the stop "
            "is inside the frame)"
        ),
    )
    p.add_argument(
        "--ops",
        action="store_true",
        help="also check every ATen op's outputs: names the op (and line) that produced the NaN",
    )
    p.add_argument(
        "--compiled-ops",
        choices=("kept", "every"),
        default=None,
        help=(
            "with --ops, inside torch.compile'd graphs: check the outputs Inductor keeps anyway "
            "(kept, the default: fusion stays) or every node's (every: exact, nothing fuses)"
        ),
    )
    p.add_argument(
        "--headroom",
        choices=sorted(_options.HEADROOM_DTYPES),
        default=None,
        help=(
            "count each tensor's values below this dtype's smallest normal (shown by the "
            "debuggers' ovf frames --headroom)"
        ),
    )
    p.add_argument(
        "--cast-shares",
        action="store_true",
        help=(
            "count in each tensor the values a cast to fp16, bf16, fp8 e4m3 and fp8 e5m2 "
            "would overflow, flush to zero or make subnormal (ovf frames --headroom, ovf plot)"
        ),
    )
    p.add_argument(
        "--optimizer-state",
        action="store_true",
        help="after each optimizer step also check its state tensors (Adam's moments)",
    )
    p.add_argument(
        "--backward",
        action="store_true",
        help="also check the ops of the backward pass, named by the forward op they differentiate",
    )
    p.add_argument(
        "--scaler-skips",
        type=int,
        default=None,
        metavar="N",
        help="stop when a loss scaler (GradScaler) skips N steps in a row (default 0: never)",
    )
    p.add_argument(
        "--scale-floor",
        type=float,
        default=None,
        metavar="X",
        help=(
            "stop when a skipped step takes a loss scaler's scale below X (default 1: a scale "
            "that shrinks the loss; 0: never)"
        ),
    )
    p.add_argument(
        "--early",
        action="store_true",
        help=(
            "stop before the first inf/nan: when a module's output grows fast enough to pass "
            "its dtype's largest value within --early-horizon batches, or an optimizer step "
            "changes the weights by more than --update-ratio times their size"
        ),
    )
    p.add_argument(
        "--early-horizon",
        type=int,
        default=None,
        metavar="K",
        help=f"with --early: batches ahead to look (default {_options.EARLY_HORIZON})",
    )
    p.add_argument(
        "--update-ratio",
        type=float,
        default=None,
        metavar="X",
        help=(
            "with --early: the update-to-weight ratio |dw|/|w| of an optimizer step that warns "
            f"(default {_options.UPDATE_RATIO:g}; 0: steps not measured)"
        ),
    )
    p.add_argument(
        "--event-dir",
        default=None,
        metavar="DIR",
        help=(
            "leave a small summary of the first inf/nan in DIR (one file a process), for "
            "python3 -m ovf.ranks DIR: which rank of a job produced it first"
        ),
    )
    p.add_argument(
        "--dump-batch",
        default=None,
        metavar="DIR",
        help=(
            "save the step that made the first inf/nan in DIR (its inputs, parameters and "
            "random state) for ovf.replay_batch(model, path), outside the job"
        ),
    )
    p.add_argument(
        "--no-replay",
        action="store_true",
        help=(
            "at a module's inf/nan, do not run the step's forward again with its ops observed "
            "to name the op that made it (the replay: once a run, nothing of it stays)"
        ),
    )
    p.add_argument(
        "--capture",
        choices=["optimizer"],
        default=None,
        help=(
            "optimizer: copy the parameters and state each optimizer step starts from, so "
            "that a NaN/Inf the step writes (or its backward made) is replayed with its ops "
            "observed (costs a copy of the parameters and the optimizer's state a step)"
        ),
    )
    p.add_argument("script", help="the training script")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    return p


def _typed_options(parser, argv, args):
    """The options the command line gave (argparse dests), typed even where the value
    is the default: parsed again with every default suppressed (argparse keeps no
    record of what was typed; set_defaults would feed SUPPRESS to the types)."""
    for action in parser._actions:  # noqa: SLF001 - the only handle on the defaults
        if action.dest in vars(args) and action.dest != "args":
            action.default = argparse.SUPPRESS
    return set(vars(parser.parse_args(argv)))


def _keep_session_options(env, typed):
    """A process of an ovf session (a debugger's `ovf break-on-nan` before `run`, an
    exec that ovf followed: OVF_ENABLE=1 and the session's OVF_* variables) keeps
    the session's options where the command line typed none: under `gdb --args
    python -m ovf train.py`, `ovf break-on-nan --ops` still stops after the op.
    The op levels typed are added to the session's."""
    if os.environ.get("OVF_ENABLE") != "1":
        return
    session_observe = [kind for kind in os.environ.get("OVF_OBSERVE", "").split(",") if kind]
    for variable, dests in SET_BY_DEFAULT.items():
        if variable in os.environ and not dests & typed:
            del env[variable]
    if session_observe and "OVF_OBSERVE" in env:
        typed_observe = [kind for kind in env["OVF_OBSERVE"].split(",") if kind]
        env["OVF_OBSERVE"] = ",".join(dict.fromkeys(session_observe + typed_observe))


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    env = {
        "OVF_ON_NAN": args.on_nan,
        "OVF_MAX_FRAMES": str(args.max_frames),
        "OVF_TRACE_BATCHES": args.trace_batches,
        "OVF_ABORT_AFTER": "" if args.abort_after is None else str(args.abort_after),
        "OVF_MODULE": args.module,
        "OVF_AFTER_BATCH": str(args.after_batch),
        "OVF_HEADROOM": args.headroom or "",
        "OVF_STOP": args.stop,
        "OVF_OBSERVE": ",".join(
            name
            for name, on in (
                ("ops", args.ops),
                ("backward", args.backward),
                ("optimizer_state", args.optimizer_state),
                ("cast", args.cast_shares),
                ("capture_optimizer", args.capture == "optimizer"),
            )
            if on
        ),
    }
    _keep_session_options(env, _typed_options(parser, argv, args))
    if args.ring_capacity is not None:
        env["OVF_RING_CAPACITY"] = str(args.ring_capacity)
    if args.compiled_ops is not None:
        env["OVF_COMPILED_OPS"] = args.compiled_ops
    if args.scaler_skips is not None:
        env["OVF_SCALER_SKIPS"] = str(args.scaler_skips)
    if args.scale_floor is not None:
        env["OVF_SCALE_FLOOR"] = repr(args.scale_floor)
    if args.early:
        env["OVF_EARLY"] = "1"
    if args.early_horizon is not None:
        env["OVF_EARLY_HORIZON"] = str(args.early_horizon)
    if args.update_ratio is not None:
        env["OVF_UPDATE_RATIO"] = repr(args.update_ratio)
    if (args.early_horizon is not None or args.update_ratio is not None) and not args.early:
        print("ovf: --early-horizon and --update-ratio tune --early: add --early", file=sys.stderr)
        return 2
    if args.event_dir is not None:
        env["OVF_EVENT_DIR"] = args.event_dir
    if args.dump_batch is not None:
        env["OVF_DUMP_BATCH"] = args.dump_batch
    if args.no_replay:
        if args.on_nan == "pdb":
            print(
                "ovf: --on-nan pdb stops in the replay of the failing step: drop --no-replay",
                file=sys.stderr,
            )
            return 2
        if args.capture == "optimizer":
            print(
                "ovf: --capture optimizer is for the replay of an optimizer's step: drop"
                " --no-replay",
                file=sys.stderr,
            )
            return 2
        env["OVF_REPLAY"] = "0"
    if args.wait_timeout is not None:
        env["OVF_WAIT_TIMEOUT"] = repr(args.wait_timeout)
    if args.device_mode is not None:
        env["OVF_DEVICE_MODE"] = args.device_mode
    if args.condition is not None:
        from . import _condition

        try:
            _condition.parse(args.condition)
        except _options.OptionError as e:
            print(str(e).removesuffix(" (--if)"), file=sys.stderr)
            return 2
        env["OVF_IF"] = args.condition
    kinds = [k.strip() for k in args.stop.split(",") if k.strip()]
    if not kinds or any(k not in STOP_KINDS for k in kinds):
        print(
            f"ovf: --stop {args.stop!r}: give nan, inf or nan,inf (what stops the run)",
            file=sys.stderr,
        )
        return 2
    try:
        _options.from_environment({**os.environ, **env})
    except _options.OptionError as e:
        # Name the option as it was typed, when it was typed.
        message = str(e)
        for variable, option in OPTION_OF.items():
            if variable in env and os.environ.get(variable) != env[variable]:
                message = message.replace(f"environment variable {variable}", option).replace(
                    variable, option
                )
        print(message, file=sys.stderr)
        return 2
    if not os.path.isfile(args.script):
        print(f"ovf: cannot open script {args.script!r}: no such file", file=sys.stderr)
        return 2
    os.environ.update(env)
    if "TORCHELASTIC_RUN_ID" in os.environ and os.environ.get("USE_LIBUV") == "0":
        # A rank under torch's launcher asked for stores without libuv: its env://
        # rendezvous store ignores that on torch 2.x (see _torchrun); make it follow.
        from ._torchrun import follow_use_libuv

        follow_use_libuv()
    from . import _auto, _exec_follow

    _auto.enable_from_environment()
    _exec_follow.install()
    sys.argv = [args.script] + args.args
    sys.path[0] = os.path.dirname(os.path.abspath(args.script))
    runpy.run_path(args.script, run_name="__main__")
    from . import _hooks

    # Judged here, not in an exit handler, so that a non-finite value found only
    # now still makes the exit status non-zero the usual way.
    return _hooks.judge_pending()


if __name__ == "__main__":
    sys.exit(main())
