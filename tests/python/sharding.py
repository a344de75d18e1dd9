"""OVF_TEST_SHARD=K/N: this pytest runs its share of the tests it collected; tools/test.sh
runs the N at once, one a core, because the suites spend most of their time in child
processes (debuggers, Pythons importing torch) of a core or less each.

A test function's parametrizations (its gdb and its LLDB run) go to one shard. With
OVF_TEST_QUEUE=DIR (a directory the N share, empty at the start) the shards take test
functions from one queue, in collection order, each claiming the next one free as it goes
(a file created in DIR, O_EXCL): they end within a test of each other, whatever the tests
cost (split in turn, the two e2e shards ended 500 s apart). Without it, the functions of a
file go to the shards in turn."""

import hashlib
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


def _function(item):
    return item.nodeid.split("[", 1)[0]


def _queue():
    """The shared claim directory, or None (turns are fixed at collection)."""
    if shard_of_this_run() is None:
        return None
    queue = os.environ.get("OVF_TEST_QUEUE", "")
    if queue and not os.path.isdir(queue):
        raise pytest.UsageError(f"OVF_TEST_QUEUE={queue!r} is not a directory")
    return queue or None


def pytest_collection_modifyitems(config, items):
    shard = shard_of_this_run()
    if shard is None or _queue() is not None:
        return
    k, n = shard
    functions = {}  # test function -> its turn, in collection order
    kept, deselected = [], []
    for item in items:
        turn = functions.setdefault(_function(item), len(functions))
        (kept if turn % n == k else deselected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    items[:] = kept


def _claim(queue, function):
    """Whether this shard is the first to ask for `function`."""
    name = hashlib.sha1(function.encode()).hexdigest()
    try:
        os.close(os.open(os.path.join(queue, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def _claimed_items(session, queue):
    """The items of the test functions this shard claims, claimed one function ahead of
    the one running (pytest needs the next item to tear fixtures down at the right time)."""
    owner = {}
    for item in session.items:
        function = _function(item)
        if function not in owner:
            owner[function] = _claim(queue, function)
        if owner[function]:
            yield item


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    """pytest's own loop over the items (_pytest.main.pytest_runtestloop) over the claimed
    ones, when the shards share a queue."""
    queue = _queue()
    if queue is None or session.config.option.collectonly:
        return None
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        raise session.Interrupted(f"{session.testsfailed} errors during collection")
    items = _claimed_items(session, queue)
    item = next(items, None)
    while item is not None:
        nextitem = next(items, None)
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        if session.shouldfail:
            raise session.Failed(session.shouldfail)
        if session.shouldstop:
            raise session.Interrupted(session.shouldstop)
        item = nextitem
    return True
