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
    mask[-1, source // 2 :] = 0  # the last row padded
    kwargs = dict(input_ids=ids, attention_mask=mask)
    if target:
        kwargs.update(decoder_input_ids=torch.randint(4, 99, (batch, target), generator=g), use_cache=False)
    return kwargs


def first_output(out):
    return out[0] if isinstance(out, (tuple, list)) else out.to_tuple()[0]


@pytest.mark.parametrize(
    "cls",
    [VanillaTransformerModel, VanillaTransformerForConditionalGeneration, VanillaTransformerForTokenClassification],
)
@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("overrides", [{}, dict(normalize_before=True, relative_attention_max_distance=4)])
def test_exported_program_matches_eager(cls, dynamic, overrides):
    torch.manual_seed(0)
    model = cls(VanillaTransformerConfig.from_preset("tiny", dropout=0.0, **overrides)).eval()
    seq2seq = cls is not VanillaTransformerForTokenClassification
    example = inputs(2, 9, 5 if seq2seq else None)
    shapes = None
    if dynamic:
        batch, source, target = (
            Dim("batch", min=1, max=64),
            Dim("source", min=2, max=100),
            Dim("target", min=2, max=100),
        )
        shapes = {"input_ids": {0: batch, 1: source}, "attention_mask": {0: batch, 1: source}}
        if seq2seq:
            shapes.update(decoder_input_ids={0: batch, 1: target}, use_cache=None)
    program = torch.export.export(model, (), kwargs=example, dynamic_shapes=shapes, strict=False)
    others = [example] + ([inputs(3, 12, 7 if seq2seq else None, seed=1)] if dynamic else [])
    for kwargs in others:
        with torch.no_grad():
            expected = first_output(model(**kwargs))
        torch.testing.assert_close(first_output(program.module()(**kwargs)), expected, rtol=1e-5, atol=1e-5)


class WithStaticCache(torch.nn.Module):
    """One forward of the translation model over a fresh static decoder cache (what an exported generation step
    runs)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, decoder_input_ids, decoder_attention_mask):
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache, StaticCache

        config = self.model.config
        cache = EncoderDecoderCache(StaticCache(config=config, max_cache_len=16), DynamicCache(config=config))
        return self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            cache=cache,
            use_cache=True,
        ).logits


@pytest.mark.parametrize("mask_dtype", [torch.int64, torch.bool], ids=str)
def test_export_with_a_static_cache_and_dynamic_shapes_under_any_mask_dtype(mask_dtype):
    """torch.export of a generation step with a static cache, every dimension dynamic and 2-D masks as transformers'
    testers make them (`ne(pad_token_id)`: bool) or tokenizers do (int64): the program gives eager's logits at other
    shapes, and the process is left as it was (a model can be built after: no `vmap` state left behind)."""
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(VanillaTransformerConfig.from_preset("tiny", dropout=0.0)).eval()

    def example(batch, source, target, seed):
        kwargs = inputs(batch, source, target, seed)
        mask = torch.ones(batch, target, dtype=torch.long)
        mask[0, target - 1 :] = 0
        return dict(
            input_ids=kwargs["input_ids"],
            attention_mask=kwargs["attention_mask"].to(mask_dtype),
            decoder_input_ids=kwargs["decoder_input_ids"],
            decoder_attention_mask=mask.to(mask_dtype),
        )

    batch, source, target = Dim("batch", min=1, max=8), Dim("source", min=2, max=32), Dim("target", min=2, max=15)
    shapes = dict(
        input_ids={0: batch, 1: source},
        attention_mask={0: batch, 1: source},
        decoder_input_ids={0: batch, 1: target},
        decoder_attention_mask={0: batch, 1: target},
    )
    wrapped = WithStaticCache(model)
    program = torch.export.export(wrapped, (), kwargs=example(2, 9, 3, 0), dynamic_shapes=shapes, strict=False)
    for kwargs in (example(2, 9, 3, 0), example(3, 12, 5, 1)):
        with torch.no_grad():
            torch.testing.assert_close(program.module()(**kwargs), wrapped(**kwargs), rtol=1e-5, atol=1e-5)
    VanillaTransformerForConditionalGeneration(VanillaTransformerConfig.from_preset("tiny"))  # (random init works)
