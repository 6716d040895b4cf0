"""Checkpoints saved by an earlier version of the model code (tests/fixtures/checkpoints, written by
tests/fixtures/make_checkpoints.py) load unchanged and give the outputs they gave when saved; the same seed builds the
same weights. Refactors of the model file must keep both."""

import importlib.util
import json
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

FIXTURES = Path(__file__).parent / "fixtures"
spec = importlib.util.spec_from_file_location("make_checkpoints", FIXTURES / "make_checkpoints.py")
make_checkpoints = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_checkpoints)
CASES = sorted(make_checkpoints.CASES)
# Encoder-only models with untied embeddings (tie_word_embeddings=False, meaningful for the masked language model's
# output projection only) keep their token embedding in the encoder, as untied translation models do; a checkpoint
# holding it as `model.shared` loads with transformers' `key_mapping`, as below.
KEY_MAPPING = {"tagger-untied": {r"^model\.shared\.": "model.encoder.embed.embed_tokens."}}


@pytest.mark.parametrize("name", CASES)
def test_a_saved_checkpoint_loads_with_its_outputs(name):
    cls, _ = make_checkpoints.CASES[name]
    path = make_checkpoints.ROOT / name
    model, info = cls.from_pretrained(path, output_loading_info=True, key_mapping=KEY_MAPPING.get(name))
    assert not any(info.values()), info  # nothing missing, unexpected or mismatched
    expected = load_file(path / "outputs.safetensors")
    got = make_checkpoints.outputs(model.eval())
    assert set(got) == set(expected)
    real = make_checkpoints.inputs()["attention_mask"].bool()
    for key in expected:  # (another CPU may round the last bits of a matrix product differently)
        if expected[key].shape[:2] == real.shape:  # per source token: a padded position's output is not defined
            got[key], expected[key] = got[key][real], expected[key][real]
        torch.testing.assert_close(got[key], expected[key], rtol=1e-5, atol=1e-5, msg=f"{name}: {key}")


@pytest.mark.parametrize("name", CASES)
def test_a_checkpoint_saved_today_has_the_same_names(name, tmp_path):
    """Files keep the parameter names of earlier versions (the model file registers the renaming of its layer norms
    with transformers, which applies it on loading and reverses it on saving), so each version loads the other's; a
    plain `load_state_dict` of a file renames them as well."""
    model = make_checkpoints.build(name)
    model.save_pretrained(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    saved = set(weights)
    old = set(load_file(make_checkpoints.ROOT / name / "model.safetensors"))
    for pattern, new in KEY_MAPPING.get(name, {}).items():
        old = {re.sub(pattern, new, key) for key in old}
    assert saved == old
    assert any("_sublayer.layer_norm." in key for key in saved)
    assert not any("layer_norm" in key and "_sublayer" not in key for key in saved if ".layers." in key)
    # a plain load_state_dict of the file (as Trainer resumes a run) renames them too
    fresh = type(model)(model.config)
    result = fresh.load_state_dict(weights, strict=False)
    assert not result.unexpected_keys
    assert all(key.endswith("embed_tokens.weight") or key == "lm_head.weight" for key in result.missing_keys)
    for key, value in model.state_dict().items():
        torch.testing.assert_close(fresh.state_dict()[key], value, rtol=0, atol=0, msg=key)


@pytest.mark.parametrize("name", CASES)
def test_the_same_seed_builds_the_same_weights(name):
    saved = load_file(make_checkpoints.ROOT / name / "model.safetensors")
    for old, new in KEY_MAPPING.get(name, {}).items():
        saved = {re.sub(old, new, key): value for key, value in saved.items()}
    model = make_checkpoints.build(name)
    state = {
        re.sub(r"\.(self_attn|encoder_attn|ffn)_layer_norm\.", r".\1_sublayer.layer_norm.", key): value
        for key, value in model.state_dict().items()
    }  # (the names files keep, as above)
    assert set(saved) <= set(state)
    for key, value in saved.items():
        torch.testing.assert_close(state[key], value, rtol=0, atol=1e-7, msg=f"{name}: {key}")
    if json.loads((make_checkpoints.ROOT / name / "config.json").read_text())["tie_word_embeddings"]:
        shared = state["model.shared.weight"]
        for key in [k for k in state if k.endswith("embed_tokens.weight") or k == "lm_head.weight"]:
            assert torch.equal(state[key], shared), key  # tied (section 3.4)
