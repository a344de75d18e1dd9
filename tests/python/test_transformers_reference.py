"""ovf.DebugUnderflowOverflow against the installed transformers.debug_utils
.DebugUnderflowOverflow itself (not a copy), byte for byte: the same report and the same
exception on real transformers models built from configs (transformers_models.py), each
run once with the reference's hooks and once with ovf's on an identical copy."""

import contextlib
import copy
import io

import pytest

transformers = pytest.importorskip(
    "transformers",
    reason="transformers is not installed here (the trixie leg): the main leg runs these",
)
import ovf  # noqa: E402
import torch  # noqa: E402
import transformers_models as models  # noqa: E402
from transformers.debug_utils import DebugUnderflowOverflow as Reference  # noqa: E402

CASES = {
    "t5-fp16": lambda: models.t5("t5"),
    "mt5-fp16": lambda: models.t5("mt5"),
    "gpt2": models.gpt2,
    "llama-bf16": models.llama_bf16,
    "bert": models.bert,
}
# The module whose output the reference reports first as inf/nan, per case.
FIRST_NONFINITE = {
    "t5-fp16": "encoder.block.2.layer.1.DenseReluDense.dropout Dropout",
    "mt5-fp16": "encoder.block.2.layer.1.DenseReluDense.dropout Dropout",
    # the MLP's output is finite (3e36); the final LayerNorm's variance of it is not
    "gpt2": "transformer.ln_f LayerNorm",
    "llama-bf16": "model.layers.1.mlp.down_proj Linear",
    # the intermediate's output is finite (4e36); the LayerNorm's variance of it is not
    "bert": "bert.encoder.layer.1.output.LayerNorm LayerNorm",
}


def run(model, step, debug_class, batches=3, **options):
    """(what was printed, the ValueError's message or None) of `batches` steps."""
    printed, error = io.StringIO(), None
    debug = debug_class(model, **options)
    with contextlib.redirect_stdout(printed), torch.no_grad():
        try:
            for batch in range(batches):
                step(model, batch)
        except ValueError as e:
            error = str(e)
    if isinstance(debug, ovf.DebugUnderflowOverflow):
        debug.remove()
    return printed.getvalue(), error


def both(case, **options):
    model, step = CASES[case]()
    expected = run(copy.deepcopy(model), step, Reference, **options)
    got = run(copy.deepcopy(model), step, ovf.DebugUnderflowOverflow, **options)
    return expected, got


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_report_is_the_references_byte_for_byte(case):
    (expected, expected_error), (got, error) = both(case)
    assert expected_error is not None and "inf/nan detected" in expected_error
    assert error == expected_error
    assert got.splitlines() == expected.splitlines()
    assert got == expected
    # ... and it names what the reference names: the first module whose output is inf/nan.
    frames = got.split("\n\n\n")[0].split("\n                  ")
    assert frames[-1].startswith(FIRST_NONFINITE[case] + "\n"), frames[-1]


def test_traced_batches_and_abort_after_are_the_references():
    options = dict(trace_batch_nums=[1], abort_after_batch_num=1)
    model, step = models.gpt2(overflow=False)
    expected, expected_error = run(copy.deepcopy(model), step, Reference, **options)
    got, error = run(copy.deepcopy(model), step, ovf.DebugUnderflowOverflow, **options)
    assert expected_error == (
        "DebugUnderflowOverflow: aborting after 2 batches due to `abort_after_batch_num=1` arg"
    )
    assert error == expected_error
    assert "*** Starting batch number=1 ***" in expected
    assert got == expected


def frame_lines(report, header):
    """The value lines of the last frame whose header line is `header`."""
    lines, found = report.splitlines(), None
    for i, line in enumerate(lines):
        if line == header:
            found = i
    assert found is not None, f"no frame {header!r} in:\n{report}"
    rest = lines[found + 1 :]
    end = next((j for j, line in enumerate(rest) if line.startswith(" " * 17) or not line), None)
    return rest[:end]


def test_keyword_inputs_and_model_outputs_are_seen_when_asked():
    """The reference's hooks see positional inputs and tuples only; with keyword_inputs ovf
    sees every tensor of a forward (as python3 -m ovf and the debuggers do): the keyword
    inputs and the logits inside a ModelOutput."""
    model, step = models.gpt2(overflow=False)
    options = dict(trace_batch_nums=[0], abort_after_batch_num=0)
    plain, _ = run(copy.deepcopy(model), step, ovf.DebugUnderflowOverflow, **options)
    seen, _ = run(
        copy.deepcopy(model), step, ovf.DebugUnderflowOverflow, keyword_inputs=True, **options
    )
    root = " " * 19 + "GPT2LMHeadModel"
    assert frame_lines(plain, root)[-1] == "     not a tensor output"
    outputs = [line.split()[-1] for line in frame_lines(seen, root) if " output" in line]
    assert outputs == ['output["logits"]', 'output["cache"]'], frame_lines(seen, root)
    block = frame_lines(seen, " " * 17 + " transformer.h.1 GPT2Block")
    assert '     not a tensor input["use_cache"]' in block, block
