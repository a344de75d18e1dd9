"""Validation of ovf's options, shared by the Python API, ``python3 -m ovf`` and
the OVF_* environment variables. Every error is one line saying what to do."""

import os

# First: torch loads the libraries _ovf links (libtorch_python, libc10, ...) from its own
# directory, wherever ovf was installed beside it (a venv, --user, a copy).
import torch  # noqa: F401, I001

from . import _ovf

ON_EVENT_CHOICES = ("raise", "warn", "abort", "wait", "continue", "pdb")
# OVF_STOP and OVF_OBSERVE names: the control block's bits (ring.h, enum
# ovf_stop_bits and enum ovf_observe_bits) as the runtime names them.
STOP_BITS = dict(_ovf.STOP_BITS)
OBSERVE_BITS = dict(_ovf.OBSERVE_BITS)


class OptionError(ValueError):
    """A bad option value; the message names the option and what it accepts."""


DEVICE_MODES = dict(_ovf.DEVICE_MODES)  # fast, exact (ring.h, enum ovf_device_mode)


def device_mode_code(value, where="device_mode"):
    """How device tensors' statistics are waited for: "fast" (no sync in the hook; a
    frame is judged when its statistics arrive, at the latest one batch later) or
    "exact" (one sync per frame: the stop is inside the frame)."""
    if value not in DEVICE_MODES:
        raise OptionError(f"ovf: {where} must be fast or exact; got {value!r}")
    return DEVICE_MODES[value]


def on_event_code(value, where="on_nan", replay=True):
    """The runtime's on_event for an on_nan value. "pdb" raises, after the replay at the
    event stopped in pdb (_replay_pdb.py): it needs the replay."""
    if value not in ON_EVENT_CHOICES:
        raise OptionError(
            f"ovf: {where} must be one of {', '.join(ON_EVENT_CHOICES)}; got {value!r}"
        )
    if value == "pdb" and not replay:
        raise OptionError(
            f"ovf: {where} pdb stops in the replay of the failing step, which is off here"
            " (--no-replay, or DebugUnderflowOverflow(model), which keeps the reference's"
            " behaviour): use python3 -m ovf --on-nan pdb or ovf.enable(on_nan='pdb')"
        )
    return _ovf.ON_EVENT["raise" if value == "pdb" else value]


# What the runtime's fields hold (ring.h): max_frames_to_save is a uint32, batch
# numbers int64, the ring's capacity a power of two the runtime caps at 2^30.
MAX_FRAMES = 2**32 - 1
MAX_BATCH = 2**63 - 1
RING_CAPACITY = (64, 2**30)
GLOB_BYTES = 255


def _integer(value, where, low, high, what):
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise OptionError(f"ovf: {where} must be {what}; got {value!r}")
    return value


def max_frames(value, where="max_frames_to_save"):
    return _integer(value, where, 1, MAX_FRAMES, f"an integer from 1 to {MAX_FRAMES}")


def batch_number(value, where="after_batch"):
    return _integer(
        value, where, 0, MAX_BATCH, f"a batch number (an integer from 0 to {MAX_BATCH})"
    )


def batch_list(value, where="trace_batch_nums"):
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise OptionError(
            f"ovf: {where} must be a list of batch numbers (ints >= 0); got {value!r}"
        )
    batches = list(value)
    for b in batches:
        if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b <= MAX_BATCH:
            raise OptionError(
                f"ovf: {where} must hold batch numbers (ints from 0 to {MAX_BATCH}); got {b!r}"
            )
    return batches


def optional_batch(value, where="abort_after_batch_num"):
    if value is None:
        return -1
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_BATCH:
        raise OptionError(
            f"ovf: {where} must be None or an integer from 0 to {MAX_BATCH}; got {value!r}"
        )
    return value


def ring_capacity(value, where="ring capacity"):
    low, high = RING_CAPACITY
    value = _integer(value, where, low, high, f"an integer from {low} to {high} (records)")
    refusal = _ovf.ring_capacity_refusal(value)  # what this machine's memory holds
    if refusal:
        raise OptionError(f"ovf: {where}={value} {refusal}")
    return value


