"""HF-style tests of the model family on the tiny preset."""

import copy
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForSeq2SeqLM,
    AutoModelForTokenClassification,
)
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

from conftest import (
    BLOCK_PACKAGE,
    B,
    S,
    T,
    batch,
    randomize_deviations,
    seq2seq,
    subprocess_env,
    tagging_accuracy_after_training,
)
from vanilla_transformer import (
    VanillaTransformerConfig,
    VanillaTransformerEncoderModel,
    VanillaTransformerForConditionalGeneration,
    VanillaTransformerForMaskedLM,
    VanillaTransformerForTokenClassification,
    VanillaTransformerModel,
)
from vanilla_transformer.model.kernels_vanilla_transformer import apply_dropout
from vanilla_transformer.model.modeling_vanilla_transformer import running_segments, shift_tokens_right

# ------------------------------------------------------------------------------------------------------ shapes / heads


def test_base_model_shapes(tiny_config):
    model = VanillaTransformerModel._from_config(tiny_config, attn_implementation="eager").eval()  # (the weights)
    ids, mask, labels = batch(tiny_config)
    out = model(
        input_ids=ids,
        attention_mask=mask,
        decoder_input_ids=labels.clamp(min=0),
        output_hidden_states=True,
        output_attentions=True,
    )
    assert out.last_hidden_state.shape == (B, T, tiny_config.d_model)
    assert out.encoder_last_hidden_state.shape == (B, S, tiny_config.d_model)
    assert len(out.encoder_hidden_states) == tiny_config.encoder_layers + 1
    assert len(out.decoder_hidden_states) == tiny_config.decoder_layers + 1
    assert out.encoder_attentions[0].shape == (B, tiny_config.encoder_attention_heads, S, S)
    assert out.decoder_attentions[0].shape == (B, tiny_config.decoder_attention_heads, T, T)
    assert out.cross_attentions[0].shape == (B, tiny_config.decoder_attention_heads, T, S)
    # causal: decoder self-attention never looks ahead; padding: nobody attends to padded source tokens
    assert torch.all(out.decoder_attentions[0].triu(diagonal=1) == 0)
    assert torch.all(out.cross_attentions[0][-1, :, :, 4:] == 0)
    tup = model(input_ids=ids, attention_mask=mask, decoder_input_ids=labels.clamp(min=0), return_dict=False)
    assert isinstance(tup, tuple) and torch.equal(
        tup[0], model(input_ids=ids, attention_mask=mask, decoder_input_ids=labels.clamp(min=0)).last_hidden_state
    )


def test_hidden_states_can_be_selected_and_a_misspelt_argument_is_refused(tiny_config):
    """transformers records the hidden states (`output_hidden_states` may also pick some by index); every head refuses
    a keyword argument it does not know (`label=` would otherwise train without a loss and no error)."""
    ids, mask, labels = batch(tiny_config)
    model = VanillaTransformerEncoderModel(tiny_config).eval()
    every = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    last = model(input_ids=ids, attention_mask=mask, output_hidden_states=[-1]).hidden_states
    assert len(every) == len(last) == tiny_config.encoder_layers + 1
    assert all(h is None for h in last[:-1]) and torch.equal(last[-1], every[-1])
    heads = [
        (seq2seq(tiny_config), {"decoder_input_ids": labels.clamp(min=0)}),
        (model, {}),
        (VanillaTransformerForTokenClassification(tiny_config), {}),
        (VanillaTransformerForMaskedLM(tiny_config), {}),
    ]
    for head, extra in heads:
        with pytest.raises(
            TypeError, match=f"{type(head).__name__}.forward.. got an unexpected keyword argument 'label'"
        ):
            head(input_ids=ids, attention_mask=mask, label=labels, **extra)


def test_lm_head_shapes_loss_and_tying(tiny_config):
    model = seq2seq(tiny_config)
    ids, mask, labels = batch(tiny_config)
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    assert out.logits.shape == (B, T, tiny_config.vocab_size)
    manual = torch.nn.functional.cross_entropy(out.logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    torch.testing.assert_close(out.loss, manual)
    # one embedding matrix: encoder, decoder and output projection (section 3.4)
    shared = model.model.shared.weight
    assert model.lm_head.weight is shared
    assert model.model.encoder.embed_tokens.weight is shared and model.model.decoder.embed_tokens.weight is shared
    # labels are shifted right into decoder_input_ids
    explicit = model(
        input_ids=ids,
        attention_mask=mask,
        decoder_input_ids=shift_tokens_right(labels, 0, tiny_config.decoder_start_token_id),
    )
    torch.testing.assert_close(explicit.logits, out.logits)


def test_untied_embeddings_save_and_load(tmp_path):
    config = VanillaTransformerConfig.from_preset("tiny", tie_word_embeddings=False)
    model = seq2seq(config)
    assert model.lm_head.weight is not model.model.encoder.embed_tokens.weight
    model.save_pretrained(tmp_path)
    loaded = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path).eval()
    ids, mask, labels = batch(config)
    torch.testing.assert_close(
        loaded(input_ids=ids, attention_mask=mask, labels=labels).logits,
        model(input_ids=ids, attention_mask=mask, labels=labels).logits,
    )


@pytest.mark.parametrize("head", ["seq2seq", "base", "tagger"])
def test_checkpoint_without_the_embedding_reports_it_missing_and_initialises_it(tmp_path, tiny_config, head):
    """transformers drops tied weights of custom-code models from the missing keys; a checkpoint without the shared
    embedding then loaded silently with that embedding left on the meta device. It must be reported missing (as
    Marian's is), initialised, and stay tied."""
    from safetensors.torch import save_file

    cls = {
        "seq2seq": VanillaTransformerForConditionalGeneration,
        "base": VanillaTransformerModel,
        "tagger": VanillaTransformerForTokenClassification,
    }[head]
    model = cls(tiny_config)
    model.save_pretrained(tmp_path)
    kept = {
        k: v
        for k, v in model.state_dict().items()
        if not k.endswith(("shared.weight", "embed_tokens.weight", "lm_head.weight"))
    }
    save_file(kept, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    loaded, info = cls.from_pretrained(tmp_path, output_loading_info=True)
    prefix = "" if head == "base" else "model."
    assert f"{prefix}shared.weight" in info["missing_keys"]
    weight = loaded.get_input_embeddings().weight
    assert weight.device.type == "cpu" and torch.isfinite(weight).all()
    assert 0.5 < weight.std().item() * tiny_config.d_model**0.5 < 2  # the embedding's own initialisation
    assert all(
        p is weight
        for n, p in loaded.named_parameters(remove_duplicate=False)
        if n.endswith(("shared.weight", "embed_tokens.weight", "lm_head.weight"))
    )
    model.save_pretrained(tmp_path)  # a complete checkpoint: nothing missing
    assert cls.from_pretrained(tmp_path, output_loading_info=True)[1]["missing_keys"] == set()


def test_label_smoothing_loss(tiny_config):
    tiny_config.label_smoothing = 0.1
    model = seq2seq(tiny_config)
    ids, mask, labels = batch(tiny_config)
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    manual = torch.nn.functional.cross_entropy(
        out.logits.flatten(0, 1), labels.flatten(), ignore_index=-100, label_smoothing=0.1
    )
    torch.testing.assert_close(out.loss, manual)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_fused_cross_entropy_matches_torch(dtype, label_smoothing):
    """token_loss computes its gradient in the forward pass, in row chunks (several chunks here): value and gradient
    equal F.cross_entropy's on fp32-upcast logits, ignored rows get no gradient, and the logits are left untouched."""
    from vanilla_transformer.model.modeling_vanilla_transformer import token_loss

    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(3, 400, 300, generator=g) * 4).to(dtype)
    labels = torch.randint(0, 300, (3, 400), generator=g)
    labels[1, 7:] = -100
    ours, ref = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    loss = token_loss(ours, labels, label_smoothing=label_smoothing)
    expected = torch.nn.functional.cross_entropy(
        ref.flatten(0, 1).float(), labels.flatten(), ignore_index=-100, label_smoothing=label_smoothing
    )
    (loss * 3).backward(retain_graph=True)
    (expected * 3).backward()
    with pytest.raises(RuntimeError, match="ran twice"):
        loss.backward()
    torch.testing.assert_close(loss, expected, rtol=1e-6, atol=1e-6)
    ulp = torch.finfo(dtype).eps  # the gradient is rounded to the logits' dtype before, not after, the scaling
    torch.testing.assert_close(ours.grad.float(), ref.grad.float(), rtol=ulp, atol=1e-5)
    assert not ours.grad[1, 7:].any()
    assert torch.equal(ours.detach(), logits)


