"""Translation ensembles (`translation_ensemble.py`, `translate --ensemble_with`, `train-translation --ensemble_with`):
the ensemble's scores are the mean of its members' log-probabilities, computed by hand here; greedy search follows
them step by step; cached and uncached beam search agree; a model with itself is the model."""

import json

import pytest
import torch

from conftest import batch, seq2seq
from vanilla_transformer.cli import main as cli
from vanilla_transformer.commands import train_translation
from vanilla_transformer.translation_ensemble import TranslationEnsemble, TranslationEnsembleCache


@pytest.fixture
def members(tiny_config):
    return seq2seq(tiny_config, seed=0), seq2seq(tiny_config, seed=1)


def averaged_log_probs(models, ids, mask, decoder_ids):
    """The hand computation: each model's log-softmax over the vocabulary, averaged, for the last decoder position."""
    with torch.no_grad():
        logits = [
            m(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids, use_cache=False).logits for m in models
        ]
    return torch.stack([x[:, -1].float().log_softmax(-1) for x in logits]).mean(0)


def test_the_ensembles_scores_are_its_members_averaged_log_probabilities(tiny_config, members):
    ids, mask, labels = batch(tiny_config)
    ensemble = TranslationEnsemble(members)
    decoder_ids = members[0].prepare_decoder_input_ids_from_labels(labels)
    with torch.no_grad():
        out = ensemble(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids, use_cache=False)
    for t in range(decoder_ids.shape[1]):
        torch.testing.assert_close(out.logits[:, t], averaged_log_probs(members, ids, mask, decoder_ids[:, : t + 1]))
    loss = ensemble(input_ids=ids, attention_mask=mask, labels=labels).loss
    expected = torch.nn.functional.cross_entropy(out.logits.flatten(0, 1), labels.flatten())
    torch.testing.assert_close(loss, expected)


def test_greedy_search_follows_the_averaged_distribution_step_by_step(tiny_config, members):
    ids, mask, _ = batch(tiny_config)
    ensemble = TranslationEnsemble(members)
    steps = 8
    with torch.no_grad():
        generated = ensemble.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=steps, min_new_tokens=steps, num_beams=1, do_sample=False
        )
    decoder_ids = torch.full((ids.shape[0], 1), tiny_config.decoder_start_token_id)
    for _ in range(steps):
        scores = averaged_log_probs(members, ids, mask, decoder_ids)
        scores[:, tiny_config.eos_token_id] = -float("inf")  # (min_new_tokens)
        decoder_ids = torch.cat([decoder_ids, scores.argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(generated, decoder_ids)
    single = [
        m.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=steps, min_new_tokens=steps, num_beams=1, do_sample=False
        )
        for m in members
    ]
    assert not all(torch.equal(generated, s) for s in single)  # the average is neither member's choice alone


def test_cached_beam_search_equals_uncached_and_a_model_with_itself_is_the_model(tiny_config, members):
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
        length_penalty=0.6,
    )
    ensemble = TranslationEnsemble(members)
    with torch.no_grad():
        cached = ensemble.generate(**kwargs)
        uncached = ensemble.generate(**kwargs, use_cache=False)
        assert type(cached.cache) is TranslationEnsembleCache and len(cached.cache.members) == 2
        assert torch.equal(cached.sequences, uncached.sequences)
        torch.testing.assert_close(cached.sequences_scores, uncached.sequences_scores, rtol=0, atol=1e-5)
        alone = members[0].generate(**kwargs)
        doubled = TranslationEnsemble([members[0], members[0]]).generate(**kwargs)
    assert torch.equal(doubled.sequences, alone.sequences)
    torch.testing.assert_close(doubled.sequences_scores, alone.sequences_scores, rtol=0, atol=1e-5)


def test_members_must_share_the_tokenizer(tiny_config, members):
    other = seq2seq(tiny_config.__class__.from_preset("tiny", vocab_size=tiny_config.vocab_size + 8))
    with pytest.raises(ValueError, match="vocab_size=.*members must share the tokenizer"):
        TranslationEnsemble([members[0], other])
    with pytest.raises(TypeError, match="not a VanillaTransformerForConditionalGeneration"):
        TranslationEnsemble([members[0], torch.nn.Linear(2, 2)])
    with pytest.raises(ValueError, match="at least one"):
        TranslationEnsemble([])


def test_translate_and_evaluate_with_an_ensemble(small_demo_model, tmp_path, capsys):
    """`translate --ensemble_with` (the demo model with itself: its own translations) and refused on CTranslate2 with
    one error line; `train-translation --ensemble_with --do_eval` scores the ensemble as it scores the model alone."""
    (tmp_path / "in.txt").write_text("abc12\n\nzz9\n", encoding="utf-8")
    common = ["translate", str(small_demo_model), "--input", str(tmp_path / "in.txt"), "--engine", "pytorch", "--quiet"]
    assert cli([*common, "--output", str(tmp_path / "one.txt")]) == 0
    assert cli([*common, "--output", str(tmp_path / "two.txt"), "--ensemble_with", str(small_demo_model)]) == 0
    assert (tmp_path / "two.txt").read_text() == (tmp_path / "one.txt").read_text()
    assert (tmp_path / "one.txt").read_text().splitlines()[1] == ""
    assert cli([*common[:-3], "--engine", "ctranslate2", "--ensemble_with", str(small_demo_model)]) == 2
    assert "an ensemble decodes with the PyTorch engine" in capsys.readouterr().err

    scores = {}
    for name, extra in (("alone", []), ("ensemble", ["--ensemble_with", str(small_demo_model)])):
        train_translation.main(
            [
                "--model_name_or_path",
                str(small_demo_model),
                "--do_eval",
                "--output_dir",
                str(tmp_path / name),
                "--demo_eval_examples",
                "40",
                "--predict_with_generate",
                "true",
                "--per_device_eval_batch_size",
                "20",
                "--disable_tqdm",
                "true",
                *extra,
            ]
        )
        scores[name] = json.loads((tmp_path / name / "eval_results.json").read_text())
    assert scores["ensemble"]["eval_samples"] == 40
    assert scores["ensemble"]["eval_exact_match"] == scores["alone"]["eval_exact_match"] > 0
    assert scores["ensemble"]["eval_chrf"] == scores["alone"]["eval_chrf"]
    with pytest.raises(ValueError, match="without --do_train"):
        train_translation.main(
            [
                "--model_name_or_path",
                str(small_demo_model),
                "--do_train",
                "--output_dir",
                str(tmp_path / "x"),
                "--ensemble_with",
                str(small_demo_model),
            ]
        )
