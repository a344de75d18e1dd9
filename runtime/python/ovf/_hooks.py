"""Hook plumbing shared by the explicit API and auto mode: the exception class,
naming modules for the runtime, and the forward hook (every tensor of a forward,
keyword inputs too; or, for the drop-in report, what the reference's hooks see)."""

import os
import sys

from . import _compile, _ovf


class NonFiniteError(ValueError):
    """Raised at the first inf/nan, like DebugUnderflowOverflow's ValueError. Right after
    the ATen op that made it (ops observed) the interpreter raises it by class: a bare
    instance carries the reference's message. One class, public by its own name, so it
    pickles and crosses process boundaries (a DataLoader worker's error reaches the
    main process as itself)."""

    def __init__(self, *args):
        super().__init__(*(args or (_ovf.OVERFLOW_MESSAGE,)))


NonFiniteError.__module__ = "ovf"  # tracebacks and pickle name the public class


class EarlyWarningError(ValueError):
    """Raised at an early warning (--early, early=True), before any inf/nan: a module's
    output grows fast enough to pass its dtype's largest value within a few batches, or
    an optimizer step changed the weights by more than --update-ratio times their size.
    The message is the warning's one line."""


EarlyWarningError.__module__ = "ovf"


def _discover(module):
    from . import _auto  # auto mode names modules it meets; imported only when used

    _auto.discover(module)


_ovf.set_callbacks(_discover, NonFiniteError, EarlyWarningError)

_deepened = False


def hooks_installed():
    """ovf's hooks cost one more Python frame per module call (the path of _call_impl
    that runs hooks) over the two without them (__call__ and forward): the recursion
    limit grows by as much, once, so a model nests as deep under ovf as without it."""
    global _deepened
    if not _deepened:
        sys.setrecursionlimit(sys.getrecursionlimit() * 3 // 2)
        _deepened = True


# What an ending program is told when the answer to an event came too late for
# its code to act on: the exit status says so, as a raise or Ctrl-C would have.
_EXIT_LINES = {
    1: "ovf: non-finite values were found after the program's last check (the report above); "
    "exit status 1, as the raise would have given",
    130: "ovf: the wait for a debugger was interrupted (Ctrl-C); exit status 130",
}


# A run that --on-nan warn let go on after a NaN/Inf ends with this status, so
# that the scripts and schedulers that run it see the failure the report told.
WENT_ON_STATUS = 1
_WENT_ON_LINE = (
    "ovf: non-finite values were found (the report above) and --on-nan warn let the run go "
    "on; exit status 1"
)
# Set, to the process id, for a program that execs another (_exec_follow): the
# NaN the first image reported still decides the process's exit status (an exec
# keeps the id; the new image's children, which inherit the variable, do not).
WENT_ON_VARIABLE = "OVF_WENT_ON_AFTER_NONFINITE"
_went_on_judged = False


def went_on_after_nonfinite():
    """Whether this process (or the image it was exec'd from) reported a NaN/Inf
    under --on-nan warn and went on."""
    carried = os.environ.get(WENT_ON_VARIABLE) == str(os.getpid())
    return carried or _ovf.went_on_after_nonfinite()


def judge_pending(at_exit=True):
    """Judges what is still on its way (fast device mode's last frames, a raise
    decided at an op that no later hook delivered); returns the exit status due
    (0: none) after printing the line that explains it. At the exit (not at an
    exec) a NaN/Inf that --on-nan warn reported makes the status 1 too."""
    global _went_on_judged
    status = _ovf.flush_device_frames()
    line = _EXIT_LINES.get(status)
    if not status and at_exit and not _went_on_judged and went_on_after_nonfinite():
        # once: python3 -m ovf exits with it, and its exit handler then has nothing to add
        _went_on_judged = True
        status, line = WENT_ON_STATUS, _WENT_ON_LINE
    if status:
        sys.stdout.flush()
        print(line, file=sys.stderr, flush=True)
    return status


def exit_as_judged():
    """The exit handler's part (ovf/__init__.py registers it when ovf is first
    imported, so that it runs after the handlers registered later): frames whose
    statistics are still on their way are judged before the program ends. An
    exit handler cannot change the exit status; only leaving now can, which
    skips the handlers registered before ovf's: logging's is run first (log
    files complete), and python3 -m ovf judges before any of them runs."""
    status = judge_pending()
    if status:
        if "logging" in sys.modules:
            sys.modules["logging"].shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def watch(module, name, is_root, step_root=False):
    """Names a module for the runtime (and, under torch.compile, for the operators
    that carry its hooks into compiled graphs: _compile.py). `step_root`: its
    forward may begin a training step (auto mode: _steps.py)."""
    _ovf.watch_module(module, encoded(name), is_root, step_root)
    _compile.key_of(module)


def eager_named_modules(model):
    """model.named_modules() as eager code names them: torch.compile's wrappers of
    submodules (OptimizedModule) left out, and their `_orig_mod` out of the paths."""
    for name, module in model.named_modules():
        if type(module).__name__ != "OptimizedModule":
            yield ".".join(part for part in name.split(".") if part != "_orig_mod"), module


def encoded(name):
    """A module path as the runtime stores it: UTF-8 bytes, a lone surrogate (a
    legal Python str) kept by surrogateescape; printing escapes what is not text."""
    return name.encode("utf-8", "surrogateescape")


def register_forward_hook(module, keyword_inputs=True):
    """Registers ovf's C++ forward hook on one module; returns the handle. Without
    keyword_inputs the hook sees what the reference's does: positional inputs, the
    tensors of tuples, and anything else as "not a tensor"."""
    if keyword_inputs:
        return module.register_forward_hook(_ovf.forward_hook, with_kwargs=True)
    return module.register_forward_hook(_ovf.forward_hook_positional)


_compile.install()  # hooks that torch.compile traces into its graphs