def test_token_classification_head(tiny_config):
    tiny_config.num_labels = 5
    torch.manual_seed(0)
    model = VanillaTransformerForTokenClassification(tiny_config).eval()
    assert not any("decoder" in name for name, _ in model.named_parameters())
    ids, mask, _ = batch(tiny_config)
    labels = torch.randint(0, 5, (B, S))
    labels[mask == 0] = -100
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    assert out.logits.shape == (B, S, 5)
    manual = torch.nn.functional.cross_entropy(out.logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    torch.testing.assert_close(out.loss, manual)
    with pytest.raises(ValueError, match="labels contain 7"):
        model(input_ids=ids, attention_mask=mask, labels=labels.masked_fill(labels == 1, 7))


def test_translation_checkpoint_encoder_loads_into_tagger(tiny_config, tmp_path, caplog):
    model = seq2seq(tiny_config)
    model.save_pretrained(tmp_path)
    tagger = VanillaTransformerForTokenClassification.from_pretrained(tmp_path, num_labels=3)
    s2s_state = model.state_dict()
    for name, tensor in tagger.state_dict().items():
        if name.startswith("model."):
            assert torch.equal(tensor, s2s_state[name]), name
    ids, mask, _ = batch(tiny_config)
    torch.testing.assert_close(
        tagger.eval().model(input_ids=ids, attention_mask=mask).last_hidden_state,
        model.model.encoder(ids, mask).last_hidden_state,
    )


# ------------------------------------------------------------------------------------------------------ save / load


@pytest.mark.parametrize("position_embedding_type", ["sinusoidal", "learned"])
@pytest.mark.parametrize("normalize_before", [False, True])
def test_save_load_equality(tmp_path, position_embedding_type, normalize_before):
    config = VanillaTransformerConfig.from_preset(
        "tiny", position_embedding_type=position_embedding_type, normalize_before=normalize_before
    )
    model = seq2seq(config)
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    assert {"configuration_vanilla_transformer.py", "modeling_vanilla_transformer.py"} <= set(os.listdir(tmp_path))
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is VanillaTransformerForConditionalGeneration
    ids, mask, labels = batch(config)
    torch.testing.assert_close(
        loaded(input_ids=ids, attention_mask=mask, labels=labels).logits,
        model(input_ids=ids, attention_mask=mask, labels=labels).logits,
        rtol=0,
        atol=0,
    )


def test_auto_classes(tiny_config, tmp_path):
    VanillaTransformerModel(tiny_config).save_pretrained(tmp_path / "base")
    assert type(AutoModel.from_pretrained(tmp_path / "base")) is VanillaTransformerModel
    tiny_config.num_labels = 4
    VanillaTransformerForTokenClassification(tiny_config).save_pretrained(tmp_path / "tok")
    loaded = AutoModelForTokenClassification.from_pretrained(tmp_path / "tok")
    assert type(loaded) is VanillaTransformerForTokenClassification
    VanillaTransformerForMaskedLM(tiny_config).save_pretrained(tmp_path / "mlm")
    assert type(AutoModelForMaskedLM.from_pretrained(tmp_path / "mlm")) is VanillaTransformerForMaskedLM


def test_config_renames_the_old_pipeline_entry(tiny_config, tmp_path):
    """A config saved with the remote-code pipeline under the registered task name loads with it as "translation"."""
    seq2seq(tiny_config).save_pretrained(tmp_path)
    path = tmp_path / "config.json"
    saved = json.loads(path.read_text())
    assert set(saved["custom_pipelines"]) == {"translation"}
    entry = saved["custom_pipelines"]["translation"]
    path.write_text(json.dumps({**saved, "custom_pipelines": {"vanilla-translation": entry}}))
    assert AutoConfig.from_pretrained(tmp_path).custom_pipelines == {"translation": entry}


def test_saved_configs_name_the_translation_pipeline_for_translation_models_only(tiny_config, tmp_path):
    """The config derives custom_pipelines from the architecture it is saved with; no model changes its config."""
    before = tiny_config.to_dict()
    translation = seq2seq(tiny_config)
    assert tiny_config.to_dict() == before  # building a model left the config as it was
    translation.save_pretrained(tmp_path / "translation")
    tagger = VanillaTransformerForTokenClassification.from_pretrained(tmp_path / "translation")
    tagger.save_pretrained(tmp_path / "tagger")
    VanillaTransformerForMaskedLM(tiny_config).save_pretrained(tmp_path / "mlm")
    saved = {
        name: json.loads((tmp_path / name / "config.json").read_text())["custom_pipelines"]
        for name in ("translation", "tagger", "mlm")
    }
    assert set(saved["translation"]) == {"translation"} and saved["tagger"] == saved["mlm"] == {}


REMOTE_CODE_CHILD = BLOCK_PACKAGE + textwrap.dedent("""
    import sys, json, torch
    try:
        import vanilla_transformer
        raise SystemExit("vanilla_transformer should not be importable here")
    except ImportError:
        pass
    from transformers import AutoModelForMaskedLM, AutoModelForSeq2SeqLM, AutoModelForTokenClassification
    path, head, inputs = sys.argv[1], sys.argv[2], torch.load(sys.argv[3])
    cls = {"seq2seq": AutoModelForSeq2SeqLM, "masked_lm": AutoModelForMaskedLM}.get(head,
                                                                                      AutoModelForTokenClassification)
    model = cls.from_pretrained(path, trust_remote_code=True).eval()
    assert "transformers_modules" in type(model).__module__, type(model).__module__
    with torch.no_grad():
        torch.save(model(**inputs).logits, sys.argv[4])
""")


@pytest.mark.parametrize("head", ["seq2seq", "token_classification", "token_classification_crf", "masked_lm"])
def test_remote_code_loading_without_the_package(tmp_path, tiny_config, head):
    ids, mask, labels = batch(tiny_config)
    if head == "seq2seq":
        model, inputs = (
            seq2seq(tiny_config),
            dict(input_ids=ids, attention_mask=mask, decoder_input_ids=labels.clamp(min=0)),
        )
    elif head == "masked_lm":
        tiny_config.relative_attention_max_distance, tiny_config.char_cnn_dim = 4, 8
        torch.manual_seed(0)
        model, inputs = VanillaTransformerForMaskedLM(tiny_config).eval(), dict(input_ids=ids, attention_mask=mask)
        randomize_deviations(model)
    else:
        tiny_config.num_labels, tiny_config.use_crf = 3, head.endswith("crf")
        if head.endswith("crf"):  # with the NER options
            tiny_config.relative_attention_max_distance, tiny_config.char_cnn_dim = 4, 8
            tiny_config.auxiliary_num_labels = [5, 2]
        torch.manual_seed(0)
        model, inputs = (
            VanillaTransformerForTokenClassification(tiny_config).eval(),
            dict(input_ids=ids, attention_mask=mask),
        )
        randomize_deviations(model)
    model.save_pretrained(tmp_path / "model")
    auto_map = json.loads((tmp_path / "model" / "config.json").read_text())["auto_map"]
    assert set(auto_map) == {
        "AutoConfig",
        "AutoModel",
        "AutoModelForSeq2SeqLM",
        "AutoModelForTokenClassification",
        "AutoModelForMaskedLM",
    }
    torch.save(inputs, tmp_path / "inputs.pt")
    script = tmp_path / "child.py"
    script.write_text(REMOTE_CODE_CHILD)
    # run from tmp_path so the repo root (and so our package) is not on sys.path
    env = subprocess_env()
    env["HF_MODULES_CACHE"] = str(tmp_path / "modules")
    proc = subprocess.run(
        [
            sys.executable,
            str(script),
            str(tmp_path / "model"),
            head[:14],
            str(tmp_path / "inputs.pt"),
            str(tmp_path / "out.pt"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with torch.no_grad():
        expected = model(**inputs).logits
    torch.testing.assert_close(torch.load(tmp_path / "out.pt"), expected, rtol=0, atol=0)


# ------------------------------------------------------------------------------------------------------ generation


def test_cached_and_uncached_greedy_generation_agree(tiny_config):
    model = seq2seq(tiny_config)
    ids, mask, _ = batch(tiny_config)
    kwargs = dict(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=12,
        min_new_tokens=12,
        do_sample=False,
        output_scores=True,
        return_dict_in_generate=True,
    )
    cached = model.generate(**kwargs, use_cache=True)
    uncached = model.generate(**kwargs, use_cache=False)
    assert torch.equal(cached.sequences, uncached.sequences)
    assert cached.sequences.shape == (B, 13)
    for a, b in zip(cached.scores, uncached.scores):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
    assert isinstance(cached.cache, EncoderDecoderCache)


PRESET_SHAPES = [
    ("tiny", {}),
    ("small", {}),
    ("base", {}),
    ("big", {}),
    (
        "small",
        dict(
            normalize_before=True,
            relative_attention_max_distance=4,
            position_embedding_type="learned",
            tie_word_embeddings=False,
        ),
    ),
]


@pytest.mark.parametrize("preset, overrides", PRESET_SHAPES, ids=["tiny", "small", "base", "big", "small-deviations"])
def test_cached_generation_equals_uncached_for_every_preset(preset, overrides):
    """What `generate` decodes step by step with the cache it passes back (under the installed transformers' name for
    it) equals decoding from the whole prefix at every step: greedy and beam search, sequences and scores, for a
    model of every preset's shape (with the deviations too), with dynamic and static caches. A cache dropped on the
    way fails here."""
    config = VanillaTransformerConfig.from_preset(preset, vocab_size=64, dropout=0.0, **overrides)
    model = seq2seq(config)
    randomize_deviations(model)
    ids, mask, _ = batch(config)
    for search in (dict(), dict(num_beams=3, num_return_sequences=2)):
        kwargs = dict(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=8,
            min_new_tokens=8,
            do_sample=False,
            output_scores=True,
            return_dict_in_generate=True,
            **search,
        )
        cached, uncached = model.generate(**kwargs, use_cache=True), model.generate(**kwargs, use_cache=False)
        assert torch.equal(cached.sequences, uncached.sequences), search
        torch.testing.assert_close(torch.stack(cached.scores), torch.stack(uncached.scores), rtol=0, atol=1e-4)
        assert isinstance(cached.cache, EncoderDecoderCache)
        assert cached.cache.get_seq_length() == cached.sequences.shape[1] - 1
        # a static cache (fixed-size slots, the unfilled ones masked by generate's 4-D mask: what compiled decoding
        # uses)
        static = model.generate(**kwargs, cache_implementation="static")
        assert type(static.cache.self_attention_cache).__name__ == "StaticCache"
        assert torch.equal(static.sequences, uncached.sequences), search
        torch.testing.assert_close(torch.stack(static.scores), torch.stack(uncached.scores), rtol=0, atol=1e-4)


@torch.no_grad()
def test_cache_is_taken_under_either_name_and_a_stray_one_is_refused(tiny_config):
    """`cache` (transformers >= 5.24) and `past_key_values` (the name older releases pass) are the same argument; a
    cache under any other name raises instead of being dropped (which would decode every step without its past)."""
    model = seq2seq(tiny_config)
    ids, mask, labels = batch(tiny_config)
    dec = shift_tokens_right(labels, 0, 1)
    first = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec[:, :4], use_cache=True)
    steps = []
    step = dict(
        encoder_outputs=(first.encoder_last_hidden_state,),
        attention_mask=mask,
        decoder_input_ids=dec[:, 4:5],
        use_cache=True,
    )
    steps.append(model(**step, cache=copy.deepcopy(first.cache)).logits)
    with pytest.warns(FutureWarning, match="`past_key_values` is deprecated.*Use `cache` instead"):
        steps.append(model(**step, past_key_values=copy.deepcopy(first.cache)).logits)
    torch.testing.assert_close(steps[0], steps[1], rtol=0, atol=0)
    full = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec[:, :5]).logits
    torch.testing.assert_close(steps[0][:, 0], full[:, 4], rtol=0, atol=1e-5)
    with pytest.raises(TypeError, match="`cache_params`.*reads its cache as `cache`"):
        model(
            encoder_outputs=(first.encoder_last_hidden_state,),
            attention_mask=mask,
            decoder_input_ids=dec[:, 4:5],
            use_cache=True,
            cache_params=first.cache,
        )
    with pytest.raises(TypeError, match="EncoderDecoderCache"):
        model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec[:, :4], cache=DynamicCache())


CACHE_VARIANTS = {
    "post-LN": {},
    "pre-LN": dict(normalize_before=True),
    "learned": dict(position_embedding_type="learned"),
    "relative": dict(relative_attention_max_distance=3),
    "untied": dict(tie_word_embeddings=False),
    "gelu": dict(activation_function="gelu"),
    "unscaled": dict(scale_attention=False),
}


@pytest.mark.parametrize("variant", CACHE_VARIANTS)
@pytest.mark.parametrize("attention", ["eager", "sdpa"])
@torch.no_grad()
def test_cached_decoder_equals_one_pass_under_any_mask(variant, attention):
    """transformers' create_and_check_decoder_model_past_large_inputs: the decoder over 7 tokens with a cache, then 3
    new tokens under a mask with zeros (fixed holes, then random 0/1 over all 10) equals one pass over the 10 tokens
    with the same mask, at every new position, the masked ones included."""
    config = VanillaTransformerConfig.from_preset("tiny", vocab_size=40, dropout=0.0, **CACHE_VARIANTS[variant])
    model = seq2seq(config)
    model.set_attn_implementation(attention)
    randomize_deviations(model)
    decoder = model.get_decoder()
    generator = torch.Generator().manual_seed(0)
    encoder_states = torch.randn(B, 5, config.d_model, generator=generator)
    ids = torch.randint(4, config.vocab_size, (B, 10), generator=generator)
    masks = [
        torch.cat([torch.ones(B, 7, dtype=torch.long), torch.tensor([[1, 0, 1]] * B)], dim=1),
        torch.cat([torch.ones(B, 7, dtype=torch.long), torch.tensor([[0, 1, 1]] * (B - 1) + [[1, 1, 0]])], 1),
        torch.randint(0, 2, (B, 10), generator=generator),
    ]
    for mask in masks:
        first = decoder(
            input_ids=ids[:, :7], attention_mask=mask[:, :7], encoder_hidden_states=encoder_states, use_cache=True
        )
        cached = decoder(
            input_ids=ids[:, 7:],
            attention_mask=mask,
            encoder_hidden_states=encoder_states,
            cache=first.cache,
            use_cache=True,
        ).last_hidden_state
        whole = decoder(input_ids=ids, attention_mask=mask, encoder_hidden_states=encoder_states).last_hidden_state
        torch.testing.assert_close(cached, whole[:, 7:], rtol=0, atol=1e-5, msg=f"{variant}, mask {mask.tolist()}")
        sees = running_segments(mask)[:, :7] != 0  # (a query before any unmasked token sees no key: uniform, unused)
        torch.testing.assert_close(first.last_hidden_state[sees], whole[:, :7][sees], rtol=0, atol=1e-5)


MASK_DTYPES = [torch.bool, torch.int32, torch.float32, torch.bfloat16]


def outputs_of_every_head(config, mask, decoder_mask):
    """Each head's first output under the masks given: seq2seq logits (one pass, then 3 steps with a cache), base model,
    tagger (with a CRF) and masked LM; weights drawn from one seed."""
    ids, _, labels = batch(config)
    decoder_ids = shift_tokens_right(labels, config.pad_token_id, config.decoder_start_token_id)
    model = seq2seq(config)
    kwargs = dict(
        input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids, decoder_attention_mask=decoder_mask
    )
    outputs = [model(**kwargs).logits]
    first = model(
        **{**kwargs, "decoder_input_ids": decoder_ids[:, :4], "decoder_attention_mask": decoder_mask[:, :4]},
        use_cache=True,
    )
    outputs.append(
        model(
            encoder_outputs=(first.encoder_last_hidden_state,),
            attention_mask=mask,
            decoder_input_ids=decoder_ids[:, 4:],
            decoder_attention_mask=decoder_mask,
            cache=first.cache,
            use_cache=True,
        ).logits
    )
    for cls in (VanillaTransformerModel, VanillaTransformerForTokenClassification, VanillaTransformerForMaskedLM):
        torch.manual_seed(0)
        encoder_only = cls is not VanillaTransformerModel
        head = cls(
            config.__class__(**{**config.to_dict(), "use_crf": cls is VanillaTransformerForTokenClassification})
        ).eval()
        out = head(input_ids=ids, attention_mask=mask) if encoder_only else head(**kwargs)
        outputs.append(out[0])
    return outputs


@pytest.mark.parametrize("dtype", MASK_DTYPES, ids=str)
@pytest.mark.parametrize("packed", [False, True], ids=["padding", "packed"])
@torch.no_grad()
def test_every_mask_dtype_gives_an_int64_masks_outputs(tiny_config, dtype, packed):
    """Masks as transformers' testers, collators and users make them (`input_ids.ne(pad_token_id)` is bool; floats of
    0/1) give the outputs of the same int64 mask in every head, with and without a cache; masks numbering packed
    sequences (1, 1, 2, 2, 0) in any integer or float dtype too. (A bool mask can only mark padding.)"""
    if packed and dtype == torch.bool:
        pytest.skip("a bool mask cannot number sequences")
    mask = torch.ones(B, S, dtype=torch.long)
    mask[-1, 4:] = 0
    decoder_mask = torch.ones(B, T, dtype=torch.long)
    decoder_mask[0, 5:] = 0
    if packed:
        mask[0, 5:], decoder_mask[1, 3:] = 2, 2
    expected = outputs_of_every_head(tiny_config, mask, decoder_mask)
    got = outputs_of_every_head(tiny_config, mask.to(dtype), decoder_mask.to(dtype))
    for name, e, g in zip(["seq2seq", "seq2seq cached", "base", "tagger", "mlm"], expected, got):
        torch.testing.assert_close(g, e, rtol=0, atol=1e-6, msg=f"{name} under a {dtype} mask")


@pytest.mark.parametrize("dtype, atol", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
def test_cache_step_matches_full_forward(tiny_config, dtype, atol):
    """One decode step with the cache gives the logits of the full forward at that position (positions offset; a
    single-query step takes its own attention path on CPU)."""
    model = seq2seq(tiny_config).to(dtype)
    ids, mask, labels = batch(tiny_config)
    dec = shift_tokens_right(labels, 0, 1)
    full = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
    out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec[:, :4], use_cache=True)
    step = model(
        encoder_outputs=(out.encoder_last_hidden_state,),
        attention_mask=mask,
        decoder_input_ids=dec[:, 4:5],
        cache=out.cache,
        use_cache=True,
    )
    torch.testing.assert_close(step.logits[:, 0], full[:, 4], rtol=0, atol=atol)


def test_weight_changes_show_in_generation(tiny_config):
    """No copy of the weights outlives a call (no concatenated q/k/v kept across decode steps or calls): any weight
    change (a fused AdamW step, which does not bump tensor versions; in-place loads; dtype casts) must show
    in the next forward and generate exactly as in a freshly built model."""
    ids, mask, _ = batch(tiny_config)
    model = seq2seq(tiny_config)
    kwargs = dict(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :4])
    generate = dict(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=6,
        min_new_tokens=6,
        do_sample=False,
        output_scores=True,
        return_dict_in_generate=True,
    )

    def assert_like_a_fresh_model():
        fresh = VanillaTransformerForConditionalGeneration(model.config).to(model.dtype).eval()
        fresh.load_state_dict(model.state_dict())
        with torch.inference_mode():
            torch.testing.assert_close(model(**kwargs).logits, fresh(**kwargs).logits, rtol=0, atol=0)
        ours, theirs = model.generate(**generate), fresh.generate(**generate)
        assert torch.equal(ours.sequences, theirs.sequences)
        torch.testing.assert_close(torch.stack(ours.scores), torch.stack(theirs.scores), rtol=0, atol=0)

    before = model.generate(**generate)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05, fused=True)
    model.train()(**kwargs, labels=ids[:, :4]).loss.backward()
    assert model.model.encoder.layers[0].self_attn.q_proj.weight.grad.abs().sum() > 0
    optimizer.step()
    model.eval()
    assert not torch.equal(model.generate(**generate).scores[0], before.scores[0])
    assert_like_a_fresh_model()
    with torch.no_grad():
        model.load_state_dict(VanillaTransformerForConditionalGeneration(tiny_config).state_dict())  # in place
        model.model.decoder.layers[0].self_attn.v_proj.bias.add_(1.0)
    assert_like_a_fresh_model()
    model.to(torch.float64)
    assert_like_a_fresh_model()


