"""Hook plumbing shared by the explicit API and auto mode.

torch >= 2.0 hands keyword arguments to forward hooks registered with
``with_kwargs=True``. torch 1.13 does not, so ovf wraps ``nn.Module.__call__``
with a shim that records ``(module, kwargs)`` on a stack the C++ hook reads.
"""

import atexit
import sys

import torch

from . import _compile, _ovf


class NonFiniteError(ValueError):
    """Raised at the first inf/nan, like DebugUnderflowOverflow's ValueError."""


class _RaisedAfterOp(NonFiniteError):
    """Raised right after the ATen op that made the first inf/nan (ops observed):
    the interpreter raises it by class, so a bare instance carries the message."""

    def __init__(self, *args):
        super().__init__(*(args or (_ovf.OVERFLOW_MESSAGE,)))


# Tracebacks name the public class: ovf.NonFiniteError.
NonFiniteError.__module__ = _RaisedAfterOp.__module__ = "ovf"
_RaisedAfterOp.__name__ = _RaisedAfterOp.__qualname__ = "NonFiniteError"


def torch_version():
    parts = []
    for piece in torch.__version__.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


HOOKS_TAKE_KWARGS = torch_version() >= (2, 0)

_kwargs_stack = []
_original_call = None


def _discover(module):
    from . import _auto  # auto mode names modules it meets; imported only when used

    _auto.discover(module)


_ovf.set_callbacks(_kwargs_stack, _discover, NonFiniteError, _RaisedAfterOp)


def _call_with_kwargs(self, *args, **kwargs):
    if not kwargs:
        return _original_call(self, *args)
    _kwargs_stack.append((self, kwargs))
    try:
        return _original_call(self, *args, **kwargs)
    finally:
        _kwargs_stack.pop()


_deepened = False


def hooks_installed():
    """ovf's hooks cost one more Python frame per module call (torch 1.13: the kwargs
    shim; torch 2: the path of _call_impl that runs hooks) over the two without them
    (__call__ and forward): the recursion limit grows by as much, once, so a model
    nests as deep under ovf as without it."""
    global _deepened
    if not _deepened:
        sys.setrecursionlimit(sys.getrecursionlimit() * 3 // 2)
        # Frames whose device statistics are still on their way when the program
        # ends are judged before it does (fast device mode): nothing is left unread.
        atexit.register(_ovf.flush_device_frames)
        _deepened = True


def install_kwargs_shim(force=False):
    """Lets hooks without kwargs (torch < 2.0) see keyword arguments. Idempotent."""
    global _original_call
    if (HOOKS_TAKE_KWARGS and not force) or _original_call is not None:
        return
    _original_call = torch.nn.Module.__call__
    torch.nn.Module.__call__ = _call_with_kwargs
    hooks_installed()


def uninstall_kwargs_shim():
    """Restores nn.Module.__call__ once nothing needs keyword arguments any more."""
    global _original_call
    if _original_call is not None:
        torch.nn.Module.__call__ = _original_call
        _original_call = None


def watch(module, name, is_root):
    """Names a module for the runtime (and, under torch.compile, for the operators
    that carry its hooks into compiled graphs: _compile.py)."""
    _ovf.watch_module(module, encoded(name), is_root)
    if _compile.supported():
        _compile.key_of(module)


def encoded(name):
    """A module path as the runtime stores it: UTF-8 bytes, a lone surrogate (a
    legal Python str) kept by surrogateescape; printing escapes what is not text."""
    return name.encode("utf-8", "surrogateescape")


def register_forward_hook(module):
    """Registers ovf's C++ forward hook on one module; returns the handle."""
    if HOOKS_TAKE_KWARGS:
        return module.register_forward_hook(_ovf.forward_hook_with_kwargs, with_kwargs=True)
    install_kwargs_shim()
    return module.register_forward_hook(_ovf.forward_hook)


_compile.install()  # torch >= 2.5: hooks that torch.compile traces into its graphs
