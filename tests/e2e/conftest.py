"""The `debugger` fixture: every end-to-end test body runs once under gdb and once under
LLDB (tests/e2e/harness.py), and is skipped, saying why, where one is missing."""

import functools

import pytest

from harness import DEBUGGERS


@functools.lru_cache(maxsize=None)
def _missing(name):
    return DEBUGGERS[name].available()


@pytest.fixture(params=sorted(DEBUGGERS))
def debugger(request):
    why = _missing(request.param)
    if why:
        pytest.skip(why)
    return DEBUGGERS[request.param]