def test_beam_search_and_sampling(tiny_config):
    model = seq2seq(tiny_config)
    ids, mask, _ = batch(tiny_config)
    beams = model.generate(input_ids=ids, attention_mask=mask, num_beams=4, num_return_sequences=3, max_new_tokens=8)
    assert beams.shape[0] == B * 3
    torch.manual_seed(0)
    sampled = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, top_k=10, max_new_tokens=8)
    assert sampled.shape[0] == B and sampled[:, 0].eq(tiny_config.decoder_start_token_id).all()


def test_beam_search_reorders_only_the_self_attention_cache(tiny_config):
    """`generate`'s beam search runs over a BeamSearchCache (`beam_search_cache`), which skips the
    cross-attention keys/values (shared by a sentence's beams): same beams and scores as transformers' default
    EncoderDecoderCache, which reorders everything, and as beam search without a cache, on a padded batch of different
    sentences. Nothing to add where there is no beam search or the caller chose a cache."""
    from transformers import GenerationConfig
    from transformers.cache_utils import DynamicCache, EncoderDecoderCache

    from vanilla_transformer.model.modeling_vanilla_transformer import BeamSearchCache, beam_search_cache

    model = seq2seq(tiny_config)
    ids, mask, _ = batch(tiny_config)
    kwargs = dict(
        input_ids=ids,
        attention_mask=mask,
        num_beams=4,
        num_return_sequences=2,
        max_new_tokens=10,
        min_new_tokens=10,
        output_scores=True,
        return_dict_in_generate=True,
    )
    ours = model.generate(**kwargs)
    assert type(ours.cache) is BeamSearchCache
    decoder = model.config.get_text_config(decoder=True)
    default = model.generate(
        **kwargs, cache=EncoderDecoderCache(DynamicCache(config=decoder), DynamicCache(config=decoder))
    )
    assert type(default.cache) is EncoderDecoderCache
    uncached = model.generate(**kwargs, use_cache=False)
    for other in (default, uncached):
        assert torch.equal(ours.sequences, other.sequences)
        torch.testing.assert_close(ours.sequences_scores, other.sequences_scores, rtol=0, atol=1e-5)
    cache = EncoderDecoderCache(DynamicCache(config=model.config), DynamicCache(config=model.config))
    greedy = GenerationConfig(**{**model.generation_config.to_dict(), "num_beams": 1})
    for chosen in (dict(num_beams=1), dict(use_cache=False), dict(cache_implementation="static"), dict(cache=cache)):
        assert beam_search_cache(model, **{**kwargs, **chosen}) == {}
    without_beams = {k: v for k, v in kwargs.items() if k != "num_beams"}
    assert beam_search_cache(model, **without_beams, generation_config=greedy) == {}


