"""`torch.export` of every head, with static and dynamic batch / sequence dimensions: the exported program gives the
eager model's outputs, also for shapes other than the ones it was traced with."""

import pytest
import torch
from torch.export import Dim

from vanilla_transformer import (
    VanillaTransformerConfig,
    VanillaTransformerForConditionalGeneration,
    VanillaTransformerForTokenClassification,
    VanillaTransformerModel,
)


def inputs(batch, source, target=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, 99, (batch, source), generator=g)
    mask = torch.ones_like(ids)
    mask[-1, source // 2:] = 0  # the last row padded
    kwargs = dict(input_ids=ids, attention_mask=mask)
    if target:
        kwargs.update(decoder_input_ids=torch.randint(4, 99, (batch, target), generator=g), use_cache=False)
    return kwargs


def first_output(out):
    return out[0] if isinstance(out, (tuple, list)) else out.to_tuple()[0]


@pytest.mark.parametrize("cls", [VanillaTransformerModel, VanillaTransformerForConditionalGeneration,
                                 VanillaTransformerForTokenClassification])
@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("overrides", [{}, dict(normalize_before=True, relative_attention_max_distance=4)])
def test_exported_program_matches_eager(cls, dynamic, overrides):
    torch.manual_seed(0)
    model = cls(VanillaTransformerConfig.from_preset("tiny", dropout=0.0, **overrides)).eval()
    seq2seq = cls is not VanillaTransformerForTokenClassification
    example = inputs(2, 9, 5 if seq2seq else None)
    shapes = None
    if dynamic:
        batch, source, target = Dim("batch", min=1, max=64), Dim("source", min=2, max=100), Dim("target", min=2, max=100)
        shapes = {"input_ids": {0: batch, 1: source}, "attention_mask": {0: batch, 1: source}}
        if seq2seq:
            shapes.update(decoder_input_ids={0: batch, 1: target}, use_cache=None)
    program = torch.export.export(model, (), kwargs=example, dynamic_shapes=shapes, strict=False)
    others = [example] + ([inputs(3, 12, 7 if seq2seq else None, seed=1)] if dynamic else [])
    for kwargs in others:
        with torch.no_grad():
            expected = first_output(model(**kwargs))
        torch.testing.assert_close(first_output(program.module()(**kwargs)), expected, rtol=1e-5, atol=1e-5)
