"""What the user asked the debugger to stop on, and how that reaches the runtime.

Three ways, because the process may not exist yet: the inferior's environment
(OVF_* variables read by the bootstrap at the next `run`), the control block
(a live process), and the debugger's own filter at the breakpoint, which
applies what the runtime cannot express (one module glob and one after-batch
for all events; --if).
"""

import fnmatch
import os
from dataclasses import dataclass, field

from ovf_ring import cast, layout

# The early warning's defaults, as the runtime's (_options.py EARLY_HORIZON, UPDATE_RATIO).
EARLY_HORIZON = 4
UPDATE_RATIO = 1.0


@dataclass
class Arming:
    nan: bool = False
    inf: bool = False
    module: str = ""  # break-on-nan --module ("" = every module)
    after_batch: int = 0
    condition: object = None  # condition.Condition
    above: float = None  # watch --above
    below: float = None  # watch --below
    watch_module: str = ""
    trace_batches: tuple = None  # None: leave the runtime's own list alone
    trace_module: str = ""
    abort_after: int = None  # None: leave alone; -1: off
    ops: bool = False  # break-on-nan --ops: the runtime checks every ATen op's outputs
    backward: bool = False  # break-on-nan --backward: and the backward pass's ops
    carriers: bool = False  # break-on-nan --carriers: also where a NaN is only passed on
    capture_optimizer: bool = False  # break-on-nan --capture optimizer: its steps replay
    headroom: str = (
        None  # watch --headroom: a layout.HEADROOM_DTYPES name, lines measure against it
    )
    scaler_skips: int = 0  # break-on-nan --scaler-skips: a loss scaler gives up after N skips
    scale_floor: float = 1.0  # break-on-nan --scale-floor: or at a skip below this scale
    early: bool = False  # break-on-nan --early: stop before the NaN (growth, huge updates)
    early_horizon: int = (
        EARLY_HORIZON  # --early-horizon: batches ahead a module's growth is followed
    )
    update_ratio: float = (
        UPDATE_RATIO  # --update-ratio: an optimizer step's |dw|/|w| that stops (0: off)
    )
    cast: str = None  # watch --cast: a layout.CAST_TARGETS name; lines count cast losses
    cast_limits: tuple = (None, None, None)  # --overflow, --flush, --subnormal shares
    touched: set = field(default_factory=set)  # control fields a command has set

    # -------------------------------------------------------------- runtime side

    def stop_mask(self, current=0):
        mask = current
        for bit, on in (
            (layout.STOP_NAN, self.nan),
            (layout.STOP_INF, self.inf),
            (layout.STOP_ABOVE, self.above is not None),
            (layout.STOP_BELOW, self.below is not None),
            (layout.STOP_TRACED, bool(self.trace_batches)),
            (layout.STOP_ABORT_AFTER, self.abort_after is not None and self.abort_after >= 0),
            # only where a NaN is made (or first seen), unless --carriers, or a
            # --module narrowed where to look: there a NaN that came in counts too
            (
                layout.STOP_PRODUCER_ONLY,
                (self.nan or self.inf) and not self.carriers and not self.module,
            ),
            (layout.STOP_BACKWARD, self.backward),
            # a loss scaler that gives up found NaN/Inf gradients step after step
            (layout.STOP_SCALER, self.nan or self.inf),
            (layout.STOP_EARLY, self.early),
            (layout.STOP_CAST, self.cast_stops()),
        ):
            mask = mask | bit if on else mask & ~bit
        return mask

    def _categories(self):
        """(glob, after_batch) of each armed kind of event."""
        armed = []
        if self.nan or self.inf:
            armed.append((self.module, self.after_batch))
        if self.above is not None or self.below is not None or self.cast_stops():
            armed.append((self.watch_module, 0))
        if self.trace_batches:
            armed.append((self.trace_module, 0))
        return armed

    def runtime_glob(self):
        """The one glob the runtime may apply to every event: the common one, else ""."""
        globs = {glob or "*" for glob, _ in self._categories()}
        return globs.pop() if len(globs) == 1 and "*" not in globs else ""

    def runtime_after_batch(self):
        return min((after for _, after in self._categories()), default=0)

    def environment(self, bootstrap_dir, pythonpath):
        """{name: value or None (unset)} for the inferior's next `run`."""
        parts = [p for p in (pythonpath or "").split(os.pathsep) if p and p != bootstrap_dir]
        env = {
            "PYTHONPATH": os.pathsep.join([bootstrap_dir, *parts]),
            "OVF_ENABLE": "1",
            "OVF_ON_NAN": "continue",
            "OVF_STOP": ",".join(name for name, bit in layout.STOP_NAMES if self.stop_mask() & bit),
            "OVF_OBSERVE": (
                ",".join(
                    name
                    for name, on in (
                        ("ops", self.ops),
                        ("backward", self.backward),
                        ("cast", self.cast is not None),
                        ("capture_optimizer", self.capture_optimizer),
                    )
                    if on
                )
                or None
            ),
            **self._cast_environment(),
            "OVF_HEADROOM": self.headroom,
            "OVF_SCALER_SKIPS": str(self.scaler_skips) if self.scaler_skips else None,
            "OVF_SCALE_FLOOR": repr(self.scale_floor) if self.scale_floor != 1.0 else None,
            "OVF_EARLY_HORIZON": str(self.early_horizon) if self.early else None,
            "OVF_UPDATE_RATIO": repr(self.update_ratio) if self.early else None,
            "OVF_MODULE": self.runtime_glob() or None,
            "OVF_AFTER_BATCH": (
                str(self.runtime_after_batch()) if self.runtime_after_batch() else None
            ),
            "OVF_ABOVE": repr(self.above) if self.above is not None else None,
            "OVF_BELOW": repr(self.below) if self.below is not None else None,
            "OVF_TRACE_BATCHES": (
                ",".join(map(str, self.trace_batches)) if self.trace_batches else None
            ),
            "OVF_ABORT_AFTER": (
                str(self.abort_after)
                if self.abort_after is not None and self.abort_after >= 0
                else None
            ),
        }
        return env

    def cast_stops(self):
        return self.cast is not None and any(x is not None for x in self.cast_limits)

    def _cast_environment(self):
        names = ("OVF_CAST_OVERFLOW", "OVF_CAST_FLUSH", "OVF_CAST_SUBNORMAL")
        env = {"OVF_CAST": self.cast if self.cast_stops() else None}
        for name, limit in zip(names, self.cast_limits, strict=True):
            env[name] = repr(limit) if self.cast_stops() and limit is not None else None
        return env

    def control_writes(self, control):
        """[(field, value)] that make a live runtime's control block match,
        `generation` last so the runtime recomputes its cached decisions."""
        writes = [
            ("on_event", layout.ON_EVENT_CONTINUE),
            ("stop_mask", self.stop_mask(control.stop_mask)),
            ("module_glob", self.runtime_glob()),
            ("after_batch", self.runtime_after_batch()),
        ]
        if "thresholds" in self.touched:
            writes += [
                ("above", self.above if self.above is not None else float("inf")),
                ("below", self.below if self.below is not None else 0.0),
            ]
        if "trace" in self.touched:
            batches = list(self.trace_batches or ())
            writes += [
                ("trace_batches", batches + [0] * (layout.MAX_TRACE_BATCHES - len(batches))),
                ("trace_count", len(batches)),
            ]
        if "observe" in self.touched:
            writes.append(("observe", self.observe()))
        if "scaler" in self.touched:
            writes += [("scaler_max_skips", self.scaler_skips), ("scale_floor", self.scale_floor)]
        if "early" in self.touched:
            writes += [
                ("early_horizon", self.early_horizon if self.early else 0),
                ("update_ratio_max", self.update_ratio if self.early else 0.0),
            ]
        if "cast" in self.touched:
            target = layout.CAST_TARGETS.index(self.cast) if self.cast is not None else 0
            limits = [
                x if x is not None and self.cast is not None else -1.0 for x in self.cast_limits
            ]
            writes += [
                ("observe", self.observe()),
                ("cast_target", target),
                ("cast_overflow_max", limits[0]),
                ("cast_flush_max", limits[1]),
                ("cast_subnormal_max", limits[2]),
            ]
        if "headroom" in self.touched:
            writes.append(
                ("headroom_dtype", layout.HEADROOM_DTYPES[self.headroom][0] if self.headroom else 0)
            )
        if "abort_after" in self.touched:
            writes.append(
                ("abort_after_batch", -1 if self.abort_after is None else self.abort_after)
            )
        writes.append(("generation", (control.generation + 1) & 0xFFFFFFFF))
        return writes

    def observe(self):
        """control.observe: what the runtime checks beyond module forwards."""
        return (
            (layout.OBSERVE_OPS if self.ops else 0)
            | (layout.OBSERVE_BACKWARD if self.backward else 0)
            | (layout.OBSERVE_CAST if self.cast is not None else 0)
            | (layout.OBSERVE_CAPTURE_OPTIMIZER if self.capture_optimizer else 0)
        )

    # -------------------------------------------------------------- debugger side

    def wants(self, bit, module, batch):
        """Whether an event `bit` in `module` at `batch` is one the user asked for
        (before --if, which needs the lines)."""
        if bit in (layout.STOP_NAN, layout.STOP_INF):
            on = self.nan if bit == layout.STOP_NAN else self.inf
            return on and _matches(module, self.module) and batch >= self.after_batch
        if bit == layout.STOP_ABOVE:
            return self.above is not None and _matches(module, self.watch_module)
        if bit == layout.STOP_BELOW:
            return self.below is not None and _matches(module, self.watch_module)
        if bit == layout.STOP_CAST:
            return self.cast_stops() and _matches(module, self.watch_module)
        if bit == layout.STOP_TRACED:
            return (
                bool(self.trace_batches)
                and batch in self.trace_batches
                and _matches(module, self.trace_module)
            )
        if bit == layout.STOP_BACKWARD:
            return self.backward and _matches(module, self.module) and batch >= self.after_batch
        if bit == layout.STOP_SCALER:
            return (self.nan or self.inf) and batch >= self.after_batch
        if bit == layout.STOP_EARLY:
            return self.early and batch >= self.after_batch
        return bit == layout.STOP_ABORT_AFTER

    def describe(self):
        """One line per armed kind of stop, for `ovf status` and the commands' replies."""
        lines = []
        if self.nan or self.inf:
            what = " and ".join(w for w, on in (("nan", self.nan), ("inf", self.inf)) if on)
            lines.append(
                f"stop on {what}"
                + _where(self.module)
                + (f" from batch {self.after_batch}" if self.after_batch else "")
                + (f" if {self.condition.text}" if self.condition else "")
                + (", after every op" if self.ops else "")
                + ("" if self.carriers or self.module else " (where a value is produced)")
            )
        if self.backward:
            lines.append("stop on nan or inf in the backward pass" + _where(self.module))
        if self.capture_optimizer:
            lines.append(
                "copy what each optimizer step starts from: a nan or inf it writes is replayed"
            )
        # The default (a skip below scale 1) goes without saying; a choice is named.
        if (self.nan or self.inf) and (self.scaler_skips or self.scale_floor != 1.0):
            gives_up = [f"below scale {self.scale_floor:g}"] if self.scale_floor else []
            gives_up += [f"after {self.scaler_skips} skips in a row"] if self.scaler_skips else []
            lines.append(
                "stop when a loss scaler gives up: " + " or ".join(gives_up)
                if gives_up
                else "a loss scaler that gives up does not stop (--scale-floor 0)"
            )
        if self.early:
            lines.append(
                f"stop early: a module's output that passes its dtype's largest value within "
                f"{self.early_horizon} batches at its growth"
                + (
                    f", an optimizer step that moves the weights by more than "
                    f"{self.update_ratio:g}x their size"
                    if self.update_ratio
                    else ""
                )
            )
        if self.above is not None:
            of_max = ""
            if self.headroom:
                of_max = (
                    f" ({self.above / layout.HEADROOM_DTYPES[self.headroom][1]:g} of"
                    f" {self.headroom}'s max)"
                )
            lines.append(f"stop when abs max > {self.above:g}{of_max}" + _where(self.watch_module))
        if self.below is not None:
            lines.append(f"stop when non-zero abs min < {self.below:g}" + _where(self.watch_module))
        if self.cast_stops():
            lines.append(
                "stop at "
                + cast.limits_text(self.cast, self.cast_limits)
                + _where(self.watch_module)
            )
        elif self.cast is not None:
            lines.append(
                "count what casts to fp16, bf16 and fp8 would lose (ovf frames --headroom)"
            )
        if self.trace_batches:
            lines.append(
                "trace batches "
                + ",".join(map(str, self.trace_batches))
                + _where(self.trace_module)
            )
        if self.abort_after is not None and self.abort_after >= 0:
            lines.append(f"stop after batch {self.abort_after} (abort-after)")
        return lines


def _matches(module, glob):
    return not glob or fnmatch.fnmatchcase(module, glob)


def _where(glob):
    return f" in modules '{glob}'" if glob else ""
