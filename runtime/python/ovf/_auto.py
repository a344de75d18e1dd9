"""Auto mode: watch every model a script runs, without a code change.

Global hooks see every module call. The first call of a module ovf has not
named makes it a root: it and its submodules are named from it, as
``model.named_modules()`` would. The largest root with parameters is the batch root (a
loss module called beside it is a root too, but a small one). Batches are the
user's training steps (_steps.py).
"""

import warnings

import torch

from . import _dump_batch, _held_step, _hooks, _options, _ovf, _replay

_root_sizes = {}  # root module -> number of modules under it
_batch_root = None
_enabled = False


def _wrapped_model(module):
    """The model a wrapper runs, or None: torch.compile's OptimizedModule (`_orig_mod`),
    DistributedDataParallel and DataParallel (`module`). A wrapper is not a module of
    the program's own: the model's modules keep the names they have without it (no
    `_orig_mod.`, no `module.`), as the reference names them given the model."""
    if type(module).__name__ == "OptimizedModule":
        return _held_step.compiled_model(module)
    if isinstance(module, (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)):
        inner = getattr(module, "module", None)
        return inner if isinstance(inner, torch.nn.Module) else None
    return None


def discover(module, becomes_batch_root=None):
    """Names `module` and its submodules; called by the C++ pre-hook on first sight.
    It becomes the batch root when it is the largest root seen (or when told)."""
    global _batch_root
    inner = _wrapped_model(module)
    if inner is not None:
        # The wrapper stays unwatched (the pre-hook asks again at each call): name its
        # model once; torch.compile's wrapper of the batch root holds its steps.
        if not _ovf.is_watched(inner):
            discover(inner, becomes_batch_root)
        if inner is _batch_root and _holds_steps() and _held_step.compiled_model(module):
            _held_step.attach(module)
        return
    named = list(_hooks.eager_named_modules(module))
    size = (_trains(module), len(named))
    if becomes_batch_root is None:
        becomes_batch_root = _batch_root is None or size > _root_sizes.get(_batch_root, (False, 0))
    for name, sub in named:
        # a larger root renames what a smaller one named first
        if becomes_batch_root or not _ovf.is_watched(sub):
            root = sub is module
            _hooks.watch(sub, name, root and becomes_batch_root, step_root=root and size[0])
    _root_sizes[module] = size
    if becomes_batch_root:
        _batch_root = module
        if _holds_steps():
            _held_step.attach(module)


def _holds_steps():
    """Whether the batch root's forwards are held: for the replay or a batch dump."""
    return _dump_batch.enabled() or _replay.armed()


def _trains(module):
    """Whether calling `module` is a training step's work (_steps.py): it holds
    parameters (a transform, a loss module hold none) and runs outside a DataLoader
    worker (whose modules prepare data)."""
    if torch.utils.data.get_worker_info() is not None:
        return False
    return next(module.parameters(), None) is not None


def adopt(model):
    """An explicit DebugUnderflowOverflow(model) joins this session: `model` is
    the batch root from now on."""
    discover(model, becomes_batch_root=True)


def is_enabled():
    return _enabled


def _register_global_forward_hook():
    _hooks.hooks_installed()
    # torch >= 2.10 warns at every torch.compile(module) that global hooks fire once more
    # for the OptimizedModule wrapper: ovf's do not, it leaves the wrapper unwatched
    # (eager names); the warning would only mislead.
    warnings.filterwarnings(
        "ignore",
        message=r"Using `torch\.compile\(module\)` when there are global hooks",
        category=UserWarning,
    )
    return torch.nn.modules.module.register_module_forward_hook(_ovf.forward_hook, with_kwargs=True)


