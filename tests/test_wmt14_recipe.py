"""The paper's WMT14 recipe end to end on a tiny generated corpus in its data layout (a few steps: that every stage
runs and hands the next what it needs), and the paper's tokenized, compound-split BLEU."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from vanilla_transformer import cli
from vanilla_transformer.data import make_demo_translation
from vanilla_transformer.evaluation.paper_bleu import moses_compound_split, score


def write_wmt14_layout(folder, sizes=(("train", 300), ("newstest2013", 12), ("newstest2014", 10))):
    wmt = folder / "wmt14_en_de"
    wmt.mkdir(parents=True)
    for seed, (split, n) in enumerate(sizes):
        pairs = make_demo_translation(n, seed=seed, max_length=10)["translation"]
        (wmt / f"{split}.en").write_text("".join(p["src"] + "\n" for p in pairs), encoding="utf-8")
        (wmt / f"{split}.de").write_text("".join(p["tgt"] + "\n" for p in pairs), encoding="utf-8")
    return wmt


def test_wmt14_recipe_runs_end_to_end(tmp_path):
    write_wmt14_layout(tmp_path / "data")
    out = tmp_path / "out"
    env = dict(
        os.environ,
        PY=sys.executable,
        STEPS="6",
        SAVE_STEPS="1",
        TOKENS_PER_STEP="256",
        MAX_TOKENS="128",
        MAX_LENGTH="24",
        BF16="false",
        OMP_NUM_THREADS="2",
    )
    proc = subprocess.run(
        [
            "bash",
            os.path.join(ROOT, "recipes", "wmt14_en_de.sh"),
            str(tmp_path / "data"),
            str(out),
            "--config_name",
            "tiny",
            "--vocab_size",
            "100",
            "--warmup_steps",
            "2",
            "--disable_tqdm",
            "true",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # 256 tokens a step from one process: --max_tokens 128 with 2 batches accumulated
    assert "--max_tokens 128 x 1 process(es) x 2 accumulation = 256 tokens" in proc.stdout
    averaged = ", ".join(f"checkpoint-{step}" for step in range(2, 7))
    assert f"Averaged 5 checkpoints ({averaged})" in proc.stdout
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 6
    config = json.loads((out / "averaged" / "config.json").read_text())
    assert config["d_model"] == 32 and config["normalize_before"] is False  # tiny shape, the paper's post-LN
    translations = (out / "newstest2014" / "generated_predictions_test.txt").read_text(encoding="utf-8")
    assert len(translations.splitlines()) == 10
    scores = json.loads((out / "newstest2014" / "scores.json").read_text())
    assert scores["sentences"] == 10
    assert 0 <= scores["sacrebleu"] <= 100 and 0 <= scores["tokenized_bleu_compound_split"] <= 100


def test_wmt14_recipe_names_a_missing_file(tmp_path):
    wmt = write_wmt14_layout(tmp_path / "data")
    (wmt / "newstest2014.de").unlink()
    proc = subprocess.run(
        ["bash", os.path.join(ROOT, "recipes", "wmt14_en_de.sh"), str(tmp_path / "data"), str(tmp_path / "out")],
        cwd=ROOT,
        env=dict(os.environ, PY=sys.executable),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "wmt14_en_de/newstest2014.de not found" in proc.stderr


def test_compound_splitting_as_the_papers_script():
    """Moses tokens, then one `##AT##-##AT##` split per hyphen between non-spaces (tensor2tensor's get_ende_bleu.sh)."""
    assert moses_compound_split(['Ein Test-Fall, "sagte" er.'], "de") == [
        'Ein Test ##AT##-##AT## Fall , " sagte " er .'
    ]


def test_tokenized_bleu_rewards_what_13a_does_not_split():
    """A hypothesis that differs from its reference only inside a compound loses less under compound splitting (the
    compound's parts still match) than under sacreBLEU's 13a, which keeps `Test-Fall` one token."""
    references = ["Das ist ein schwieriger Test-Fall für alle hier ."]
    hypotheses = ["Das ist ein schwieriger Test-Lauf für alle hier ."]
    scores = score(hypotheses, references, "de")
    assert scores["tokenized_bleu_compound_split"] > scores["sacrebleu"]
    perfect = score(references, references, "de")
    assert perfect["sacrebleu"] == pytest.approx(100) and perfect["tokenized_bleu_compound_split"] == pytest.approx(100)


def test_score_gives_sacrebleu_without_the_wmt_extra(monkeypatch):
    """Without sacremoses (the `wmt` extra) `score` still gives sacreBLEU, and a note on what the paper's BLEU needs."""
    monkeypatch.setitem(sys.modules, "sacremoses", None)  # (import sacremoses: ImportError)
    scores = score(["ein Hund läuft im Park"], ["ein Hund läuft im Park"], "de")
    assert scores["sacrebleu"] == pytest.approx(100) and "tokenized_bleu_compound_split" not in scores
    assert "vanilla-transformer[wmt]" in scores["note"]


def test_score_command_errors(tmp_path, capsys):
    (tmp_path / "h.txt").write_text("a b c\n")
    (tmp_path / "r.txt").write_text("a b c\nd e f\n")
    assert cli.main(["score", str(tmp_path / "h.txt"), str(tmp_path / "r.txt")]) == 2
    assert "1 translations but 2 references" in capsys.readouterr().err
    (tmp_path / "bad.txt").write_bytes(b"ok\n\xff\n")
    assert cli.main(["score", str(tmp_path / "bad.txt"), str(tmp_path / "r.txt")]) == 2
    assert "bad.txt, line 2: bytes that are not UTF-8" in capsys.readouterr().err
