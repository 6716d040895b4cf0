"""Quick variants of the quality recipes on the real data (opt-in: VT_SLOW=1; skipped without ../shared/data).

Each runs the recipe script itself with a shorter schedule and fails on a quality regression: the thresholds sit a
margin below what the short run reached on a 2-core CPU when the recipe was tuned (docs/results.md, "Regression runs").
"""

import json
import os
import subprocess
import sys

import pytest
from transformers import AutoTokenizer

from conftest import ROOT, SHARED_DATA

pytestmark = pytest.mark.slow

# Measured when the recipes were tuned (2-core CPU): Multi30k 600 steps (dropout 0.2) -> BLEU 3.56 / chrF 21.0 on 300
# validation sentences (greedy), 4.1 min; CoNLL 3 epochs (with the auxiliary POS/chunk heads) on the training split ->
# the two members (trained at the same time, one per core) F1 0.700 / 0.701 on the tuning split, their ensemble 0.722
# there and 0.698 on validation, 4.1 min (AMD EPYC Zen 5, bf16). With one epoch of encoder pretraining first (one
# member): masked-word accuracy 0.243, the member 0.735 on the tuning split and 0.716 on validation, 4.7 min.
MULTI30K_QUICK = [
    "--max_steps",
    "600",
    "--warmup_steps",
    "80",
    "--save_strategy",
    "no",
    "--max_eval_samples",
    "300",
    "--num_beams",
    "1",
    "--disable_tqdm",
    "true",
]
MULTI30K_QUICK_MIN_BLEU, MULTI30K_QUICK_MIN_CHRF = 2.0, 14.0
CONLL_QUICK = [
    "--num_train_epochs",
    "3",
    "--warmup_steps",
    "200",
    "--eval_strategy",
    "no",
    "--save_strategy",
    "no",
    "--disable_tqdm",
    "true",
]
CONLL_QUICK_MIN_F1, CONLL_QUICK_MIN_MEMBER_F1 = 0.66, 0.65


def run_recipe(script, out, *extra, scores="eval_results.json", **env_vars):
    """The recipe run from outside the repository (it finds scripts/ beside itself), into `out`."""
    env = {**os.environ, "PY": sys.executable, **env_vars}
    proc = subprocess.run(
        ["bash", os.path.join(ROOT, "recipes", script), os.path.abspath(SHARED_DATA), str(out), *extra],
        cwd=out.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads((out / scores).read_text())


@pytest.mark.skipif(not os.path.isdir(os.path.join(SHARED_DATA, "multi30k")), reason="shared data absent")
def test_multi30k_quick_recipe(tmp_path):
    out = tmp_path / "m30k"
    metrics = run_recipe("multi30k.sh", out, *MULTI30K_QUICK, LENGTH_PENALTIES="1.0")  # (the tuning split's)
    assert metrics["eval_bleu"] >= MULTI30K_QUICK_MIN_BLEU and metrics["eval_chrf"] >= MULTI30K_QUICK_MIN_CHRF, metrics
    # trained and tuned on the training file's two parts; validation scored once, at the end
    assert sum(1 for _ in open(out / "split" / "tune.de")) == 1015 and metrics["eval_samples"] == 300
    validation = json.loads((out / "validation" / "eval_results.json").read_text())
    assert validation["eval_samples"] == 1014 and validation["eval_bleu"] >= MULTI30K_QUICK_MIN_BLEU, validation
    assert json.loads((out / "tune_decoding.json").read_text())["chosen"]["length_penalty"] == 1.0


@pytest.mark.skipif(not os.path.isdir(os.path.join(SHARED_DATA, "multi30k")), reason="shared data absent")
def test_multi30k_quick_ensemble_recipe(tmp_path):
    """SEEDS="42 7": two models trained side by side, scored as one ensemble on the tuning split, then validation."""
    out = tmp_path / "m30k"
    tune = run_recipe("multi30k.sh", out, *MULTI30K_QUICK, scores="tune/eval_results.json", SEEDS="42 7")
    members = [json.loads((out / f"member{i}" / "eval_results.json").read_text()) for i in (1, 2)]
    assert members[0]["eval_bleu"] != members[1]["eval_bleu"]  # two seeds, two models
    assert tune["eval_samples"] == 1015 and tune["eval_bleu"] >= MULTI30K_QUICK_MIN_BLEU, (tune, members)
    validation = json.loads((out / "validation" / "eval_results.json").read_text())
    assert validation["eval_samples"] == 1014 and validation["eval_bleu"] >= MULTI30K_QUICK_MIN_BLEU, validation
    assert not (out / "config.json").exists() and not (out / "tune_decoding.json").exists()  # members only


@pytest.mark.skipif(not os.path.isdir(os.path.join(SHARED_DATA, "conll2003")), reason="shared data absent")
def test_conll_quick_recipe(tmp_path):
    out = tmp_path / "conll"
    metrics = run_recipe("conll.sh", out, *CONLL_QUICK)
    members = [json.loads((out / f"member{i}" / "eval_results.json").read_text())["eval_f1"] for i in (1, 2)]
    assert metrics["eval_f1"] >= CONLL_QUICK_MIN_F1 and min(members) >= CONLL_QUICK_MIN_MEMBER_F1, (metrics, members)
    # the members were tuned on the split held out from training; validation is scored once, by the ensemble
    tune = json.loads((out / "tune" / "eval_results.json").read_text())
    assert tune["eval_samples"] < metrics["eval_samples"] and tune["eval_f1"] >= CONLL_QUICK_MIN_F1, tune
    for scores, directory in ((metrics, out), (tune, out / "tune")):
        report = json.loads((directory / "seen_unseen.json").read_text())
        assert report["all"]["ALL"]["f1"] == pytest.approx(scores["eval_f1"], abs=1e-4)
        assert report["seen"]["ALL"]["f1"] > report["unseen"]["ALL"]["f1"]


@pytest.mark.skipif(not os.path.isdir(os.path.join(SHARED_DATA, "conll2003")), reason="shared data absent")
def test_conll_quick_recipe_with_pretraining(tmp_path):
    """PRETRAIN=true: the members start from the encoder pretrained on the split's text (+ Multi30k English)."""
    out = tmp_path / "conll"
    metrics = run_recipe("conll.sh", out, *CONLL_QUICK, SEEDS="42", PRETRAIN="true", PRETRAIN_EPOCHS="1")
    encoder = json.loads((out / "encoder" / "eval_results.json").read_text())
    assert encoder["eval_accuracy"] > 0.15, encoder  # masked whole words, vocabulary of 8000
    assert AutoTokenizer.from_pretrained(out / "member1").mask_token == "<mask>"  # the encoder's tokenizer
    assert metrics["eval_f1"] >= CONLL_QUICK_MIN_MEMBER_F1, metrics
