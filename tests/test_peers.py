"""benchmarks/peers: the peers' data is the recipe's joint BPE applied to the corpus, and turns back into the text."""

import importlib.util
import json

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
