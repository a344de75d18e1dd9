"""``ovf.DebugUnderflowOverflow``: transformers.debug_utils' class over ovf's runtime.

Same arguments, same printed report, same exception type (a ValueError), so a
training script switches by changing one import. The frames live in the ring
in native memory, where a debugger or a core file can read them too.
"""

import torch

from . import _hooks, _options, _ovf

_active = None  # the one watching instance: the ring and batch counter are per process


class DebugUnderflowOverflow:
    """Detects the first inf/nan in a model's weights, inputs or outputs.

    Args:
        model: the ``torch.nn.Module`` to watch (every submodule is hooked).
        max_frames_to_save: how many frames the report shows (default 21).
        trace_batch_nums: batches (0-indexed) whose every frame is printed; detection
            is off inside them, as in the reference.
        abort_after_batch_num: raise ValueError once this batch has finished.
        on_nan: what the first inf/nan does without a debugger: "raise" (default,
            the reference), "warn" (report once, go on; the process's exit status is
            then 1), "abort" (report, then abort
            so the kernel writes a core file), "wait" (report, print attach commands,
            wait for a debugger), "continue" (only record; for debuggers).
        ops: also check the outputs of every ATen op run inside the model's forwards
            (records name the op and the innermost module; a debugger stops right
            after the op that produced the NaN, inside the forward).
        backward: also check the ops of the backward pass, named by the forward op
            and module whose gradient they compute.
        optimizers: check the parameters after every optimizer step: a debugger
            stops at the step that wrote the NaN, named by parameter path; without
            one the next forward reports it, as in the reference. "state": the
            optimizer's state tensors (Adam's exp_avg, exp_avg_sq) too.
        keyword_inputs: see all a forward's tensors: its keyword inputs (Hugging Face
            models take most of theirs so: input_ids=..., attention_mask=...) and the
            tensors in lists, dicts and dataclasses (a ModelOutput's logits). Off by
            default: the report is then the reference's, byte for byte, whose hooks
            see positional inputs and the tensors of tuples only. `python3 -m ovf` and
            the debuggers see all.
        device_mode: how the statistics of tensors on a device (a GPU) reach the
            host: "fast" (default: no synchronisation in the hooks; a frame is
            judged when its statistics arrive, at a later hook and at the latest
            at the end of the next batch's forward, and the report still names
            the frame that went non-finite first) or "exact" (one synchronisation
            per frame: the stop is inside the frame).
        early: also stop before the first inf/nan (EarlyWarningError): when a
            module's output grows fast enough to pass its dtype's largest value
            within early_horizon batches (default 4), or an optimizer step changes
            the weights by more than update_ratio times their size (default 1; 0:
            steps not measured).
        cast_shares: every tensor also counts the values that a cast to float16,
            bfloat16, float8_e4m3fn and float8_e5m2 would overflow, flush to zero
            or make subnormal, in the same pass (ovf frames --headroom, the plot,
            a debugger's ovf watch --cast).
    """

    def __init__(
        self,
        model,
        max_frames_to_save=21,
        trace_batch_nums=[],  # noqa: B006 - the reference's signature, never mutated
        abort_after_batch_num=None,
        *,
        on_nan="raise",
        ops=False,
        backward=False,
        optimizers=False,
        device_mode="fast",
        keyword_inputs=False,
        early=False,
        early_horizon=_options.EARLY_HORIZON,
        update_ratio=_options.UPDATE_RATIO,
        cast_shares=False,
    ):
        global _active
        if not isinstance(model, torch.nn.Module):
            raise TypeError(
                "ovf.DebugUnderflowOverflow: model must be a torch.nn.Module; "
                f"got {type(model).__name__}"
            )
        self.model = model
        self.max_frames_to_save = _options.max_frames(max_frames_to_save)
        self.trace_batch_nums = _options.batch_list(trace_batch_nums)
        self.abort_after_batch_num = abort_after_batch_num
        abort_after = _options.optional_batch(abort_after_batch_num)
        on_event = _options.on_event_code(on_nan, replay=False)
        device = _options.device_mode_code(device_mode)
        if optimizers not in (False, True, "state"):
            raise _options.OptionError(
                f"ovf: optimizers must be False, True or 'state'; got {optimizers!r}"
            )
        early_control = _options.early_control(early, early_horizon, update_ratio)
        self._handles = []
        if _active is not None:
            _active.remove()
        # torch.compile(model) wraps the model (as `_orig_mod`): watch the model itself,
        # so that its modules keep the names they have in eager code
        if type(model).__name__ == "OptimizedModule" and isinstance(
            getattr(model, "_orig_mod", None), torch.nn.Module
        ):
            model = model._orig_mod
        # for shared modules only the first name is kept, as in the reference
        self.module_names = {}
        for name, module in _hooks.eager_named_modules(model):
            self.module_names.setdefault(module, name)
        from . import _auto

        if _auto.is_enabled():
            # `python3 -m ovf` or a debugger's `ovf break-on-nan` watches every model
            # already: one process, one session. This model becomes that session's
            # batch root; its options stay those of the first activation.
            _auto.adopt(model)
            self._joined = True
            _active = self
            return
        self._joined = False
        _ovf.clear_modules()
        for module, name in self.module_names.items():
            _hooks.watch(module, name, module is model)
        _hooks.hooks_installed()
        self._handles = [_hooks.register_forward_hook(m, keyword_inputs) for m in self.module_names]
        bits = _options.OBSERVE_BITS
        observe = (
            (bits["ops"] if ops else 0)
            | (bits["backward"] if backward else 0)
            | (bits["optimizer_state"] if optimizers == "state" else 0)
            | (bits["cast"] if cast_shares else 0)
        )
        # Pre-hooks: the root's starts each batch (the batch rule); with ops observed
        # every module's keeps track of the innermost module, which names the ops.
        hooked = self.module_names if ops or backward else [model]
        self._handles += [m.register_forward_pre_hook(_ovf.forward_pre_hook) for m in hooked]
        from . import _scaler

        _scaler.install()  # GradScaler's infinities are deliberate, optimizer checks or not
        if optimizers:
            from . import _optimizer

            _optimizer.install()
        _ovf.start_session(
            self.max_frames_to_save, self.trace_batch_nums, abort_after, on_event, device
        )
        from . import _samples

        _samples.install()  # the report names the dataset indices of the batch
        stop = _options.STOP_BITS
        mask = stop["nan"] | stop["inf"] | stop["scaler"]
        if backward:  # a backward op's NaN stops (raises out of backward()) like a forward's
            from . import _raise_points

            _raise_points.install()
            mask |= stop["backward"]
        if early:
            from . import _early

            _early.install()
            mask |= stop["early"]
        _ovf.set_control(observe=observe, stop_mask=mask, **early_control)
        _ovf.sync_op_observer()
        _active = self

    @property
    def batch_number(self):
        """Batches completed so far (the reference's counter)."""
        return _ovf.batch()

    def plot(
        self, path, *, module=None, batches=False, ops=False, last=None, cast=None, loss="overflow"
    ):
        """Draws what the ring holds into ``path`` (.png, .svg or .pdf), as the
        debuggers' ``ovf plot`` does: log10 of each module's output abs max
        over frames (``batches=True``: over batches), non-finite cells marked,
        the first non-finite value framed, and the abs max per batch against
        the fp16/bf16 limits. ``module``: a glob on module paths; ``ops``: the
        op records as rows (``ops=True`` above); ``last``: the newest N columns;
        ``cast`` ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2"): cells are the share of
        values a cast to it would lose to ``loss`` ("overflow", "flush",
        "subnormal"), from the counts ``cast_shares=True`` keeps.

        The ring is read here; the drawing runs in a child process (matplotlib
        never loads in the training process), which this call waits for, a
        few seconds. Returns the drawn matrix: {"rows", "columns", "values"
        (abs max, None where nothing finite was recorded), "nonfinite", ...}.
        Raises RuntimeError when there is nothing to draw or drawing fails.
        """
        from . import _plot

        return _plot.plot_own_ring(
            path, module=module, batches=batches, ops=ops, last=last, cast=cast, loss=loss
        )

    def remove(self):
        """Removes the hooks; the ring keeps what it recorded."""
        global _active
        for handle in self._handles:
            handle.remove()
        self._handles = []
        if _active is self and self._joined:
            _active = None  # the session is the first activation's: it goes on
        elif _active is self:
            # nothing is watched now: no op observer, no optimizer step measured
            _ovf.set_control(observe=0, early_horizon=0, update_ratio_max=0.0)
            _ovf.sync_op_observer()
            # Frames whose device statistics are on their way: a raise they call
            # for is raised here, once the session is closed.
            status = _ovf.flush_device_frames()
            _ovf.stop_session()
            _ovf.clear_modules()
            _active = None
            if status == 1:
                raise _hooks.NonFiniteError()
            if status == 130:
                raise KeyboardInterrupt


def detect_overflow(var, ctx):
    """Reports whether ``var`` holds nan or inf, printing "<ctx> has nans/infs".

    The reference's helper; ovf also records the values in the ring (so a
    debugger lists them) and a debugger's ``ovf break-on-nan`` stops here.
    Returns True if inf or nan was found.
    """
    if not torch.is_tensor(var):
        raise TypeError(
            f"ovf.detect_overflow: var must be a torch.Tensor; got {type(var).__name__}"
        )
    return _ovf.detect_overflow(var, str(ctx))
