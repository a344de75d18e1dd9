"""Issue 7, part 3 under real gdb: a LibTorch C++ program (examples/cpp/train, which
uses ovf::Watch and nothing else of ovf) run with `ovf break-on-nan` stops right
after the ATen op that produced the NaN, in batch 2, in the C++ forward: `bt` shows
it and `info locals` its tensors."""

import os
import re

import pytest

from gdb_harness import BUILD, CUT, TOP, between, requires_gdb, run_gdb

TRAIN = os.path.join(BUILD, "examples", "cpp", "train")
SOURCE = os.path.join(TOP, "examples", "cpp", "train.cpp")
HIT = re.compile(r'^Thread 1 "train" hit Breakpoint 1, ovf_stop_event \(', re.M)

pytestmark = [
    requires_gdb,
    pytest.mark.skipif(
        not os.path.isfile(TRAIN), reason=f"{TRAIN} is not built (cmake -DOVF_BUILD_EXAMPLES=ON)"
    ),
]


def source_line(text):
    """The line number of `text` in train.cpp."""
    with open(SOURCE) as f:
        return next(i for i, line in enumerate(f, 1) if text in line)


def summary(out):
    return re.search(r"^ovf: (?:first )?non-finite value .*$", out, re.M).group(0)


def test_break_on_nan_stops_after_the_op_in_the_cpp_forward_with_its_locals():
    out = run_gdb(
        [
            "ovf break-on-nan",
            "run",
            CUT,
            "bt",
            CUT,
            "frame function StretchImpl::forward",
            "info locals",
            CUT,
            "kill",
        ],
        ["--args", TRAIN],
    )
    assert (
        summary(out)
        == "ovf: first non-finite value (nan) at batch 2, op aten::log in stretch, produced here"
    )
    assert len(HIT.findall(out)) == 1
    # batches 0 and 1 ran; the stop is inside batch 2's forward, before its loss
    assert "batch 1 loss" in out and "batch 2 loss" not in out
    # the stack: the stop hook, the op observer, the op, then the C++ forwards and main
    backtrace = between(out, "#0  ovf_stop_event")
    functions = [
        re.sub(r"\([^()]*\)$", "", name)  # at::_ops::log::call(at::Tensor const&) -> ...::call
        for name in re.findall(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(.+?) \(", backtrace, re.M)
    ]
    log_line = source_line("torch::log(scaled)")
    assert functions[0] == "ovf_stop_event"
    assert "at::_ops::log::call" in functions
    assert (
        functions.index("at::_ops::log::call")
        < functions.index("StretchImpl::forward")
        < functions.index("NetImpl::forward")
        < functions.index("main")
    )
    assert re.search(
        rf"StretchImpl::forward \(.*\) at {re.escape(SOURCE)}:{log_line}\n", backtrace
    ), backtrace
    # the forward's frame: its line and its locals, alive (the tensor that went negative)
    frame = out.split("----8<----")[2]  # what `frame function` and `info locals` printed
    assert re.match(r"\n#\d+\s+0x[0-9a-f]+ in StretchImpl::forward \(", frame), frame
    assert f"{log_line}\t    torch::Tensor logged = torch::log(scaled);" in frame
    assert re.search(
        r"^scaled = \{<at::TensorBase> = \{impl_ = \{target_ = 0x[0-9a-f]+\}\}", frame, re.M
    ), frame
    assert re.search(r"^scope = \{pushed_ = true\}$", frame, re.M), frame


def test_continue_runs_to_the_end_the_debugger_handles_the_event():
    # under the debugger on_nan is `continue`: no exception, and only the op that
    # produced the NaN stops (the ops that carry it on do not)
    out = run_gdb(["ovf break-on-nan", "run", "continue"], ["--args", TRAIN])
    assert len(HIT.findall(out)) == 1
    assert re.findall(r"^batch (\d) loss", out, re.M) == ["0", "1", "2", "3", "4"]
    assert re.search(r"^\[Inferior 1 \(process \d+\) exited normally\]$", out, re.M), out
    assert "NonFiniteError" not in out


def test_module_filter_and_an_op_named_by_its_parameters():
    # the overflow: aten::addmm of the encoder's Linear, which has no ModuleScope: its
    # module comes from the parameters the op takes
    out = run_gdb(
        ["ovf break-on-nan --module 'enc*'", "run", CUT, "bt", CUT, "kill"],
        ["--args", TRAIN, "overflow"],
    )
    assert (
        summary(out)
        == "ovf: first non-finite value (inf) at batch 2, op aten::addmm in encoder, produced here"
    )
    backtrace = between(out, "#0  ovf_stop_event")
    assert "at::_ops::addmm::call" in backtrace and "NetImpl::forward" in backtrace
    # a glob that matches no module where a NaN is produced: no stop at all
    out = run_gdb(["ovf break-on-nan --module head", "run"], ["--args", TRAIN])
    assert len(HIT.findall(out)) == 0
    assert re.search(r"^\[Inferior 1 \(process \d+\) exited normally\]$", out, re.M), out
