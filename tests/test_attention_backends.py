"""Every attention backend gives eager's results: "sdpa" (with its causal and unmasked kernels where the mask allows
them) and "flex_attention" (block masks; inference only on CPUs, its kernel compiled on first use), each handed its
masks by transformers' `masking_utils`. Packed rows under every backend: tests/test_packing.py."""

import pytest
import torch
import torch.nn.functional as F

from conftest import backend_config, batch, seq2seq
from vanilla_transformer import VanillaTransformerForTokenClassification
from vanilla_transformer.model.modeling_vanilla_transformer import VanillaTransformerAttention, shift_tokens_right

flex_attention = pytest.importorskip("torch.nn.attention.flex_attention", reason="flex attention needs torch >= 2.5")


@pytest.mark.parametrize("implementation", ["sdpa", "flex_attention"])
def test_backend_gives_eagers_logits_and_generations(implementation):
    """On a padded batch: the translation model's logits and the tagger's (at real tokens) within 1e-5 of eager's;
    greedy and beam generation, uncached, cached and with a static cache, give eager's tokens (uncached: every decoder
    length from 1 to 8, which torch's CPU flex kernel gets wrong for narrow heads, `check_backend`)."""
    tiny_config = backend_config(implementation)
    ids, mask, labels = batch(tiny_config)
    model = seq2seq(tiny_config)
    tagger = VanillaTransformerForTokenClassification(tiny_config).eval()
    inputs = dict(
        input_ids=ids, attention_mask=mask, decoder_input_ids=shift_tokens_right(labels, tiny_config.pad_token_id, 1)
    )
    settings = dict(max_new_tokens=8, min_new_tokens=8)
    with torch.no_grad():
        logits, tags = model(**inputs).logits, tagger(input_ids=ids, attention_mask=mask).logits
        greedy = model.generate(ids, attention_mask=mask, **settings)
        beams = model.generate(ids, attention_mask=mask, num_beams=3, **settings)
        model.set_attn_implementation(implementation)
        tagger.set_attn_implementation(implementation)
        torch.testing.assert_close(model(**inputs).logits, logits, rtol=0, atol=1e-5)
        real = mask.bool()  # (a padded position sees no key: its output is the backend's choice, and ignored)
        torch.testing.assert_close(
            tagger(input_ids=ids, attention_mask=mask).logits[real], tags[real], rtol=0, atol=1e-5
        )
        for cache in ({"use_cache": False}, {}, {"cache_implementation": "static"}):
            assert torch.equal(model.generate(ids, attention_mask=mask, **cache, **settings), greedy), cache
        assert torch.equal(model.generate(ids, attention_mask=mask, num_beams=3, **settings), beams)


def test_sdpa_runs_its_causal_and_unmasked_kernels(tiny_config, monkeypatch):
    """No padding: the encoder's SDPA call gets no mask, the decoder's self-attention `is_causal=True` and no mask
    (SDPA's fast kernels); with padding both get masks; eager always gets the causal mask written out."""
    calls = []
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(
        F,
        "scaled_dot_product_attention",
        lambda *a, **k: calls.append((k.get("attn_mask") is None, k.get("is_causal"))) or sdpa(*a, **k),
    )
    model = seq2seq(tiny_config)
    model.set_attn_implementation("sdpa")
    layers = tiny_config.encoder_layers
    for pad_last, expected in (
        (False, [(True, False)] * layers + [(True, True), (True, False)] * layers),
        (True, [(False, False)] * layers + [(False, False), (False, False)] * layers),
    ):
        ids, mask, labels = batch(tiny_config, pad_last=pad_last)
        decoder_mask = (labels != -100).long()
        calls.clear()
        model(
            input_ids=ids, attention_mask=mask, labels=labels, decoder_attention_mask=decoder_mask if pad_last else None
        )
        assert calls == expected, pad_last


@pytest.mark.parametrize("implementation", ["eager", "sdpa", "flex_attention"])
def test_relative_bias_reaches_every_backend_beside_its_mask(implementation):
    """The relative-position bias is the attention's `position_bias` (added to the scores by each backend, flex in its
    score_mod), not folded into the mask: every self-attention gets the bias and the backend's own mask form (a
    BlockMask for flex, a tensor or none otherwise), cross-attention no bias; the logits equal eager's."""
    config = backend_config(implementation, relative_attention_max_distance=3)
    model = seq2seq(config)
    for stack in (model.model.encoder, model.model.decoder):
        torch.nn.init.normal_(stack.relative_bias.weight)
    ids, mask, labels = batch(config)
    inputs = dict(input_ids=ids, attention_mask=mask, decoder_input_ids=shift_tokens_right(labels, 0, 1))
    with torch.no_grad():
        expected = model(**inputs).logits
    seen = []
    for module in model.modules():
        if isinstance(module, VanillaTransformerAttention):
            module.register_forward_pre_hook(
                lambda m, args, kw: seen.append(
                    (m.is_cross_attention, type(kw["attention_mask"]).__name__, kw.get("position_bias") is not None)
                ),
                with_kwargs=True,
            )
    model.set_attn_implementation(implementation)
    with torch.no_grad():
        torch.testing.assert_close(model(**inputs).logits, expected, rtol=0, atol=1e-5)
    assert {(cross, biased) for cross, _, biased in seen} == {(False, True), (True, False)}
    forms = {"flex_attention": {"BlockMask"}, "sdpa": {"Tensor", "NoneType"}, "eager": {"Tensor"}}[implementation]
    assert {kind for _, kind, _ in seen} <= forms  # (sdpa: None = its causal path, the bias added by transformers)


def test_flex_attention_compiles_with_its_masks():
    """Compiled (graph breaks allowed: masking_utils' flex masks break it, docs/configuration.md), flex attention gives
    the uncompiled model's logits on a padded batch."""
    tiny_config = backend_config("flex_attention")
    model = seq2seq(tiny_config)
    model.set_attn_implementation("flex_attention")
    ids, mask, labels = batch(tiny_config)
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask, labels=labels).logits
        compiled = torch.compile(model, backend="eager")
        torch.testing.assert_close(
            compiled(input_ids=ids, attention_mask=mask, labels=labels).logits, expected, rtol=0, atol=1e-5
        )


@pytest.mark.parametrize("head_dim", [8, 16])
def test_flex_attention_refuses_narrow_heads_on_a_cpu(head_dim):
    """Flex attention on a CPU with heads narrower than 32 dimensions (torch's CPU kernel returns wrong values for some
    of them) raises a ValueError naming the head size and the backends to use, in the translation model and the
    tagger; heads of 32 run (test_backend_gives_eagers_logits_and_generations)."""
    config = backend_config(
        "eager", d_model=32, encoder_attention_heads=32 // head_dim, decoder_attention_heads=32 // head_dim
    )
    ids, mask, labels = batch(config)
    for model, extra in (
        (seq2seq(config), {"labels": labels}),
        (VanillaTransformerForTokenClassification(config).eval(), {}),
    ):
        model.set_attn_implementation("flex_attention")
        with pytest.raises(ValueError, match=f"at least 32 dimensions.*have {head_dim}.*'sdpa' or 'eager'"):
            model(input_ids=ids, attention_mask=mask, **extra)