def test_hooked_projections_take_effect(tiny_config):
    """Adapters (e.g. LoRA) hook or replace q_proj/k_proj/v_proj: a forward hook changes the output as the same change
    of the weights does."""
    model, reference = seq2seq(tiny_config), seq2seq(tiny_config)
    ids, mask, _ = batch(tiny_config)
    kwargs = dict(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :4])
    model.model.encoder.layers[0].self_attn.v_proj.register_forward_hook(lambda module, args, out: out + 1.0)
    with torch.no_grad():
        reference.model.encoder.layers[0].self_attn.v_proj.bias.add_(1.0)
        torch.testing.assert_close(model(**kwargs).logits, reference(**kwargs).logits)


# ------------------------------------------------------------------------------------------------------ invariances


def test_padding_invariance(tiny_config):
    """A sentence alone and inside a padded batch: same encoder states, logits and generated tokens."""
    model = seq2seq(tiny_config)
    ids, mask, labels = batch(tiny_config)
    alone_ids = ids[-1:, :4]
    dec = shift_tokens_right(labels, 0, 1)
    in_batch = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec)
    alone = model(input_ids=alone_ids, decoder_input_ids=dec[-1:])
    torch.testing.assert_close(
        in_batch.encoder_last_hidden_state[-1, :4], alone.encoder_last_hidden_state[0], rtol=0, atol=1e-5
    )
    torch.testing.assert_close(in_batch.logits[-1], alone.logits[0], rtol=0, atol=1e-5)
    gen_batch = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=10, min_new_tokens=10)
    gen_alone = model.generate(input_ids=alone_ids, max_new_tokens=10, min_new_tokens=10)
    assert torch.equal(gen_batch[-1], gen_alone[0])


