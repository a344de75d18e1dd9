"""Masks are deliberate, padding bugs are not: -inf made from constants alone
(pytorch/examples' log(tril(ones))) or put there by masked_fill is never an
event, at op level or module level; a NaN made from those infinities (softmax
of a row masked whole) is produced where it is made; data written into a former
mask and a trained parameter are never "constants"."""

import math
import os
import sys

import ovf
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_op_observer import layout, records_since, ring_now  # noqa: E402

ROLES = layout.FLAG_PRODUCER | layout.FLAG_CARRIER | layout.FLAG_CONSTANT


def nonfinite_ops(model, *inputs, ops=True):
    """[(op, role flags, why)] of the non-finite op lines a forward wrote, and the ring."""
    start = ring_now().end_seq
    debug = ovf.DebugUnderflowOverflow(model, on_nan="continue", ops=ops, keyword_inputs=True)
    try:
        model(*inputs)
    finally:
        debug.remove()
    ring = ring_now()
    records = records_since(ring, start)
    lines = [
        (
            ring.text(r.name_id),
            r.flags & ROLES,
            ring.text(r.diagnosis_id) if r.diagnosis_id != layout.NO_ID else "",
        )
        for r in records
        if r.kind == layout.KIND_OP_OUTPUT and r.flags & layout.FLAG_NONFINITE
    ]
    return lines, ring, records


class LogMask(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        mask = torch.log(torch.tril(torch.ones(4, 4)))  # word_language_model's mask
        return torch.softmax(self.lin(x) + mask, dim=-1)


def test_a_mask_made_by_ops_from_constants_is_deliberate():
    lines, ring, _ = nonfinite_ops(LogMask(), torch.randn(4, 4))
    assert lines == [
        ("aten::log", layout.FLAG_CONSTANT, ""),
        ("aten::add", layout.FLAG_CONSTANT, ""),
    ]
    assert ring.header.first_nonfinite_seq == layout.NO_SEQ


def test_data_written_into_a_former_mask_is_data_again():
    class Reused(nn.Module):
        def forward(self, x):
            buf = torch.ones(3)  # constants...
            buf.mul_(x)  # ...until data is written into it
            return torch.log(buf)

    lines, _, _ = nonfinite_ops(Reused(), torch.tensor([1.0, 0.0, 2.0]))
    assert lines == [("aten::log", layout.FLAG_PRODUCER, "aten::log of 1 zero (-inf)")]


def test_a_parameter_made_from_zeros_is_not_a_constant():
    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.zeros(3))

        def forward(self, x):
            return x * torch.log(self.scale)

    lines, _, _ = nonfinite_ops(Scale(), torch.ones(3))
    assert lines[0] == ("aten::log", layout.FLAG_PRODUCER, "aten::log of 3 zeros (-inf)")


class PaddedAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x, pad):
        scores = self.lin(x).masked_fill(pad, float("-inf"))
        return torch.softmax(scores, dim=-1)


def test_a_row_masked_whole_makes_nan_where_softmax_runs():
    pad = torch.tensor([[False, False, True], [True, True, True]])  # row 1: every key padded
    lines, ring, _ = nonfinite_ops(PaddedAttention(), torch.randn(2, 3), pad)
    assert lines[:2] == [
        ("aten::masked_fill", layout.FLAG_CONSTANT, ""),
        (
            "aten::softmax",
            layout.FLAG_PRODUCER,
            "aten::softmax of rows that are -inf throughout (masked whole): 3 nan",
        ),
    ]
    first = ring.record(ring.header.first_nonfinite_seq)
    assert ring.text(first.name_id) == "aten::softmax"


def test_a_nan_the_mask_asked_for_is_deliberate():
    class NanFill(nn.Module):
        def forward(self, x):
            return torch.softmax(x.masked_fill(x < 0, math.nan), dim=-1)

    lines, _, _ = nonfinite_ops(NanFill(), torch.tensor([[1.0, -1.0]]))
    assert [(op, role) for op, role, _ in lines] == [
        ("aten::masked_fill", layout.FLAG_CONSTANT),
        ("aten::softmax", layout.FLAG_CONSTANT),
    ]


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qk = nn.Linear(4, 4)

    def forward(self, x, mask):
        h = self.qk(x)
        return torch.softmax(h @ h.transpose(-2, -1) + mask, dim=-1) @ x


class Encoder(nn.Module):
    """A module given an additive -inf mask, as nn.TransformerEncoder is."""

    def __init__(self):
        super().__init__()
        self.attn = Attention()

    def forward(self, x, mask):
        return self.attn(x, mask)


class MaskedModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = Encoder()

    def forward(self, x, rows_masked_whole=False):
        mask = torch.log(torch.tril(torch.ones(3, 3)))
        if rows_masked_whole:
            mask = mask - torch.eye(3).masked_fill(torch.eye(3) > 0, float("inf"))
        return self.enc(x, mask)


def frames_with_nonfinite(records, ring):
    return [
        ring.text(r.name_id)
        for r in records
        if r.kind == layout.KIND_FRAME and r.flags & layout.FLAG_NONFINITE
    ]


def test_module_mode_takes_a_mask_input_for_a_mask():
    _, ring, records = nonfinite_ops(MaskedModel(), torch.randn(3, 4), ops=False)
    assert frames_with_nonfinite(records, ring) == []
    masks = [r for r in records if r.kind == layout.KIND_INPUT and r.neg_inf_count]
    assert masks and all(r.flags & layout.FLAG_CONSTANT for r in masks)
    assert ring.header.first_nonfinite_seq == layout.NO_SEQ


def test_module_mode_judges_a_module_that_turns_its_mask_into_nan():
    _, ring, records = nonfinite_ops(MaskedModel(), torch.randn(3, 4), True, ops=False)
    # row 0 of the mask is -inf throughout: the attention's output is NaN there
    assert frames_with_nonfinite(records, ring)[:2] == ["enc.attn", "enc"]
    mask_inputs = [r for r in records if r.kind == layout.KIND_INPUT and r.neg_inf_count]
    assert mask_inputs and not any(r.flags & layout.FLAG_CONSTANT for r in mask_inputs)
