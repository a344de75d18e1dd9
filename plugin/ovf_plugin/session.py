"""One debugger session's ovf state, independent of the debugger: what is
armed, the stop breakpoint, and the decision taken when it is hit."""

import os
import struct
from dataclasses import dataclass, replace

from ovf_ring import layout
from ovf_ring.core_view import CoreFiles
from ovf_ring.errors import OvfError
from ovf_ring.event import last_event, line_fields
from ovf_ring.frames import frame_at
from ovf_ring.report import format_trace
from ovf_ring.ring import locate
from ovf_ring.target import TargetMemoryError
from ovf_ring.unopened_core import open_unopened

from . import stepping
from .arming import Arming
from .summary import stop_summary
from .wording import GDB

# The events an --if expression decides (in Python mode too: ovf._condition).
CONDITIONED = layout.STOP_NAN | layout.STOP_INF | layout.STOP_BACKWARD

PACKAGE_ENV = "OVF_PACKAGE_DIR"


@dataclass
class Decision:
    stop: bool
    now: str = ""  # printed at once (traced frames, which do not stop)
    later: str = ""  # printed after the debugger has reported the stop


class Session:
    def __init__(self, target, control=None, wording=GDB, package_dirs=()):
        """`target`: the program's memory (ovf_ring.target.Target); `control`:
        the debugger's breakpoints and environment (control.Control), None
        where there is no debugger; `wording`: the front end's words for its
        own commands; `package_dirs`: where the runtime's `ovf` Python package
        may be (its _bootstrap/ is put on the inferior's PYTHONPATH);
        $OVF_PACKAGE_DIR first."""
        self.target = target
        self.control = control
        self.wording = wording
        self.arming = Arming()
        self.breakpoint = None
        self._package_dirs = package_dirs
        self._cores = CoreFiles()

    def ring(self):
        """The ring as it is now (read afresh: the process may have run since).
        A core file is read by ovf itself, as python3 -m ovf.postmortem reads it,
        and so is, with no process, a core file named on the debugger's command
        line that the debugger could not open."""
        kind = self.target.kind()
        if kind == "none":
            core = self.unopened_core()
            if core is None:
                raise OvfError(
                    f"ovf: no process: `run` it, attach with `{self.wording.attach}`, "
                    "or open a core file"
                )
            ring = locate(core)
            ring.notes.insert(0, core.note)
            return ring
        if kind == "core":
            # One reader for every core, postmortem's: the debuggers' own core support
            # draws a core's edges each its own way (core_view.py).
            view = self._cores.view(self.target)
            if view is not None:
                ring = locate(view, self.wording.library_hint)
                cut = view.core.cut_short()
                if cut:
                    ring.notes.insert(0, cut)
                return ring
        return locate(self.target, self.wording.library_hint)

    def unopened_core(self):
        """A CoreTarget over the core the front end says the debugger was given
        but did not open, or None."""
        find = getattr(self.target, "unopened_core_path", None)
        path = find() if find is not None else None
        if path is None:
            return None
        try:
            return open_unopened(path, "it says the file is no core it knows")
        except OvfError:
            return None

    # ------------------------------------------------------------ arming

    def package_dir(self):
        candidates = [os.environ.get(PACKAGE_ENV, ""), *self._package_dirs]
        for path in candidates:
            if path and os.path.isfile(os.path.join(path, "_bootstrap", "sitecustomize.py")):
                return os.path.realpath(path)
        raise OvfError(
            "ovf: cannot find the ovf Python package (a directory with _bootstrap/); "
            f"set {PACKAGE_ENV}=<build>/python/ovf before starting {self.wording.debugger}, "
            f"or use {self.wording.launcher}"
        )

    def staged(self):
        """A copy of what is armed for a command to change; nothing takes
        effect until apply() accepts the whole of it."""
        return replace(self.arming, touched=set(self.arming.touched))

    def apply(self, arming):
        """Makes `arming` take effect: the next `run`'s environment, the running
        process's control block, and the breakpoint. Every value is encoded
        before anything is written: a refusal changes nothing, here or in the
        process. Returns a reply."""
        kind = self.target.kind()
        if kind == "core" or self.control is None:
            raise OvfError(
                "ovf: a core file cannot be armed; `ovf frames` and `ovf status` read it"
            )
        bootstrap = os.path.join(self.package_dir(), "_bootstrap")
        environment = arming.environment(bootstrap, self.control.get_environment("PYTHONPATH"))
        ring, problem = None, ""
        if kind == "live":
            try:
                ring = self.ring()
            except OvfError as e:
                problem = f"{e}\novf: it takes effect at the next `run`"
        writes = []
        if ring is not None:
            try:
                writes = [
                    layout.encode_control_field(name, value)
                    for name, value in arming.control_writes(ring.control)
                ]
            except (ValueError, OverflowError, struct.error) as e:
                raise OvfError(f"ovf: nothing was armed: {e}") from None
        for name, value in environment.items():
            self.control.set_environment(name, value)
        reply = [problem] + ([self._write_control(ring, writes)] if ring is not None else [])
        self.arming = arming
        self.breakpoint = self.control.set_stop_breakpoint(layout.STOP_FUNCTION, self.on_breakpoint)
        armed = "; ".join(self.arming.describe()) or "nothing"
        reply.insert(0, f"ovf: armed: {armed}")
        return "\n".join(line for line in reply if line) + "\n"

    def _write_control(self, ring, writes):
        for offset, data in writes:
            try:
                self.target.write_memory(ring.address + offset, data)
            except TargetMemoryError as e:
                raise OvfError(f"ovf: cannot write the control block: {e}") from None
        if ring.header.detection_state == 0:
            return "ovf: the runtime is loaded but detects nothing yet (no model is watched)"
        return f"ovf: the running process (pid {ring.header.pid}) is armed"

    # ------------------------------------------------------------ the stop

    def on_breakpoint(self):
        """Decides, silently, whether the breakpoint's hit is a stop the user
        wants; the texts go to the front end to print."""
        try:
            ring = self.ring()
            event = last_event(ring)
        except OvfError as e:
            return Decision(True, later=f"{e}\n")
        if ring.header.step_state in stepping.AT_LINE:
            return Decision(True, later=stepping.stop_text(ring))
        if event is None:
            return Decision(
                True, later="ovf: stopped in ovf_stop_event, but the ring names no event\n"
            )
        back = stepping.back_at_event_note(ring)
        if back:  # the stop a replayed step ended at: the event's, again
            return Decision(True, later=back + stop_summary(ring, event))
        record = event.record
        module = ring.text(event.module_id())
        decision = Decision(False)
        chosen = None
        for _, bit in layout.STOP_NAMES:
            if not event.bits & bit or not self.arming.wants(bit, module, record.batch):
                continue
            if bit == layout.STOP_TRACED:
                frame = frame_at(ring, event.seq)
                if frame is not None:
                    decision.now += format_trace(frame, ring.text)
                continue
            lines = [line for b, line in event.offending if b == bit]
            if bit & CONDITIONED and self.arming.condition is not None:
                try:
                    lines = [
                        line
                        for line in lines
                        if self.arming.condition(line_fields(ring, event, bit, line))
                    ]
                except OvfError as e:
                    return Decision(
                        True, now=decision.now, later=f"{e}\n" + stop_summary(ring, event)
                    )
                if not lines:
                    continue
            decision.stop = True
            if chosen is None and lines:
                chosen = (bit, lines[0])
        if decision.stop:
            decision.later = stop_summary(ring, event, chosen)
        return decision
