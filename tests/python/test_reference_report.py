"""DebugUnderflowOverflow prints what the reference prints, line by line."""

import ovf
import pytest
import torch
from models import batch_inputs, make_net
from oracle import Oracle


def run_until_overflow(model, overflow_step, steps=5):
    """Batches 0..steps-1; the forward of `overflow_step` is pushed past float32."""
    for step in range(steps):
        gain = float("inf") if step == overflow_step else 1.0
        model(batch_inputs(step), gain)  # positional: the reference sees only positional inputs


@pytest.mark.parametrize("max_frames", [21, 4])
def test_report_matches_oracle_line_by_line(capsys, max_frames):
    oracle_model = make_net()
    oracle = Oracle(oracle_model, max_frames)
    run_until_overflow(oracle_model, overflow_step=2)
    oracle.remove()
    assert oracle.detected[0] == 2

    model = make_net()
    debug = ovf.DebugUnderflowOverflow(model, max_frames_to_save=max_frames)
    with pytest.raises(ValueError) as excinfo:
        run_until_overflow(model, overflow_step=2)
    debug.remove()
    printed = capsys.readouterr().out
    assert printed.splitlines() == oracle.expected_report().splitlines()
    assert printed == oracle.expected_report()
    assert isinstance(excinfo.value, ovf.NonFiniteError)
    assert (
        str(excinfo.value)
        == "DebugUnderflowOverflow: inf/nan detected, aborting as there is no point running"
        " further. "
        "Please scroll up above this traceback to see the activation values prior to this event."
    )


def test_report_names_batch_and_module(capsys):
    model = make_net()
    debug = ovf.DebugUnderflowOverflow(model)
    with pytest.raises(ValueError):
        run_until_overflow(model, overflow_step=3)
    debug.remove()
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == ["output has infs", "", "Detected inf/nan during batch_number=3"]
    # The last frame is the module whose output went non-finite, its input finite.
    # (the report ends with print("\n\n"): three empty lines)
    header, input0, input1, output = lines[-7:-3]
    assert header == " " * 18 + "amp Amp"
    assert input0.endswith(" input[0]") and "inf" not in input0 and "nan" not in input0
    assert input1 == "     not a tensor input[1]"
    assert output.endswith("      inf output")
    assert lines[-3:] == ["", "", ""]


def test_trace_batch_nums_print_every_frame_of_those_batches(capsys):
    model = make_net()
    debug = ovf.DebugUnderflowOverflow(model, trace_batch_nums=[1], abort_after_batch_num=1)
    with pytest.raises(ValueError) as excinfo:
        for step in range(4):
            model(batch_inputs(step))
    debug.remove()
    assert (
        str(excinfo.value)
        == "DebugUnderflowOverflow: aborting after 2 batches due to `abort_after_batch_num=1` arg"
    )
    out = capsys.readouterr().out
    oracle_model = make_net()
    oracle = Oracle(oracle_model, max_frames_to_save=1000)
    for step in range(2):
        oracle_model(batch_inputs(step))
    oracle.remove()
    # Batch 1's frames are the oracle's frames after batch 0's (the root frame ends a batch).
    per_batch = len(oracle.frames) // 2
    assert out == "\n".join(list(oracle.frames)[per_batch:]) + "\n"
    assert out.startswith(
        "\n\n" + " " * 17 + " *** Starting batch number=1 ***\nabs min  abs max  metadata\n"
    )


def test_overflow_inside_a_traced_batch_is_reported_at_the_next_untraced_frame(capsys):
    # The reference's detected_overflow flag is sticky: a NaN in a traced batch
    # raises at the first frame after it.
    model = make_net()
    debug = ovf.DebugUnderflowOverflow(model, trace_batch_nums=[0])
    model(batch_inputs(0), float("inf"))
    out = capsys.readouterr().out
    assert "output has infs" in out and "Detected" not in out
    with pytest.raises(ovf.NonFiniteError):
        model(batch_inputs(1))
    debug.remove()
    assert "Detected inf/nan during batch_number=1" in capsys.readouterr().out


def test_detect_overflow_prints_and_returns(capsys):
    assert (
        ovf.detect_overflow(torch.tensor([1.0, float("nan"), float("inf")]), "after layer_norm")
        is True
    )
    assert ovf.detect_overflow(torch.ones(3), "fine") is False
    assert capsys.readouterr().out == "after layer_norm has nans\nafter layer_norm has infs\n"


def test_batch_number_counts_root_forwards():
    model = make_net()
    debug = ovf.DebugUnderflowOverflow(model)
    for step in range(3):
        model(batch_inputs(step))
    assert debug.batch_number == 3
    debug.remove()
