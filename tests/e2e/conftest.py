"""The `debugger` fixture: every end-to-end test body runs once under gdb and once under
LLDB (tests/e2e/harness.py), and is skipped, saying why, where one is missing."""

import functools
import os
import sys

import pytest

# tests/python's helpers (build_paths: the ovf under test; ranks_harness) for every e2e test.
_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(_TESTS, "python"))

from harness import DEBUGGERS  # noqa: E402
from sharding import (  # noqa: E402,F401 - OVF_TEST_SHARD=K/N, OVF_TEST_QUEUE
    pytest_collection_modifyitems,
    pytest_runtestloop,
)


@functools.lru_cache(maxsize=None)
def _missing(name):
    return DEBUGGERS[name].available()


@pytest.fixture(params=sorted(DEBUGGERS))
def debugger(request):
    why = _missing(request.param)
    if why:
        pytest.skip(why)
    return DEBUGGERS[request.param]