def module_glob(value, where="module"):
    if len(value.encode("utf-8", "surrogateescape")) > GLOB_BYTES:
        raise OptionError(
            f"ovf: {where} holds at most {GLOB_BYTES} bytes (UTF-8); got "
            f"{len(value.encode('utf-8', 'surrogateescape'))}"
        )
    return value


def _magnitude(value, where, what):
    """A finite number >= 0, as a float; else "ovf: <where> must be <what>; got ..."."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0 <= value < float("inf")
    ):
        raise OptionError(f"ovf: {where} must be {what}; got {value!r}")
    return float(value)


def seconds(value, where="wait timeout"):
    return _magnitude(value, where, "a number of seconds >= 0 (0: wait for ever)")


def scaler_skips(value, where="scaler_skips"):
    """Skipped loss-scaler steps in a row that stop the run (0: never)."""
    return _integer(value, where, 0, 2**32 - 1, "an integer >= 0 (0: no limit)")


def scale_floor(value, where="scale_floor"):
    """The loss scale a skip must not take the scaler below (0: no floor)."""
    return _magnitude(value, where, "a finite number >= 0 (0: no floor)")


# The early warning's defaults: a module's output that passes its dtype's largest value
# within 4 batches at its growth; a step that moves the weights by their own size.
EARLY_HORIZON = 4
UPDATE_RATIO = 1.0


def early_horizon(value, where="early_horizon"):
    """Batches ahead the early warning looks for a module's growth (>= 1)."""
    return _integer(value, where, 1, 2**32 - 1, "a number of batches >= 1")


def update_ratio(value, where="update_ratio"):
    """The update-to-weight ratio of an optimizer step that warns (0: not measured)."""
    return _magnitude(value, where, "a finite number >= 0 (0: steps not measured)")


def early_control(early, horizon, ratio):
    """The control block's early-warning fields for early=, early_horizon=, update_ratio=
    (both 0 when early is off: nothing followed, nothing measured)."""
    return {
        "early_horizon": early_horizon(horizon) if early else 0,
        "update_ratio_max": update_ratio(ratio) if early else 0.0,
    }


# Cast targets by the names --cast takes (ring.h's ovf_cast_target), and the losses.
CAST_TARGETS = dict(_ovf.CAST_TARGETS)
CAST_LOSSES = ("overflow", "flush", "subnormal")


def cast_control(target, limits, where="cast"):
    """The control block's cast fields for a target name and its (overflow, flush,
    subnormal) share limits, None for a limit that is off; {} when target is None."""
    if target is None:
        if any(x is not None for x in limits):
            raise OptionError(
                f"ovf: {where} limits need a target: fp16, bf16, fp8_e4m3 or fp8_e5m2"
            )
        return {}
    if target not in CAST_TARGETS:
        raise OptionError(f"ovf: {where} must be one of {', '.join(CAST_TARGETS)}; got {target!r}")
    if all(x is None for x in limits):
        raise OptionError(
            f"ovf: {where} {target}: give a share limit (overflow, flush or subnormal)"
        )
    out = {"cast_target": CAST_TARGETS[target]}
    for name, limit in zip(CAST_LOSSES, limits, strict=True):
        if limit is not None:
            limit = _magnitude(limit, f"{where} {name}", "a share from 0 to 1")
            if limit > 1:
                raise OptionError(f"ovf: {where} {name} must be a share from 0 to 1; got {limit!r}")
        out[f"cast_{name}_max"] = -1.0 if limit is None else limit
    return out


def event_dir(value, where="event_dir"):
    """The directory for event summaries as an absolute path ("" for None): one that
    exists and this process may write to (checked now, not at the event)."""
    if value is None or value == "":
        return ""
    if not isinstance(value, (str, os.PathLike)):
        raise OptionError(f"ovf: {where} must be a directory's path; got {value!r}")
    path = os.path.abspath(os.fspath(value))
    if not os.path.isdir(path):
        raise OptionError(
            f"ovf: {where} {os.fspath(value)!r} is not a directory: make it first "
            "(every rank writes its own file there)"
        )
    if not os.access(path, os.W_OK | os.X_OK):
        raise OptionError(f"ovf: {where} {os.fspath(value)!r} is not writable by this process")
    return path