@pytest.mark.parametrize("head", ["seq2seq", "token_classification"])
def test_eager_and_sdpa_agree(tiny_config, head):
    ids, mask, labels = batch(tiny_config)
    outs = []
    for impl in ("eager", "sdpa"):
        torch.manual_seed(0)
        if head == "seq2seq":
            model = VanillaTransformerForConditionalGeneration._from_config(
                tiny_config, attn_implementation=impl
            ).eval()
            outs.append(model(input_ids=ids, attention_mask=mask, labels=labels).logits)
        else:
            model = VanillaTransformerForTokenClassification._from_config(tiny_config, attn_implementation=impl).eval()
            outs.append(model(input_ids=ids, attention_mask=mask).logits)
        assert model.config._attn_implementation == impl
    torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=1e-5)


def test_attention_backend_switches_after_loading(tiny_config, monkeypatch):
    """`model.set_attn_implementation(...)` switches every layer's backend (transformers refused it for models
    without its AttentionInterface, with only a warning); an unsupported backend is a ValueError."""
    calls = []
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or sdpa(*a, **k))
    model = seq2seq(tiny_config)
    ids, mask, labels = batch(tiny_config)
    for impl, used_sdpa in (("eager", False), ("sdpa", True)):
        model.set_attn_implementation(impl)
        calls.clear()
        model(input_ids=ids, attention_mask=mask, labels=labels)
        assert model.model.decoder.layers[0].encoder_attn.config._attn_implementation == impl
        assert bool(calls) == used_sdpa, impl
    with pytest.raises(ValueError, match="Flash Attention"):
        model.set_attn_implementation("flash_attention_2")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_fully_padded_rows_stay_finite(tiny_config, dtype, impl):
    model = (
        VanillaTransformerForConditionalGeneration._from_config(tiny_config, attn_implementation=impl).eval().to(dtype)
    )
    ids, mask, labels = batch(tiny_config)
    mask[0] = 0  # a row with nothing to attend to
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    assert torch.isfinite(out.logits).all() and torch.isfinite(out.loss)


@torch.no_grad()
def test_a_callers_4d_decoder_mask_is_taken_as_given(tiny_config):
    """A 4-D decoder mask (batch, 1, queries, keys) is used as it is, boolean (True = seen) or additive, under every
    backend: a causal one gives the logits of no mask at all; a boolean mask is never added as 0/1 scores."""
    model = seq2seq(tiny_config)
    ids, mask, labels = batch(tiny_config)
    dec = shift_tokens_right(labels, 0, 1)
    rows, length = dec.shape
    causal = torch.ones(length, length, dtype=torch.bool).tril().expand(rows, 1, length, length)
    expected = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
    for impl in ("eager", "sdpa"):
        model.set_attn_implementation(impl)
        for given in (causal, torch.where(causal, 0.0, torch.finfo(torch.float32).min)):
            got = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec, decoder_attention_mask=given)
            torch.testing.assert_close(got.logits, expected, rtol=0, atol=1e-5, msg=f"{impl}, {given.dtype}")


