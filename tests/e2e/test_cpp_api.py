"""A LibTorch C++ program (examples/cpp/train, which uses ovf::Watch and nothing else
of ovf) run with `ovf break-on-nan` under gdb and LLDB stops right after the ATen op
that produced the NaN, in batch 2, in the C++ forward: the native stack shows it and
the forward's locals are alive."""

import os
import re

import pytest
from build_paths import BUILD
from harness import TOP, between

TRAIN = os.path.join(BUILD, "examples", "cpp", "train")
SOURCE = os.path.join(TOP, "examples", "cpp", "train.cpp")

pytestmark = pytest.mark.skipif(
    not os.path.isfile(TRAIN), reason=f"{TRAIN} is not built (cmake -DOVF_BUILD_EXAMPLES=ON)"
)


def source_line(text):
    """The line number of `text` in train.cpp."""
    with open(SOURCE) as f:
        return next(i for i, line in enumerate(f, 1) if text in line)


def summary(out):
    return re.search(r"^ovf: (?:first )?non-finite value .*$", out, re.M).group(0)


def test_break_on_nan_stops_after_the_op_in_the_cpp_forward_with_its_locals(debugger):
    out = debugger.run(
        [
            "ovf break-on-nan",
            "run",
            debugger.cut(),
            "bt",
            debugger.cut(),
            debugger.select_function("StretchImpl::forward"),
            debugger.show_locals,
            debugger.cut(),
            "ovf frames 8",
            debugger.cut(),
            "kill",
        ],
        program=[TRAIN],
        cpp_names=True,
    )
    assert (
        summary(out)
        == "ovf: first non-finite value (nan) at batch 2, op aten::log in stretch, produced here"
    )
    assert debugger.hits(out) == 1
    # a C++ program has no Python stack: the summary does not point at one
    assert "py-bt" not in out and "py-locals" not in out
    # batches 0 and 1 ran; the stop is inside batch 2's forward, before its loss
    assert "batch 1 loss" in out and "batch 2 loss" not in out
    # the stack: the stop hook, the op observer, the op, then the C++ forwards and main
    frames = debugger.native_frames(out.split("----8<----")[1])
    functions = [f[0] for f in frames]
    assert functions[0] == "ovf_stop_event", functions
    assert "at::_ops::log::call" in functions, functions
    assert (
        functions.index("at::_ops::log::call")
        < functions.index("StretchImpl::forward")
        < functions.index("NetImpl::forward")
        < functions.index("main")
    ), functions
    forward = frames[functions.index("StretchImpl::forward")]
    assert (os.path.basename(forward[1]), forward[2]) == (
        "train.cpp",
        source_line("torch::log(scaled)"),
    ), forward
    # the forward's frame: its locals, alive (the tensor that went negative, the scope)
    frame = out.split("----8<----")[2]
    assert debugger.local_tensor(frame, "scaled"), frame
    assert debugger.local_tensor(frame, "logged"), frame
    assert debugger.local_value(frame, "scope", "ovf::ModuleScope", "pushed_ = true"), frame
    # no module frames in a C++ program: `ovf frames` lists its op records by module scope,
    # the batch boundary where it fell
    listing = between(out, "ovf: no module frames")
    assert re.sub(r"\d\.\d\de[+-]\d\d", "X", listing).splitlines() == [
        "ovf: no module frames in this ring (a program without nn.Module hooks, such as a "
        "LibTorch C++ one): its op records are listed as frames, by module scope and op",
        "Last 8 forward frames:",
        "abs min  abs max  metadata",
        "                  head aten::add_",  # batch 1's SGD step
        "X X output = aten::add_ in head",
        "",
        "",
        "                  *** Starting batch number=2 ***",
        "abs min  abs max  metadata",
        "                  (no module) aten::uniform_",  # torch::rand: zero_grad's zero_ left out
        "X X output = aten::uniform_ in (no module)",
        "                  (no module) aten::rand",
        "X X output = aten::rand in (no module)",
        "                  (no module) aten::sum",
        "X X output = aten::sum in (no module)",
        "                  encoder aten::copy_",
        "X X output = aten::copy_ in encoder",
        "                  encoder aten::addmm",
        "X X output = aten::addmm in encoder",
        "                  stretch aten::mul",
        "X X output = aten::mul in stretch",
        "                  stretch aten::log",
        "     nan      nan output = aten::log in stretch (produced here)",
    ], listing


def test_continue_runs_to_the_end_the_debugger_handles_the_event(debugger):
    # under the debugger on_nan is `continue`: no exception, and only the op that
    # produced the NaN stops (the ops that carry it on do not)
    out = debugger.run(["ovf break-on-nan", "run", "continue"], program=[TRAIN], cpp_names=True)
    assert debugger.hits(out) == 1
    assert re.findall(r"^batch (\d) loss", out, re.M) == ["0", "1", "2", "3", "4"]
    assert debugger.exit_code(out) == 0, out
    assert "NonFiniteError" not in out


def test_module_filter_and_an_op_named_by_its_parameters(debugger):
    # the overflow: aten::addmm of the encoder's Linear, which has no ModuleScope: its
    # module comes from the parameters the op takes
    out = debugger.run(
        ["ovf break-on-nan --module 'enc*'", "run", debugger.cut(), "bt", debugger.cut(), "kill"],
        program=[TRAIN, "overflow"],
        cpp_names=True,
    )
    assert (
        summary(out)
        == "ovf: first non-finite value (inf) at batch 2, op aten::addmm in encoder, produced here"
    )
    functions = [f[0] for f in debugger.native_frames(out.split("----8<----")[1])]
    assert "at::_ops::addmm::call" in functions and "NetImpl::forward" in functions, functions
    # a glob that matches no module where a NaN is produced: no stop at all
    out = debugger.run(["ovf break-on-nan --module head", "run"], program=[TRAIN], cpp_names=True)
    assert debugger.hits(out) == 0
    assert debugger.exit_code(out) == 0, out
