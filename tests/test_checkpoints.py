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
# output projection only) keep their token embedding in the encoder, as untied translation models do; before, they
# kept it as `model.shared`. transformers' `key_mapping` loads such a checkpoint (CHANGELOG.md).
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
    for key in expected:  # (another CPU may round the last bits of a matrix product differently)
        torch.testing.assert_close(got[key], expected[key], rtol=1e-5, atol=1e-5, msg=f"{name}: {key}")


@pytest.mark.parametrize("name", CASES)
def test_the_same_seed_builds_the_same_weights(name):
    saved = load_file(make_checkpoints.ROOT / name / "model.safetensors")
    for old, new in KEY_MAPPING.get(name, {}).items():
        saved = {re.sub(old, new, key): value for key, value in saved.items()}
    state = make_checkpoints.build(name).state_dict()
    assert set(saved) <= set(state)
    for key, value in saved.items():
        torch.testing.assert_close(state[key], value, rtol=0, atol=1e-7, msg=f"{name}: {key}")
    if json.loads((make_checkpoints.ROOT / name / "config.json").read_text())["tie_word_embeddings"]:
        shared = state["model.shared.weight"]
        for key in [k for k in state if k.endswith("embed_tokens.weight") or k == "lm_head.weight"]:
            assert torch.equal(state[key], shared), key  # tied (section 3.4)