def test_sinusoidal_positions_extend_beyond_max_positions(tiny_config):
    model = seq2seq(tiny_config)
    long_ids = torch.randint(4, tiny_config.vocab_size, (1, tiny_config.max_position_embeddings + 20))
    out = model(input_ids=long_ids, decoder_input_ids=long_ids)
    assert torch.isfinite(out.logits).all()
    learned = VanillaTransformerForConditionalGeneration(
        VanillaTransformerConfig.from_preset("tiny", position_embedding_type="learned")
    )
    with pytest.raises(ValueError, match="max_position_embeddings=128"):
        learned(input_ids=long_ids, decoder_input_ids=long_ids[:, :4])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_relative_position_bias(dtype):
    """A learned score per head and signed distance clipped to [-k, k], zero at initialisation (the paper's model),
    offset by the cache length in decoding, trained through both attention backends."""
    config = VanillaTransformerConfig.from_preset("tiny", relative_attention_max_distance=2, num_labels=3)
    torch.manual_seed(0)
    tagger = VanillaTransformerForTokenClassification(config).eval()
    bias = tagger.model.encoder.relative_bias
    assert torch.equal(bias.weight, torch.zeros(5, config.encoder_attention_heads))
    plain = VanillaTransformerForTokenClassification(VanillaTransformerConfig.from_preset("tiny", num_labels=3)).eval()
    plain.load_state_dict(tagger.state_dict(), strict=False)
    ids, mask, _ = batch(config)
    torch.testing.assert_close(
        tagger(input_ids=ids, attention_mask=mask).logits,
        plain(input_ids=ids, attention_mask=mask).logits,
        rtol=0,
        atol=1e-6,
    )
    with torch.no_grad():
        bias.weight.copy_(torch.arange(20.0).view(5, 4))
    table = bias(torch.zeros(1, 5, config.d_model), 5)  # (1, H, T, S)
    assert table.shape == (1, 4, 5, 5)
    assert table[0, 1, 0, 4] == bias.weight[4, 1] and table[0, 1, 4, 0] == bias.weight[0, 1]  # clipped at +-2
    assert table[0, 3, 2, 1] == bias.weight[1, 3] and table[0, 3, 2, 2] == bias.weight[2, 3]
    step = bias(torch.zeros(1, 1, config.d_model), 5, past_length=4)  # one decode step: the last query row
    torch.testing.assert_close(step, table[:, :, 4:5])
    assert not torch.allclose(
        tagger(input_ids=ids, attention_mask=mask).logits, plain(input_ids=ids, attention_mask=mask).logits
    )
    tagger.train()
    for impl in ("eager", "sdpa"):
        tagger.set_attn_implementation(impl)
        tagger.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            tagger(input_ids=ids, attention_mask=mask, labels=torch.randint(0, 3, ids.shape)).loss.backward()
        assert bias.weight.grad is not None and bias.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_unscaled_attention_equals_queries_scaled_up_by_sqrt_dk(impl):
    """scale_attention=False computes softmax(Q K^T) V: the paper's attention with q_proj multiplied by sqrt(d_k)."""
    ids, mask, labels = batch(VanillaTransformerConfig.from_preset("tiny"))
    scaled = seq2seq(VanillaTransformerConfig.from_preset("tiny", attn_implementation=impl))
    unscaled = seq2seq(VanillaTransformerConfig.from_preset("tiny", scale_attention=False, attn_implementation=impl))
    with torch.no_grad():
        for module in scaled.modules():
            if hasattr(module, "q_proj"):
                module.q_proj.weight.mul_(module.head_dim**0.5)
                module.q_proj.bias.mul_(module.head_dim**0.5)
    torch.testing.assert_close(
        unscaled(input_ids=ids, attention_mask=mask, labels=labels).logits,
        scaled(input_ids=ids, attention_mask=mask, labels=labels).logits,
        rtol=0,
        atol=1e-5,
    )


