"""`generate` on the translation model the way transformers' `GenerationTesterMixin` checks an in-tree model (that
mixin ships in neither the transformers wheel nor its sdist): per-step output shapes, assisted and prompt-lookup
decoding equal to greedy, continuing from a returned cache, encoder embeddings as input, logits processors obeyed.
Cached against uncached, static caches, beam-cache reordering and compiled decoding: test_modeling.py."""

import copy

import pytest
import torch

from conftest import B, S, batch, seq2seq
from vanilla_transformer import VanillaTransformerConfig

NEW = 8


def model_and_batch(seed=0, **overrides):
    config = VanillaTransformerConfig.from_preset("tiny", dropout=0.0, **overrides)
    input_ids, attention_mask, _ = batch(config)  # the last row is padded after 4 tokens
    return seq2seq(config, seed=seed), input_ids, attention_mask


def greedy_kwargs(input_ids, attention_mask):
    return dict(
        input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False
    )


@pytest.mark.parametrize("beams", [1, 2])
def test_dict_outputs_hold_every_step_with_the_right_shapes(beams):
    model, ids, mask = model_and_batch()
    model.set_attn_implementation("eager")  # (the backend that returns attention weights)
    config = model.config
    out = model.generate(
        **greedy_kwargs(ids, mask),
        num_beams=beams,
        num_return_sequences=beams,
        return_dict_in_generate=True,
        output_scores=True,
        output_logits=True,
        output_attentions=True,
        output_hidden_states=True,
    )
    rows, heads = B * beams, config.decoder_attention_heads
    assert out.sequences.shape == (rows, NEW + 1)  # the start token, then NEW tokens
    assert len(out.scores) == len(out.logits) == NEW
    assert all(s.shape == (rows, config.vocab_size) for s in out.scores + out.logits)
    assert len(out.encoder_attentions) == config.encoder_layers
    assert all(a.shape == (B, config.encoder_attention_heads, S, S) for a in out.encoder_attentions)
    assert len(out.encoder_hidden_states) == config.encoder_layers + 1  # the embeddings, then each layer
    for step in range(NEW):  # cached decoding: one new query per step, keys over every token so far
        assert len(out.decoder_attentions[step]) == len(out.cross_attentions[step]) == config.decoder_layers
        assert all(a.shape == (rows, heads, 1, step + 1) for a in out.decoder_attentions[step])
        assert all(a.shape == (rows, heads, 1, S) for a in out.cross_attentions[step])
        assert len(out.decoder_hidden_states[step]) == config.decoder_layers + 1
        assert all(h.shape == (rows, 1, config.d_model) for h in out.decoder_hidden_states[step])
        # the padded source positions of the last sentence get no cross-attention
        assert torch.all(out.cross_attentions[step][0][-beams:, :, :, 4:] == 0)
    weights = out.decoder_attentions[-1][-1]
    torch.testing.assert_close(weights.sum(-1), torch.ones(rows, heads, 1))


def test_assisted_and_prompt_lookup_decoding_equal_greedy():
    """Speculative decoding only proposes tokens; the model's greedy choice decides, so the result is the same. Both
    take one sentence at a time (transformers' limit), so each sentence goes alone, without its padding."""
    model, ids, mask = model_and_batch()
    other, _, _ = model_and_batch(seed=1)  # an assistant that mostly guesses wrong
    batched = model.generate(**greedy_kwargs(ids, mask))
    for row in range(B):
        one = ids[row : row + 1, : int(mask[row].sum())]
        kwargs = greedy_kwargs(one, torch.ones_like(one))
        greedy = model.generate(**kwargs)
        assert torch.equal(greedy, batched[row : row + 1])  # padding changes nothing
        assert torch.equal(model.generate(**kwargs, prompt_lookup_num_tokens=2), greedy)
        assert torch.equal(model.generate(**kwargs, assistant_model=other), greedy)
        assert torch.equal(model.generate(**kwargs, assistant_model=model), greedy)


