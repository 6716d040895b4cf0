"""Ensembles of trained taggers (`TokenClassificationEnsemble`, `run_ner.py --ensemble_with`)."""

import json

import pytest
import torch

from conftest import f1_of_predictions_file, ner_args, tiny_tagger
from vanilla_transformer.commands import train_ner
from vanilla_transformer.ner.ensemble import TokenClassificationEnsemble


def tagger(seed, **overrides):
    model = tiny_tagger(seed, num_labels=5, **overrides).eval()
    if model.crf is not None:
        for p in model.crf.parameters():
            torch.nn.init.normal_(p)
    return model


@pytest.mark.parametrize("use_crf", [False, True])
def test_ensemble_of_scaled_copies_is_the_member(use_crf):
    """Members A and 3A (classifier and CRF scores tripled): the combined scores are 2A, so the same decision; with a
    CRF the max-marginals are exactly doubled (every path score is)."""
    a = tagger(0, use_crf=use_crf)
    b = tagger(0, use_crf=use_crf)
    with torch.no_grad():
        for p in [b.classifier.weight, b.classifier.bias, *(b.crf.parameters() if use_crf else [])]:
            p.mul_(3)
    ids = torch.randint(3, 99, (3, 7))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    with torch.no_grad():
        single = a(ids, attention_mask=mask).logits
        combined = TokenClassificationEnsemble([a, b])(ids, attention_mask=mask).logits
    if use_crf:
        torch.testing.assert_close(combined, 2 * single)
    else:
        torch.testing.assert_close(combined, (single.log_softmax(-1) + (3 * single).log_softmax(-1)) / 2)
    assert torch.equal(combined.argmax(-1), single.argmax(-1))


def test_ensemble_loss_and_members_differ():
    a, b = tagger(0, use_crf=True), tagger(1, use_crf=True)
    ens = TokenClassificationEnsemble([a, b]).eval()
    torch.testing.assert_close(ens.crf.transitions, (a.crf.transitions + b.crf.transitions) / 2)
    ids = torch.randint(3, 99, (2, 6))
    labels = torch.randint(0, 5, (2, 6))
    with torch.no_grad():
        out = ens(ids, labels=labels)
    assert out.loss.ndim == 0 and torch.isfinite(out.loss) and out.loss > 0
    with pytest.raises(ValueError, match="labels contain 7, outside"):
        ens(ids, labels=torch.full((2, 6), 7))


def test_ensemble_rejects_mismatched_members():
    with pytest.raises(ValueError, match="at least one tagger"):
        TokenClassificationEnsemble([])
    with pytest.raises(TypeError, match="member 1 is a Linear"):
        TokenClassificationEnsemble([tagger(0), torch.nn.Linear(2, 2)])
    with pytest.raises(ValueError, match="member 1 has use_crf=True but member 0 has False"):
        TokenClassificationEnsemble([tagger(0), tagger(0, use_crf=True)])
    other = tagger(0)
    other.config.id2label = {i: f"T{i}" for i in range(5)}
    with pytest.raises(ValueError, match="member 1 has id2label="):
        TokenClassificationEnsemble([tagger(0), other])


def test_run_ner_ensemble_with(tmp_path):
    """Two taggers trained by run_ner.py, evaluated as one: an ensemble of a model with itself scores exactly like the
    model; with a second model it writes metrics and predictions; training with --ensemble_with is refused."""
    dirs = []
    for seed in (1, 2):
        out = tmp_path / f"m{seed}"
        train_ner.main(ner_args(tmp_path, out, "--config_overrides", "use_crf=true", "--seed", str(seed), "--do_train"))
        dirs.append(str(out))
    files = ner_args(tmp_path, tmp_path / "unused")[:4]
    single = train_ner.main(
        [
            *files,
            "--model_name_or_path",
            dirs[0],
            "--do_eval",
            "--output_dir",
            str(tmp_path / "s"),
            "--disable_tqdm",
            "true",
        ]
    )
    same = train_ner.main(
        [
            *files,
            "--model_name_or_path",
            dirs[0],
            "--ensemble_with",
            dirs[0],
            "--do_eval",
            "--output_dir",
            str(tmp_path / "e1"),
            "--disable_tqdm",
            "true",
        ]
    )
    assert same["eval_f1"] == single["eval_f1"]
    train_ner.main(
        [
            *files,
            "--model_name_or_path",
            dirs[0],
            "--ensemble_with",
            dirs[1],
            "--do_eval",
            "--output_dir",
            str(tmp_path / "e2"),
            "--disable_tqdm",
            "true",
        ]
    )
    metrics = json.loads((tmp_path / "e2" / "eval_results.json").read_text())
    predictions = tmp_path / "e2" / "predictions_validation.txt"
    assert predictions.read_text().startswith("Anna ")
    assert (
        f1_of_predictions_file(predictions) == (pytest.approx(metrics["eval_f1"]), 3) and metrics["eval_samples"] == 3
    )
    with pytest.raises(ValueError, match="--ensemble_with combines trained taggers"):
        train_ner.main(
            [
                *files,
                "--model_name_or_path",
                dirs[0],
                "--ensemble_with",
                dirs[1],
                "--do_train",
                "--output_dir",
                str(tmp_path / "e3"),
            ]
        )