def test_character_features_give_each_word_its_spelling(tmp_path):
    """char_cnn_dim > 0: every sub-token of a word gets the same features, computed from the word's characters only;
    the spelling table comes from the tokenizer, is saved with the weights, and a missing table is an error."""
    from vanilla_transformer.tokenization import train_tokenizer

    tokenizer = train_tokenizer(["the cat sat on the mat", "Paris and London"] * 5, vocab_size=40)
    config = VanillaTransformerConfig.from_preset("tiny", vocab_size=len(tokenizer), num_labels=3, char_cnn_dim=8)
    torch.manual_seed(0)
    tagger = VanillaTransformerForTokenClassification(config).eval()
    enc = tokenizer(["Parisian cats sat", "Londoner cats sat"], return_tensors="pt", return_token_type_ids=False)
    with pytest.raises(ValueError, match="set_token_characters"):
        tagger(**enc)
    tagger.set_token_characters(tokenizer)
    table = tagger.model.encoder.char_features.token_chars
    first = tokenizer.convert_ids_to_tokens(enc.input_ids[0].tolist())
    assert first[0].startswith("\u2581Pa") and not first[1].startswith("\u2581")  # "Parisian": several sub-tokens
    assert table[enc.input_ids[0, 0], : len(first[0])].tolist() == [1] + [ord(c) for c in first[0][1:]]
    assert table[tokenizer.eos_token_id, 0] == 1  # a special token is a word of its own
    features = tagger.model.encoder.char_features(enc.input_ids)  # (B, T, D)
    starts = [i for i, t in enumerate(first) if t.startswith("\u2581")] + [len(first) - 1]
    for a, b in zip(starts, starts[1:]):  # all sub-tokens of one word: the same vector
        assert torch.equal(features[0, a:b], features[0, a : a + 1].expand(b - a, -1))
    assert not torch.allclose(features[0, 0], features[1, 0])  # Parisian vs Londoner
    tail = len(first) - starts[1]
    torch.testing.assert_close(features[0, -tail:], features[1, -tail:])  # " cats sat </s>": same words, same features
    with pytest.raises(ValueError, match="inputs_embeds"):
        tagger(inputs_embeds=torch.zeros(1, 3, config.d_model))
    tagger.save_pretrained(tmp_path)
    loaded = VanillaTransformerForTokenClassification.from_pretrained(tmp_path).eval()
    assert torch.equal(loaded.model.encoder.char_features.token_chars, table)
    torch.testing.assert_close(loaded(**enc).logits, tagger(**enc).logits, rtol=0, atol=1e-6)
    tagger.train()
    tagger(**enc, labels=torch.zeros_like(enc.input_ids)).loss.backward()
    assert tagger.model.encoder.char_features.conv.weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="no character features"):
        seq2seq(VanillaTransformerConfig.from_preset("tiny")).set_token_characters(tokenizer)
    # a checkpoint without the table (e.g. a translation encoder): an empty table and the same clear error, never
    # whatever the allocator left in the buffer
    state = {k: v for k, v in tagger.state_dict().items() if not k.endswith(("token_chars", "embed_tokens.weight"))}
    from safetensors.torch import save_file

    save_file(state, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    loaded, info = VanillaTransformerForTokenClassification.from_pretrained(tmp_path, output_loading_info=True)
    assert info["missing_keys"] == {"model.encoder.char_features.token_chars"}
    assert not loaded.model.encoder.char_features.token_chars.any()
    with pytest.raises(ValueError, match="set_token_characters"):
        loaded(**enc)


def test_token_dropout_zeroes_whole_token_vectors_in_training_only():
    config = VanillaTransformerConfig.from_preset("tiny", dropout=0.0, token_dropout=0.5)
    embed = seq2seq(config).model.encoder.embed
    ids = torch.randint(4, config.vocab_size, (8, 64))
    positions = embed.embed_positions(torch.arange(64)[None])
    full = embed(ids)  # eval: no token dropped
    assert not torch.isclose(full, positions).all(-1).any()
    torch.manual_seed(0)
    dropped = embed.train()(ids)
    is_position_only = torch.isclose(dropped, positions).all(-1)  # (B, T)
    is_full = torch.isclose(dropped, full).all(-1)
    assert (is_position_only ^ is_full).all()  # each token keeps its whole vector or loses all of it
    assert 0.4 < is_position_only.float().mean() < 0.6


@pytest.mark.parametrize("p", [0.1, 0.2, 0.3])
def test_dropout_zeroes_p_of_the_elements_and_keeps_the_expectation(p):
    x = torch.rand(1001, 997) + 0.5  # an odd element count: the last int64 of random bits is only partly used
    torch.manual_seed(0)
    out = apply_dropout(x, p, training=True)
    kept = out != 0
    scale = 65536 / (65536 - round(p * 65536))
    torch.testing.assert_close(out[kept], x[kept] * scale)
    lanes = kept.flatten()[: kept.numel() // 4 * 4].view(-1, 4).float().mean(0)  # each 16-bit lane of the 64-bit draws
    assert (lanes - (1 - p)).abs().max() < 0.003, lanes
    assert abs(out.sum() / x.sum() - 1) < 0.003
    torch.manual_seed(0)
    assert torch.equal(apply_dropout(x, p, training=True), out)  # the seed decides the mask
    assert not torch.equal(apply_dropout(x, p, training=True), out)


def test_dropout_gradient_dtype_and_identity_outside_training():
    x = torch.randn(3, 5, 7, dtype=torch.bfloat16, requires_grad=True)
    out = apply_dropout(x, 0.5, training=True)
    assert out.dtype == torch.bfloat16 and out.shape == x.shape
    out.float().sum().backward()
    assert torch.equal(x.grad, (out != 0).to(torch.bfloat16) * 2)
    assert apply_dropout(x, 0.5, training=False) is x and apply_dropout(x, 0.0, training=True) is x


def test_dropout_compiles_without_a_graph_break():
    compiled = torch.compile(lambda x: apply_dropout(x, 0.5, training=True), fullgraph=True, backend="eager")
    out = compiled(torch.ones(64, 64))
    assert set(out.unique().tolist()) == {0.0, 2.0} and 0.4 < (out == 0).float().mean() < 0.6


def test_compiled_dropout_backward_uses_the_forward_mask():
    """Inductor recomputes cheap values in the backward pass instead of saving them; a dropout mask drawn again there
    would give gradients for another mask. The mask operator is saved, never redrawn."""
    x = torch.randn(256, 256, requires_grad=True)
    torch.compiler.reset()
    out = torch.compile(lambda x: apply_dropout(torch.sin(x), 0.5, training=True) * 3, fullgraph=True)(x)
    out.sum().backward()
    assert 0.4 < (out == 0).float().mean() < 0.6
    torch.testing.assert_close(x.grad, (out != 0) * torch.cos(x.detach()) * 6)


def test_compiled_cpu_training_step_runs_the_cpu_kernels(tiny_config):
    """Compiled on a CPU, a training step calls the dropout masks and the fused cross-entropy as custom operators: with
    one seed it draws eager's masks and gives eager's loss and gradients (torch's dropout, which the compiler would
    otherwise put in, draws other masks). Backend "aot_eager": the autograd graphs the compiler builds, no codegen."""
    tiny_config.update(dict(dropout=0.1, activation_dropout=0.1, attention_dropout=0.0, label_smoothing=0.1))
    model = VanillaTransformerForConditionalGeneration(tiny_config).train()
    ids, mask, labels = batch(tiny_config)
    torch.compiler.reset()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    steps = {}
    for name, forward in (("eager", model), ("compiled", compiled)):
        model.zero_grad(set_to_none=True)
        torch.manual_seed(5)
        loss = forward(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        steps[name] = [loss.detach()] + [p.grad for p in model.parameters()]
    for compiled_value, eager_value in zip(steps["compiled"], steps["eager"]):
        torch.testing.assert_close(compiled_value, eager_value)
    torch.manual_seed(6)
    other_seed = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    assert not torch.equal(other_seed, steps["eager"][0])  # the masks decide the loss: the comparison can fail


def test_compiled_forward_equals_eager(tiny_config):
    """Compiled, the model computes eager's logits (the sinusoidal positions are computed in the graph: nothing is
    stored on a module, which would hand CUDA graphs' reused memory to the next step)."""
    tiny_config.dropout = 0.0
    model = VanillaTransformerForConditionalGeneration(tiny_config).eval()
    ids, mask, labels = batch(tiny_config)
    compiled = torch.compile(model, backend="eager")
    with torch.no_grad():
        out = compiled(input_ids=ids, attention_mask=mask, labels=labels).logits
        torch.testing.assert_close(out, model(input_ids=ids, attention_mask=mask, labels=labels).logits)


@pytest.mark.parametrize("head", ["seq2seq", "tagger_crf", "mlm"])
def test_training_step_compiles_without_graph_breaks(head):
    """`_can_compile_fullgraph`: a training step (forward and backward, dropout on) traces as one graph for every head
    (backend "eager": dynamo's tracing alone, no code generation)."""
    kwargs = dict(num_labels=5, use_crf=True) if head == "tagger_crf" else {}
    config = VanillaTransformerConfig.from_preset("tiny", dropout=0.1, **kwargs)
    cls = {
        "seq2seq": VanillaTransformerForConditionalGeneration,
        "tagger_crf": VanillaTransformerForTokenClassification,
        "mlm": VanillaTransformerForMaskedLM,
    }[head]
    model = cls(config).train()
    assert model._can_compile_fullgraph
    ids, mask, labels = batch(config)
    if head == "tagger_crf":
        labels = torch.randint(0, 5, ids.shape).masked_fill(mask == 0, -100)
    elif head == "mlm":
        labels = ids.masked_fill(mask == 0, -100)
    loss = torch.compile(model, fullgraph=True, backend="eager")(input_ids=ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    assert torch.isfinite(loss) and all(p.grad is not None for p in model.parameters())


def test_cached_decoding_step_compiles_without_graph_breaks(tiny_config):
    """Greedy decoding with the cache, each step through `torch.compile(fullgraph=True)`, gives `generate`'s tokens."""
    tiny_config.dropout = 0.0
    model = VanillaTransformerForConditionalGeneration(tiny_config).eval()
    ids, mask, _ = batch(tiny_config)
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    with torch.no_grad():
        expected = model.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=4, min_new_tokens=4, num_beams=1, do_sample=False
        )
        encoder_outputs = model.get_encoder()(input_ids=ids, attention_mask=mask)
        cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
        tokens = torch.full((ids.shape[0], 1), tiny_config.decoder_start_token_id)
        for _ in range(4):
            out = compiled(
                encoder_outputs=encoder_outputs,
                attention_mask=mask,
                decoder_input_ids=tokens[:, -1:],
                cache=cache,
                use_cache=True,
            )
            tokens = torch.cat([tokens, out.logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(tokens, expected[:, : tokens.shape[1]])


# ------------------------------------------------------------------------------------------------------ training


def test_gradient_checkpointing_same_gradients(tiny_config):
    """The recomputed forward passes draw the same dropout masks as the first."""
    tiny_config.dropout, tiny_config.attention_dropout, tiny_config.activation_dropout = 0.3, 0.1, 0.1
    ids, mask, labels = batch(tiny_config)
    grads = []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        model = seq2seq(tiny_config).train()
        if checkpointing:
            # newer transformers call it activation_checkpointing_enable, 5.20 gradient_checkpointing_enable
            (getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable)()
            assert model.model.encoder.layers[0].gradient_checkpointing
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[0][name], grads[1][name], rtol=1e-5, atol=1e-6)


def test_num_items_in_batch_makes_accumulation_equal_one_big_batch(tiny_config):
    """4 micro-batches of unequal token counts, each loss = token sum / num_items_in_batch, sum to the big batch's
    mean loss and gradients; a per-micro-batch mean would not."""
    torch.manual_seed(1)
    ids = torch.randint(4, tiny_config.vocab_size, (8, S))
    labels = torch.randint(4, tiny_config.vocab_size, (8, T))
    for i in range(8):
        labels[i, 1 + i % 6 :] = -100  # unequal numbers of target tokens per row
    num_items = int((labels != -100).sum())

    model = seq2seq(tiny_config)
    model(input_ids=ids, labels=labels).loss.backward()
    big = {n: p.grad.clone() for n, p in model.named_parameters()}

    model.zero_grad()
    for chunk in range(4):
        sl = slice(2 * chunk, 2 * chunk + 2)
        model(input_ids=ids[sl], labels=labels[sl], num_items_in_batch=torch.tensor(num_items)).loss.backward()
    for name, grad in big.items():
        torch.testing.assert_close(model.get_parameter(name).grad, grad, rtol=1e-4, atol=1e-6)

    model.zero_grad()
    for chunk in range(4):
        sl = slice(2 * chunk, 2 * chunk + 2)
        (model(input_ids=ids[sl], labels=labels[sl]).loss / 4).backward()
    assert not torch.allclose(model.lm_head.weight.grad, big["model.shared.weight"], rtol=1e-3, atol=1e-6)


def test_initialisation_scale():
    config = VanillaTransformerConfig.from_preset("small", vocab_size=1000)
    model = VanillaTransformerForConditionalGeneration(config)
    emb = model.model.shared.weight
    assert abs(emb[1:].std().item() - config.d_model**-0.5) < 0.01  # N(0, d_model^-0.5), never N(0, 1)
    assert torch.all(emb[config.pad_token_id] == 0)
    fc1 = model.model.encoder.layers[0].ffn.fc1.weight  # Xavier-uniform: bound sqrt(6 / (fan_in + fan_out))
    bound = (6 / (fc1.shape[0] + fc1.shape[1])) ** 0.5
    assert fc1.abs().max() <= bound and fc1.abs().max() > 0.9 * bound


def test_seq2seq_learns_to_reverse():
    """The tiny model learns to reverse short sequences to 100% exact match (greedy, cached generation)."""
    torch.manual_seed(0)
    config = VanillaTransformerConfig.from_preset(
        "tiny", vocab_size=14, d_model=64, encoder_ffn_dim=128, decoder_ffn_dim=128, dropout=0.0
    )
    model = VanillaTransformerForConditionalGeneration(config)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    # warm-up then linear decay (section 5.3 warms up too): without it, post-LN loss spikes late in training make the
    # result depend on rounding (thread count, kernel order)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / 50) * (1 - step / 400))
    g = torch.Generator().manual_seed(0)

    def sample(n):
        src = torch.randint(4, 14, (n, 6), generator=g)
        tgt = torch.cat([src.flip(1), torch.full((n, 1), config.eos_token_id)], dim=1)
        return src, tgt

    model.train()
    for _ in range(400):
        src, tgt = sample(64)
        loss = model(input_ids=src, labels=tgt).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        schedule.step()
    model.eval()
    src, tgt = sample(200)
    out = model.generate(input_ids=src, max_new_tokens=7, do_sample=False)
    assert torch.equal(out[:, 1:8], tgt), f"exact match {(out[:, 1:8] == tgt).all(1).float().mean():.2f}"


def test_tagger_learns_a_rule():
    """Tag = 1 where the token is larger than its left neighbour (needs attention), else 0."""
    torch.manual_seed(0)
    config = VanillaTransformerConfig.from_preset("tiny", vocab_size=20, d_model=64, num_labels=2, dropout=0.0)
    model = VanillaTransformerForTokenClassification(config)
    g = torch.Generator().manual_seed(0)

    def sample(n):
        ids = torch.randint(4, 20, (n, 10), generator=g)
        tags = torch.zeros_like(ids)
        tags[:, 1:] = (ids[:, 1:] > ids[:, :-1]).long()
        return ids, tags

    accuracy = tagging_accuracy_after_training(model, sample, steps=300)
    assert accuracy > 0.98, accuracy


def test_relu_in_place_leaves_hooked_outputs_alone(tiny_config):
    """Without autograd the feed-forward ReLU runs in place on fc1's output, except when a hook on fc1 may have kept
    that output."""
    model = seq2seq(tiny_config)
    ids, mask, labels = batch(tiny_config)
    seen = []
    hook = model.model.encoder.layers[0].ffn.fc1.register_forward_hook(lambda module, args, out: seen.append(out))
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask, labels=labels).logits
    assert (seen[0] < 0).any()  # the hook's tensor was not overwritten by the ReLU
    hook.remove()
    with torch.no_grad():  # in place now: the same logits
        torch.testing.assert_close(model(input_ids=ids, attention_mask=mask, labels=labels).logits, expected)


def test_translation_pipeline_equals_generate(small_demo_model):
    """The `vanilla-translation` pipeline: generate's text, one dict per input, generate's arguments passed on (a
    `max_new_tokens` replaces the saved `max_length` without transformers' "both set" warning)."""
    from transformers import AutoTokenizer, pipeline
    from transformers.testing_utils import CaptureLogger
    from transformers.utils import logging

    from vanilla_transformer import TRANSLATION_TASK
    from vanilla_transformer.data import DEMO_SOURCE_LANG, make_demo_translation

    sources = [row[DEMO_SOURCE_LANG] for row in make_demo_translation(4, seed=7, max_length=10)["translation"]]
    tokenizer = AutoTokenizer.from_pretrained(small_demo_model)
    model = AutoModelForSeq2SeqLM.from_pretrained(small_demo_model).eval()
    assert model.generation_config.max_length is not None
    enc = tokenizer(sources, return_tensors="pt", padding=True, return_token_type_ids=False)
    with torch.no_grad():
        ids = model.generate(**enc, num_beams=2, max_new_tokens=12, max_length=None, do_sample=False)
    expected = tokenizer.batch_decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    translator = pipeline(TRANSLATION_TASK, model=model, tokenizer=tokenizer)
    with CaptureLogger(logging.get_logger("transformers.generation.utils")) as log:
        one = translator(sources[0], num_beams=2, max_new_tokens=12)
        many = translator(sources, num_beams=2, max_new_tokens=12)
    assert one == [{"translation_text": expected[0]}]
    assert many == [{"translation_text": text} for text in expected]
    assert "seem to have been set" not in log.out
    with pytest.raises(TypeError, match="takes strings, got int"):
        translator(3)
    # From a saved directory the registered task is used (the config's custom pipeline is for remote code only)
    from_dir = pipeline(TRANSLATION_TASK, model=small_demo_model)
    assert type(from_dir) is type(translator)
    assert from_dir(sources, num_beams=2, max_new_tokens=12) == many


def test_an_encoder_only_checkpoint_is_refused_as_a_translation_model(tiny_config, tmp_path):
    """A tagger's (or masked LM's) saved model has no decoder: loading it as a translation model is an error naming
    the class to load it with, not a translation model decoding with random weights."""
    tagger = VanillaTransformerForTokenClassification(tiny_config)
    tagger.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="VanillaTransformerForTokenClassification, which has no decoder"):
        AutoModelForSeq2SeqLM.from_pretrained(tmp_path)
    assert VanillaTransformerForTokenClassification.from_pretrained(tmp_path).num_labels == tiny_config.num_labels
