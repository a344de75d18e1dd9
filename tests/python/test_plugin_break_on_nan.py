"""`ovf break-on-nan` on a hand-built ring image of a live process: what it writes into
the ring's control block, and its one-line errors for a bad --if."""

import os
import sys

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "plugin"))

from ovf_plugin import commands  # noqa: E402
from ovf_plugin.session import Session  # noqa: E402
from ovf_ring import layout  # noqa: E402
from ovf_ring.errors import OvfError  # noqa: E402
from ovf_ring.ring import locate  # noqa: E402
from ring_images import ImageTarget, NoDebuggerControl, two_batches  # noqa: E402


def test_break_on_nan_writes_the_control_block_of_a_live_process():
    target = ImageTarget(two_batches().image(), kind="live")
    session = Session(
        target, NoDebuggerControl(), package_dirs=[os.path.join(TOP, "build", "python", "ovf")]
    )
    reply = commands.execute(
        session, "break-on-nan", ["--inf", "--module", "enc*", "--after-batch", "3"]
    )
    assert reply.startswith("ovf: armed: stop on inf in modules 'enc*' from batch 3\n")
    control = locate(target).control
    assert (
        control.on_event,
        control.stop_mask,
        control.glob_text,
        control.after_batch,
        control.generation,
    ) == (layout.ON_EVENT_CONTINUE, layout.STOP_INF | layout.STOP_SCALER, "enc*", 3, 1)
    with pytest.raises(OvfError, match="--if 'absmax >' is not a Python expression"):
        commands.execute(session, "break-on-nan", ["--if", "absmax >"])
    with pytest.raises(OvfError, match="uses bogus; it may use absmax"):
        commands.execute(session, "break-on-nan", ["--if", "bogus > 1"])