def dump_batch_dir(value, on_nan, where="dump_batch"):
    """--dump-batch's directory (event_dir's checks), or None; refused with on_nan
    abort, which ends the process at the event, before any safe point to save at."""
    path = event_dir(value, where) or None
    if path is not None and on_nan == "abort":
        raise OptionError(
            f"ovf: {where} saves the failing step once the event is answered; on_nan abort ends"
            " the process at the event (its core holds the step): choose one"
        )
    return path


def launcher_log_dir():
    """The rank's own folder of torch's launcher's logs (torchrun names its error file
    there: LOG_DIR/<run>/attempt_<n>/<local rank>/error.json), or "" outside it."""
    error_file = os.environ.get("TORCHELASTIC_ERROR_FILE", "")
    folder = os.path.dirname(error_file) if error_file else ""
    return folder if folder and os.path.isdir(folder) and os.access(folder, os.W_OK) else ""


def _env_int(name, text):
    try:
        return int(text)
    except ValueError:
        raise OptionError(
            f"ovf: environment variable {name} must be an integer; got {text!r}"
        ) from None


def _env_switch(name, text):
    """An on/off variable: "1" on, "" or "0" off."""
    if text.strip() not in ("", "0", "1"):
        raise OptionError(
            f"ovf: environment variable {name} must be 1 (on) or 0 (off); got {text!r}"
        )
    return text.strip() == "1"


def _env_float(name, text):
    try:
        return float(text)
    except ValueError:
        raise OptionError(
            f"ovf: environment variable {name} must be a number; got {text!r}"
        ) from None


