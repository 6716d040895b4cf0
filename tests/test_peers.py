"""benchmarks/peers: the peers' data is the recipe's joint BPE applied to the corpus, and turns back into the text."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT


def load(name):
    spec = importlib.util.spec_from_file_location(name, f"{ROOT}/benchmarks/peers/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pieces_are_the_recipes_bpe_and_detokenize_back(tmp_path):
    from vanilla_transformer.tokenization import train_tokenizer

    prepare = load("prepare")
    de = ["Ein Mann fährt Fahrrad.", "Zwei Hunde\tspielen  im Schnee."] * 30
    en = ["A man rides a bike.", "Two dogs play in the snow."] * 30
    for split in ("train", "validation"):
        (tmp_path / f"{split}.de").write_text("\n".join(de) + "\n", encoding="utf-8")
        (tmp_path / f"{split}.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    prepare.main([str(tmp_path), str(tmp_path / "out"), "--vocab_size", "60"])
    recipe = train_tokenizer([s for pair in zip(de, en) for s in pair], 60)  # what train-translation trains
    saved = json.loads((tmp_path / "out" / "tokenizer" / "tokenizer.json").read_text())["model"]
    assert saved["merges"] == json.loads(recipe.backend_tokenizer.to_str())["model"]["merges"]
    pieces = (tmp_path / "out" / "train.de.bpe").read_text(encoding="utf-8").splitlines()
    assert pieces[1].split() == recipe.tokenize("Zwei Hunde spielen im Schnee.")  # whitespace runs as one space
    texts = [prepare.detokenize(line) for line in pieces[:2]]
    assert texts == ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee."]
    assert (tmp_path / "out" / "validation.en").read_text(encoding="utf-8").splitlines() == en


def test_score_and_report_read_both_layouts(tmp_path):
    """score.py reads OpenNMT-py's checkpoints (pieces) and ours (text), timed from `start_time` to the checkpoint's
    file; report.py finds the first checkpoint at each BLEU threshold and the best within the time budget."""
    report = load("report")
    references = ["A man rides a bike.", "Two dogs play in the snow."]
    (tmp_path / "ref.en").write_text("\n".join(references) + "\n", encoding="utf-8")
    start = 1_000_000.0
    runs = {"onmt": tmp_path / "onmt", "ours": tmp_path / "ours"}
    for run in runs.values():
        run.mkdir()
        (run / "start_time").write_text(f"{start}\n")
    # OpenNMT-py: model_step_N.pt + model_step_N.hyp in pieces; a bad then a perfect checkpoint
    for step, minutes, hyps in (
        (100, 2.0, ["▁A ▁dog", "▁cats"]),
        (200, 5.0, ["▁A ▁man ▁ri des ▁a ▁bike .", "▁Two ▁dogs ▁play ▁in ▁the ▁snow ."]),
    ):
        (runs["onmt"] / f"model_step_{step}.pt").write_bytes(b"")
        os.utime(runs["onmt"] / f"model_step_{step}.pt", (start + 60 * minutes,) * 2)
        (runs["onmt"] / f"model_step_{step}.hyp").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    # ours: checkpoint-N/model.safetensors + checkpoint-N.hyp in text
    (runs["ours"] / "checkpoint-50").mkdir()
    (runs["ours"] / "checkpoint-50" / "model.safetensors").write_bytes(b"")
    os.utime(runs["ours"] / "checkpoint-50" / "model.safetensors", (start + 60 * 1.5,) * 2)
    (runs["ours"] / "checkpoint-50.hyp").write_text("\n".join(references) + "\n", encoding="utf-8")
    for run, flags in ((runs["onmt"], ["--system", "peer"]), (runs["ours"], ["--system", "ours", "--text"])):
        subprocess.run(
            [sys.executable, f"{ROOT}/benchmarks/peers/score.py", str(run), str(tmp_path / "ref.en"), *flags],
            check=True,
            capture_output=True,
        )
    onmt = json.loads((runs["onmt"] / "scores.json").read_text())["checkpoints"]
    assert [c["step"] for c in onmt] == [100, 200]
    assert [c["minutes"] for c in onmt] == pytest.approx([2.0, 5.0])
    assert onmt[0]["bleu"] < 10 and onmt[1]["bleu"] == pytest.approx(100.0)
    rows = {name: report.summary(str(run), minutes=4) for name, run in runs.items()}
    assert rows["ours"]["reached"] == {35: pytest.approx(1.5), 38: pytest.approx(1.5), 40: pytest.approx(1.5)}
    assert rows["onmt"]["reached"][40] == pytest.approx(5.0)
    assert rows["onmt"]["best"] == onmt[0]["bleu"]  # the perfect checkpoint came after the 4-minute budget
    table = report.markdown([rows["ours"], rows["onmt"]], 4)
    assert "| ours | - | 1.5 | 1.5 | 1.5 | 100.00 |" in table
    (runs["onmt"] / "train.log").write_text("Step 50/100; acc: 1; 900/1100 tok/s; 5 sec\nStep 100; 1000/1000 tok/s\n")
    assert report.tokens_per_second(str(runs["onmt"])) == 2000