def enable(
    on_nan="raise",
    max_frames_to_save=21,
    trace_batch_nums=(),
    abort_after_batch_num=None,
    module="",
    after_batch=0,
    above=None,
    below=None,
    ring_capacity=None,
    stop_mask=None,
    observe=0,
    headroom=None,
    wait_timeout=0.0,
    device_mode="fast",
    condition=None,
    scaler_skips=0,
    scale_floor=1.0,
    early=False,
    early_horizon=_options.EARLY_HORIZON,
    update_ratio=_options.UPDATE_RATIO,
    cast=None,
    cast_limits=(None, None, None),
    event_dir=None,
    dump_batch=None,
    replay=True,
):
    """Turns detection on for every model this process runs. Idempotent.

    stop_mask: the events that stop (bits of ring.h's ovf_stop_bits); by default
    NaN and Inf, plus above/below when those thresholds are given.
    observe: also check every ATen op's outputs (_options.OBSERVE_BITS["ops"]) and
    those of the backward pass ("backward"); copy what each optimizer step starts
    from, for the replay of a NaN/Inf it writes ("capture_optimizer").
    headroom: "fp16", "bf16", "fp8_e4m3" or "fp8_e5m2": every line also counts
    its values below that dtype's smallest normal (ovf frames --headroom).
    wait_timeout: wait mode goes on after this many seconds without a debugger.
    scaler_skips, scale_floor: a loss scaler (GradScaler) gives up, an event, at
    this many skipped steps in a row (0: never) or at a skip that takes its scale
    below the floor (0: none; the default 1 is a scale that shrinks the loss).
    early: stop before the first inf/nan (EarlyWarningError) when a module's output
    grows fast enough to pass its dtype's largest value within early_horizon
    batches, or an optimizer step's update-to-weight ratio exceeds update_ratio
    (0: steps not measured).
    device_mode: "fast" or "exact", how device tensors' statistics are waited for
    (_options.device_mode_code).
    condition: an --if expression (_condition.py) each NaN/Inf/backward event must
    satisfy, or None.
    cast, cast_limits: a debugger's stop (`ovf watch --cast`) when a line's cast to
    this target ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2") would lose more than a
    share of its values: (overflow, flush, subnormal), None for one not watched.
    Lines then count their cast losses; without a debugger the stop only marks
    the ring, as --above does.
    event_dir: a directory where the process's first NaN/Inf event leaves a small
    JSON summary (rank, batch, time, op, module, line, producer or carrier) for
    `python3 -m ovf.ranks DIR`, the verdict of a whole job; None: under torch's
    launcher the rank's folder of its logs, else none.
    dump_batch: a directory where the step that made the first NaN/Inf is saved
    (its inputs, parameters and random state: ovf.replay_batch runs it again).
    replay: at a module's first NaN/Inf, run the step's forward again with its ops
    observed and name the op that made it (_replay.py).

    Every option is checked before anything is switched on: a refused one
    leaves the process as it was."""
    global _enabled
    on_event = _options.on_event_code(on_nan, replay=replay)
    device = _options.device_mode_code(device_mode)
    frames = _options.max_frames(max_frames_to_save)
    trace = _options.batch_list(trace_batch_nums)
    abort_after = _options.optional_batch(abort_after_batch_num)
    control = {
        "module_glob": _options.module_glob(module),
        "after_batch": _options.batch_number(after_batch),
        "observe": int(observe),
        "headroom_dtype": _options.headroom_code(headroom),
        "scaler_max_skips": _options.scaler_skips(scaler_skips),
        "scale_floor": _options.scale_floor(scale_floor),
        **_options.early_control(early, early_horizon, update_ratio),
        **_options.cast_control(cast, cast_limits),
    }
    if cast is not None:
        control["observe"] |= _options.OBSERVE_BITS["cast"]
    if not replay and observe & _options.OBSERVE_BITS["capture_optimizer"]:
        raise _options.OptionError(
            "ovf: the optimizer's capture is for the replay of its step, which is off"
            " (replay=False): turn the replay on or leave the capture out"
        )
    wait_timeout = _options.seconds(wait_timeout)
    # Under torchrun, by default beside the rank's own logs: python3 -m ovf.ranks LOG_DIR.
    summary_dir = _options.event_dir(event_dir) or _options.launcher_log_dir()
    dump_dir = _options.dump_batch_dir(dump_batch, on_nan)
    if condition is not None:
        from . import _condition

        _condition.parse(condition, "OVF_IF")
    if ring_capacity is not None:
        _ovf.configure_ring(_options.ring_capacity(ring_capacity))
    mask = _options.STOP_BITS["nan"] | _options.STOP_BITS["inf"] | _options.STOP_BITS["scaler"]
    if above is not None:
        mask |= _options.STOP_BITS["above"]
        control["above"] = float(above)
    if below is not None:
        mask |= _options.STOP_BITS["below"]
        control["below"] = float(below)
    if observe & _options.OBSERVE_BITS["backward"]:
        mask |= _options.STOP_BITS["backward"]
    if early:
        mask |= _options.STOP_BITS["early"]
    if cast is not None:
        mask |= _options.STOP_BITS["cast"]
    if not _enabled:
        from . import _early, _optimizer, _raise_points, _samples, _scaler, _steps

        _hooks.hooks_installed()
        torch.nn.modules.module.register_module_forward_pre_hook(_ovf.forward_pre_hook)
        _register_global_forward_hook()
        _early.install()  # first: its step hook runs before the step ends the batch
        _optimizer.install()
        _scaler.install()
        _raise_points.install()
        _samples.install()
        _enabled = True
    _ovf.start_session(frames, trace, abort_after, on_event, device, training_steps=True)
    from . import _steps

    _steps.start()
    if stop_mask is not None:  # the kinds asked for; backward ops stop for those kinds too
        mask = stop_mask | (mask & (_options.STOP_BITS["backward"] | _options.STOP_BITS["early"]))
        if stop_mask & (_options.STOP_BITS["nan"] | _options.STOP_BITS["inf"]):
            mask |= _options.STOP_BITS["scaler"]  # a scaler that gives up: NaN/Inf gradients
    _ovf.set_control(stop_mask=mask, **control)
    _ovf.set_wait_timeout(wait_timeout)
    _ovf.set_event_summary_dir(summary_dir)
    _dump_batch.configure(dump_dir, _batch_root)
    _replay.configure(replay, _batch_root, pdb=on_nan == "pdb")
    if condition is not None:
        _condition.install(condition)
    _ovf.sync_op_observer()
    if on_nan == "abort" and not _ovf.enable_core_dumps():
        print(
            (
                "ovf: core dumps are disabled by the hard limit (ulimit -H -c); on_nan=abort will "
                "abort without a core file"
            ),
            file=__import__("sys").stderr,
        )


def enable_from_environment():
    """enable() with the options of the OVF_* environment variables."""
    opts = _options.from_environment()
    enable(
        on_nan=opts["on_nan"],
        max_frames_to_save=opts["max_frames_to_save"],
        trace_batch_nums=opts["trace_batch_nums"],
        abort_after_batch_num=opts["abort_after_batch_num"],
        module=opts["module"],
        after_batch=opts["after_batch"],
        above=opts["above"],
        below=opts["below"],
        ring_capacity=opts["ring_capacity"],
        stop_mask=opts["stop_mask"],
        observe=opts["observe"],
        headroom=opts["headroom"],
        wait_timeout=opts["wait_timeout"],
        device_mode=opts["device_mode"],
        condition=opts["condition"],
        scaler_skips=opts["scaler_skips"],
        scale_floor=opts["scale_floor"],
        early=opts["early"],
        early_horizon=opts["early_horizon"],
        update_ratio=opts["update_ratio"],
        cast=opts["cast"],
        cast_limits=opts["cast_limits"],
        event_dir=opts["event_dir"],
        dump_batch=opts["dump_batch"],
        replay=opts["replay"],
    )
