"""Every attention backend gives eager's results: "sdpa" (with its causal and unmasked kernels where the mask allows
them) and "flex_attention" (block masks from the same mask rule; inference only on CPUs, its kernel compiled on
first use). Packed rows under every backend: tests/test_packing.py."""

import pytest
import torch
import torch.nn.functional as F

from conftest import batch, seq2seq
from vanilla_transformer import VanillaTransformerForTokenClassification
from vanilla_transformer.modeling_vanilla_transformer import make_attention_mask, shift_tokens_right

flex_attention = pytest.importorskip("torch.nn.attention.flex_attention", reason="flex attention needs torch >= 2.5")


@pytest.mark.parametrize("implementation", ["sdpa", "flex_attention"])
def test_backend_gives_eagers_logits_and_generations(tiny_config, implementation):
    """On a padded batch: the translation model's logits and the tagger's (at real tokens) within 1e-5 of eager's; greedy and beam
    generation, uncached, cached and with a static cache, give eager's tokens."""
    ids, mask, labels = batch(tiny_config)
    model = seq2seq(tiny_config)
    tagger = VanillaTransformerForTokenClassification(tiny_config).eval()
    inputs = dict(input_ids=ids, attention_mask=mask,
                  decoder_input_ids=shift_tokens_right(labels, tiny_config.pad_token_id, 1))
    settings = dict(max_new_tokens=8, min_new_tokens=8)
    with torch.no_grad():
        logits, tags = model(**inputs).logits, tagger(input_ids=ids, attention_mask=mask).logits
        greedy = model.generate(ids, attention_mask=mask, **settings)
        beams = model.generate(ids, attention_mask=mask, num_beams=3, **settings)
        model.set_attn_implementation(implementation)
        tagger.set_attn_implementation(implementation)
        torch.testing.assert_close(model(**inputs).logits, logits, rtol=0, atol=1e-5)
        real = mask.bool()  # (a padded position sees no key: its output is the backend's choice, and ignored)
        torch.testing.assert_close(tagger(input_ids=ids, attention_mask=mask).logits[real], tags[real], rtol=0,
                                   atol=1e-5)
        for cache in ({"use_cache": False}, {}, {"cache_implementation": "static"}):
            assert torch.equal(model.generate(ids, attention_mask=mask, **cache, **settings), greedy), cache
        assert torch.equal(model.generate(ids, attention_mask=mask, num_beams=3, **settings), beams)


def test_sdpa_runs_its_causal_and_unmasked_kernels(tiny_config, monkeypatch):
    """No padding: the encoder's SDPA call gets no mask, the decoder's self-attention `is_causal=True` and no mask
    (SDPA's fast kernels); with padding both get masks; eager always gets the causal mask written out."""
    calls = []
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention",
                        lambda *a, **k: calls.append((k.get("attn_mask") is None, k.get("is_causal"))) or sdpa(*a, **k))
    model = seq2seq(tiny_config)
    model.set_attn_implementation("sdpa")
    layers = tiny_config.encoder_layers
    for pad_last, expected in ((False, [(True, False)] * layers + [(True, True), (True, False)] * layers),
                               (True, [(False, False)] * layers + [(False, False), (False, False)] * layers)):
        ids, mask, labels = batch(tiny_config, pad_last=pad_last)
        decoder_mask = (labels != -100).long()
        calls.clear()
        model(input_ids=ids, attention_mask=mask, labels=labels,
              decoder_attention_mask=decoder_mask if pad_last else None)
        assert calls == expected, pad_last
    assert make_attention_mask(None, 5, torch.float32, causal=True, implementation="sdpa") is None
    eager = make_attention_mask(None, 5, torch.float32, causal=True, implementation="eager")
    assert torch.equal(eager[0, 0] == 0, torch.ones(5, 5, dtype=torch.bool).tril())


@pytest.mark.parametrize("causal", [False, True])
def test_flex_block_mask_follows_the_dense_mask(causal):
    """The flex backend's `BlockMask` applies the same rule, query by key, as the dense mask of the other backends:
    padding, causality after a cache of 2 positions, and packed segments (each query sees only its own segment)."""
    segments = torch.tensor([[1, 1, 1, 2, 2, 0, 0], [1, 1, 1, 1, 1, 1, 0]])
    queries = torch.tensor([[1, 1, 2, 2, 0], [1, 1, 1, 1, 1]])
    past = 2 if causal else 0
    dense = make_attention_mask(segments, 5, torch.float32, causal=causal, past_length=past,
                                query_segments=queries if not causal else None)
    block = make_attention_mask(segments, 5, torch.float32, causal=causal, past_length=past,
                                query_segments=queries if not causal else None, implementation="flex_attention")
    assert isinstance(block, flex_attention.BlockMask)
    b, q, k = torch.arange(2)[:, None, None, None], torch.arange(5)[:, None], torch.arange(7)
    assert torch.equal(block.mask_mod(b, None, q, k), dense == 0)
    assert (dense == 0).any() and not (dense == 0).all()
