"""OVF_TEST_SHARD=K/N: this pytest runs the K-th (0-based) of N shares of the tests it
collected; tools/test.sh runs the N at once, one a core, because the suites spend most of
their time in child processes (debuggers, Pythons importing torch) of a core or less each.

A test function's parametrizations (its gdb and its LLDB run) go to one shard, and the test
functions of a file go to the shards in turn, so that each shard gets its part of every file
(files differ in cost far more than the tests in one file do)."""

import os

import pytest


def shard_of_this_run():
    """(K, N) from OVF_TEST_SHARD, or None when it is not set."""
    value = os.environ.get("OVF_TEST_SHARD", "")
    if not value:
        return None
    try:
        k, n = (int(part) for part in value.split("/"))
    except ValueError:
        raise pytest.UsageError(f"OVF_TEST_SHARD={value!r}: expected K/N, e.g. 0/2") from None
    if not 0 <= k < n:
        raise pytest.UsageError(f"OVF_TEST_SHARD={value!r}: K must be in 0..N-1")
    return k, n


def pytest_collection_modifyitems(config, items):
    shard = shard_of_this_run()
    if shard is None:
        return
    k, n = shard
    functions = {}  # test function -> its turn, in collection order
    kept, deselected = [], []
    for item in items:
        turn = functions.setdefault(item.nodeid.split("[", 1)[0], len(functions))
        (kept if turn % n == k else deselected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    items[:] = kept
