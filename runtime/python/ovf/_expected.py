"""``ovf.expected_nonfinite()``: a region where NaN/Inf is expected.

A hand-written loss scaler probes for overflow on purpose (``grads.half()``, then
``isinf().any()`` and a skipped step); inside the region what turns non-finite is
recorded as deliberate and stops nothing, in Python mode (``python3 -m ovf``),
under gdb and LLDB alike, at module and op level. The region is process-wide
(backward() runs its ops on other threads) and nests."""

import contextlib


@contextlib.contextmanager
def expected_nonfinite():
    from . import _ovf

    _ovf.expect_nonfinite(True)
    try:
        yield
    finally:
        _ovf.expect_nonfinite(False)