def test_generation_continues_from_the_cache_it_returned():
    model, ids, mask = model_and_batch()
    whole = model.generate(**greedy_kwargs(ids, mask))
    first = model.generate(
        **{**greedy_kwargs(ids, mask), "max_new_tokens": NEW // 2, "min_new_tokens": NEW // 2},
        return_dict_in_generate=True,
    )
    rest = model.generate(
        **{**greedy_kwargs(ids, mask), "max_new_tokens": NEW // 2, "min_new_tokens": NEW // 2},
        decoder_input_ids=first.sequences,
        cache=first.past_key_values,
    )
    assert torch.equal(rest, whole)


@pytest.mark.parametrize("scale_embedding", [True, False])
def test_encoder_embeddings_as_input_equal_token_ids(scale_embedding):
    """`inputs_embeds` are what the embedding layer returns: the x sqrt(d_model) scaling (section 3.4) is the model's,
    applied to either input."""
    model, ids, mask = model_and_batch(scale_embedding=scale_embedding)
    embeds = model.get_input_embeddings()(ids)
    kwargs = greedy_kwargs(ids, mask)
    del kwargs["input_ids"]
    assert torch.equal(model.generate(inputs_embeds=embeds, **kwargs), model.generate(**greedy_kwargs(ids, mask)))


def test_logits_processors_are_obeyed():
    model, ids, mask = model_and_batch()
    plain = model.generate(**greedy_kwargs(ids, mask))[:, 1:]
    banned = int(plain[0, 0])  # a token greedy decoding does produce
    out = model.generate(**greedy_kwargs(ids, mask), no_repeat_ngram_size=2, bad_words_ids=[[banned]])[:, 1:]
    assert not torch.any(out == banned)
    for row in out.tolist():
        bigrams = list(zip(row, row[1:]))
        assert len(bigrams) == len(set(bigrams)), row


@pytest.mark.parametrize("beams", [1, 2])
def test_compiled_generate_with_a_static_cache_equals_eager(beams):
    """transformers' `test_generate_compile_model_forward_fullgraph`: `generate` with a static cache and the decoding
    step compiled as one graph (no break, no data-dependent branch on the cache's length) gives eager's tokens."""
    from transformers import CompileConfig

    model, ids, mask = model_and_batch()
    kwargs = dict(greedy_kwargs(ids, mask), num_beams=beams)
    eager = model.generate(**kwargs)
    compile_config = CompileConfig(fullgraph=True, dynamic=False, backend="eager")  # tracing alone: no code generation
    compile_config._compile_all_devices = True  # a public field: compile on a CPU too (transformers' own tests set it)
    torch.compiler.reset()
    compiled = model.generate(**kwargs, cache_implementation="static", compile_config=compile_config)
    assert torch.equal(compiled, eager)


@pytest.mark.parametrize("cache_implementation", ["static", "dynamic"])
def test_prefill_and_decoding_step_export_and_equal_eager(cache_implementation):
    """transformers' `test_torch_export_generate`: the prefill and the cached decoding step, captured from `generate`,
    export with torch.export (transformers' DynamoExporter) and compute what the eager model computes."""
    from transformers import GenerationConfig
    from transformers.exporters import DynamoConfig, DynamoExporter
    from transformers.exporters.utils import decompose_for_generation, get_leaf_tensors

    model, ids, mask = model_and_batch()
    generation_config = GenerationConfig(
        cache_implementation=cache_implementation,
        max_new_tokens=2,
        do_sample=False,
        num_beams=1,
        decoder_start_token_id=model.config.decoder_start_token_id,
        pad_token_id=model.config.pad_token_id,
    )
    components = decompose_for_generation(model, {"input_ids": ids, "attention_mask": mask}, generation_config)
    assert set(components) == {"prefill", "decode"}
    for name, (module, inputs) in components.items():
        with torch.no_grad():
            expected = get_leaf_tensors(module(**copy.deepcopy(inputs)))
            program = DynamoExporter().export(module, inputs, config=DynamoConfig(dynamic=False))  # pops use_cache...
            got = get_leaf_tensors(program.program.module()(**copy.deepcopy(inputs)))
        assert "logits" in expected and expected.keys() == got.keys(), name
        for key in expected:
            torch.testing.assert_close(got[key], expected[key], rtol=1e-4, atol=1e-4, msg=f"{name}: {key}")