def from_environment(environ=None):
    """The options auto mode reads from OVF_* variables, every one validated
    before anything is switched on."""
    env = os.environ if environ is None else environ
    opts = {
        "on_nan": env.get("OVF_ON_NAN", "raise"),
        "max_frames_to_save": _env_int("OVF_MAX_FRAMES", env.get("OVF_MAX_FRAMES", "21")),
        "trace_batch_nums": [],
        "abort_after_batch_num": None,
        "module": module_glob(env.get("OVF_MODULE", ""), "OVF_MODULE"),
        "after_batch": batch_number(
            _env_int("OVF_AFTER_BATCH", env.get("OVF_AFTER_BATCH", "0")), "OVF_AFTER_BATCH"
        ),
        "above": None,
        "below": None,
        "stop_mask": None,
        "observe": 0,
        "ring_capacity": None,
        "wait_timeout": 0.0,
        "device_mode": env.get("OVF_DEVICE_MODE", "") or "fast",
        "condition": env.get("OVF_IF", "").strip() or None,
        "scaler_skips": 0,
        "scale_floor": 1.0,
        "early": _env_switch("OVF_EARLY", env.get("OVF_EARLY", "")),
        "replay": _env_switch("OVF_REPLAY", env.get("OVF_REPLAY", "") or "1"),
        "early_horizon": EARLY_HORIZON,
        "update_ratio": UPDATE_RATIO,
    }
    on_event_code(opts["on_nan"], "OVF_ON_NAN", opts["replay"])
    if opts["condition"] is not None:
        from . import _condition

        _condition.parse(opts["condition"], "OVF_IF")
    device_mode_code(opts["device_mode"], "OVF_DEVICE_MODE")
    max_frames(opts["max_frames_to_save"], "OVF_MAX_FRAMES")
    trace = env.get("OVF_TRACE_BATCHES", "").strip()
    if any(not part.strip() for part in trace.split(",")) and trace:
        # as the debuggers' `ovf trace-batches` says it: 1,,3 is a typo, not 1,3
        raise OptionError(
            f"ovf: environment variable OVF_TRACE_BATCHES {trace!r} has an empty batch number: "
            "give batch numbers separated by single commas, e.g. 1,3"
        )
    if trace:
        opts["trace_batch_nums"] = batch_list(
            [_env_int("OVF_TRACE_BATCHES", t) for t in trace.split(",") if t.strip()],
            "OVF_TRACE_BATCHES",
        )
    if env.get("OVF_ABORT_AFTER", "").strip():
        opts["abort_after_batch_num"] = optional_batch(
            _env_int("OVF_ABORT_AFTER", env["OVF_ABORT_AFTER"]), "OVF_ABORT_AFTER"
        )
    if env.get("OVF_ABOVE", "").strip():
        opts["above"] = _env_float("OVF_ABOVE", env["OVF_ABOVE"])
    if env.get("OVF_BELOW", "").strip():
        opts["below"] = _env_float("OVF_BELOW", env["OVF_BELOW"])
    for name, option, parse, check in (
        ("OVF_RING_CAPACITY", "ring_capacity", _env_int, ring_capacity),
        ("OVF_WAIT_TIMEOUT", "wait_timeout", _env_float, seconds),
        ("OVF_SCALER_SKIPS", "scaler_skips", _env_int, scaler_skips),
        ("OVF_SCALE_FLOOR", "scale_floor", _env_float, scale_floor),
        ("OVF_EARLY_HORIZON", "early_horizon", _env_int, early_horizon),
        ("OVF_UPDATE_RATIO", "update_ratio", _env_float, update_ratio),
    ):
        if env.get(name, "").strip():
            opts[option] = check(parse(name, env[name]), name)
    if "OVF_STOP" in env:
        opts["stop_mask"] = stop_mask(env["OVF_STOP"], "OVF_STOP")
        opts["early"] = opts["early"] or bool(opts["stop_mask"] & STOP_BITS["early"])
    opts["observe"] = observe_bits(env.get("OVF_OBSERVE", ""), "OVF_OBSERVE")
    opts["headroom"] = env.get("OVF_HEADROOM", "") or None
    headroom_code(opts["headroom"], "OVF_HEADROOM")
    # A debugger's `ovf watch --cast` armed before `run`.
    opts["cast"] = env.get("OVF_CAST", "").strip() or None
    opts["cast_limits"] = tuple(
        _env_float(f"OVF_CAST_{name.upper()}", env[f"OVF_CAST_{name.upper()}"])
        if env.get(f"OVF_CAST_{name.upper()}", "").strip()
        else None
        for name in CAST_LOSSES
    )
    cast_control(opts["cast"], opts["cast_limits"], "OVF_CAST")
    opts["event_dir"] = event_dir(env.get("OVF_EVENT_DIR", ""), "OVF_EVENT_DIR") or None
    opts["dump_batch"] = dump_batch_dir(
        env.get("OVF_DUMP_BATCH", ""), opts["on_nan"], "OVF_DUMP_BATCH"
    )
    return opts


# Headroom targets: the runtime's names for the floating types (enum ovf_dtype codes).
HEADROOM_DTYPES = dict(_ovf.HEADROOM_DTYPES)


def headroom_code(name, where="headroom"):
    """The control block's headroom_dtype for a name ("" or None: off)."""
    if not name:
        return 0
    if name not in HEADROOM_DTYPES:
        raise OptionError(f"ovf: {where} must be one of {', '.join(HEADROOM_DTYPES)}; got {name!r}")
    return HEADROOM_DTYPES[name]


def _bits(text, where, table, what):
    """A comma list of `table`'s names as the bits they stand for."""
    bits = 0
    for name in (n.strip() for n in text.split(",")):
        if not name:
            continue
        if name not in table:
            raise OptionError(f"ovf: {where} names {what} from {', '.join(table)}; got {name!r}")
        bits |= table[name]
    return bits


def observe_bits(text, where="observe"):
    """A comma list from "ops", "backward", "optimizer_state" as the control block's
    observe bits."""
    return _bits(text, where, OBSERVE_BITS, "what to observe")


def stop_mask(text, where="stop"):
    """A comma list of STOP_BITS names (e.g. "nan,inf,traced") as the stop bits."""
    return _bits(text, where, STOP_BITS, "events")
