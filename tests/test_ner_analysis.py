"""The tuning split by document and the seen/unseen entity report (`vanilla-transformer split-documents`,
`ner-report`): reproducible, disjoint, whole documents; scores checked against counts made by hand."""

import json

import pytest

from vanilla_transformer import cli
from vanilla_transformer.data import DataError, load_conll
from vanilla_transformer.data.splits import split_documents, split_pairs
from vanilla_transformer.ner.analysis import read_predictions, seen_unseen_report


def write_documents(path, n=20):
    lines = []
    for d in range(n):
        lines += ["-DOCSTART- -X- -X- O", ""]
        for s in range(1 + d % 3):
            lines += [f"Doc{d}word{s} NNP B-NP B-PER", "visited VBD B-VP O", "Paris NNP B-NP B-LOC", ""]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_split_documents(tmp_path):
    source = write_documents(tmp_path / "train.txt")
    counts = split_documents(str(source), str(tmp_path / "a"), fraction=0.25, seed=3)
    assert counts == {"documents": 20, "tune_documents": 5, "train_documents": 15}
    split_documents(str(source), str(tmp_path / "b"), fraction=0.25, seed=3)
    assert (tmp_path / "a" / "tune.txt").read_text() == (tmp_path / "b" / "tune.txt").read_text()  # reproducible
    split_documents(str(source), str(tmp_path / "c"), fraction=0.25, seed=4)
    assert (tmp_path / "a" / "tune.txt").read_text() != (tmp_path / "c" / "tune.txt").read_text()

    def first_words(path):
        return {w for row in load_conll(str(path))["tokens"] for w in row if w.startswith("Doc")}

    train, tune = first_words(tmp_path / "a" / "train.txt"), first_words(tmp_path / "a" / "tune.txt")
    assert not train & tune and train | tune == first_words(source)  # disjoint, nothing lost
    docs_in_tune = {w.split("word")[0] for w in tune}
    assert len(docs_in_tune) == 5 and all(w.split("word")[0] in docs_in_tune for w in tune)  # whole documents
    assert len(load_conll(str(tmp_path / "a" / "train.txt"))) + len(
        load_conll(str(tmp_path / "a" / "tune.txt"))
    ) == len(load_conll(str(source)))


def test_split_documents_errors(tmp_path, capsys):
    (tmp_path / "nodoc.txt").write_text("EU B-ORG\n\n")
    with pytest.raises(DataError, match="no -DOCSTART- lines"):
        split_documents(str(tmp_path / "nodoc.txt"), str(tmp_path / "out"))
    with pytest.raises(ValueError, match="fraction"):
        split_documents(str(write_documents(tmp_path / "t.txt")), str(tmp_path / "out"), fraction=1.5)
    assert cli.main(["split-documents", str(tmp_path / "missing.txt"), str(tmp_path / "out")]) == 2
    assert "missing.txt: file not found" in capsys.readouterr().err


def test_split_pairs_holds_out_aligned_pairs(tmp_path, capsys):
    (tmp_path / "c.de").write_text("".join(f"de{i}\n" for i in range(40)), encoding="utf-8")
    (tmp_path / "c.en").write_text("\ufeff" + "".join(f"en{i}\n" for i in range(40)), encoding="utf-8")  # a BOM
    counts = split_pairs(str(tmp_path / "c"), str(tmp_path / "a"), "de", "en", fraction=0.1, seed=1)
    assert counts == {"pairs": 40, "tune_pairs": 4, "train_pairs": 36}

    def lines(name):
        return (tmp_path / "a" / name).read_text(encoding="utf-8").splitlines()

    for name in ("train", "tune"):  # line i of one side is still the translation of line i of the other
        assert [x[2:] for x in lines(f"{name}.de")] == [x[2:] for x in lines(f"{name}.en")]
    ids = [int(x[2:]) for x in lines("train.de")]
    assert ids == sorted(ids) and sorted(ids + [int(x[2:]) for x in lines("tune.de")]) == list(range(40))
    split_pairs(str(tmp_path / "c"), str(tmp_path / "b"), "de", "en", fraction=0.1, seed=1)
    assert (tmp_path / "b" / "tune.en").read_text() == (tmp_path / "a" / "tune.en").read_text()  # reproducible
    (tmp_path / "c.en").write_text("en0\n", encoding="utf-8")
    assert (
        cli.main(
            ["split-pairs", str(tmp_path / "c"), str(tmp_path / "d"), "--source_lang", "de", "--target_lang", "en"]
        )
        == 2
    )
    assert "c.de has 40 lines but" in capsys.readouterr().err and not (tmp_path / "d").exists()


def test_seen_unseen_report(tmp_path, capsys):
    (tmp_path / "train.txt").write_text("-DOCSTART- O\n\nAnna B-PER\nin O\nParis B-LOC\n\n", encoding="utf-8")
    (tmp_path / "pred.txt").write_text(
        "Anna B-PER B-PER\nmet O O\nBoris B-PER B-LOC\nin O O\nParis B-LOC B-LOC\n\n"  # seen PER ok; unseen PER wrong
        "Paris B-LOC O\nand O O\nOslo B-LOC B-LOC\nCity I-LOC I-LOC\n\n",
        encoding="utf-8",
    )  # seen LOC missed
    report = seen_unseen_report(str(tmp_path / "pred.txt"), str(tmp_path / "train.txt"))
    # gold: Anna (seen PER), Boris (unseen PER), Paris x2 (seen LOC), Oslo City (unseen LOC)
    # predicted: Anna ok, Boris as LOC (unseen, wrong), Paris ok once, Oslo City ok
    assert report["all"]["ALL"]["gold"] == 5 and report["all"]["ALL"]["predicted"] == 4
    assert report["all"]["ALL"]["precision"] == pytest.approx(3 / 4) and report["all"]["ALL"]["recall"] == 3 / 5
    assert report["seen"]["ALL"]["recall"] == pytest.approx(2 / 3) and report["seen"]["ALL"]["precision"] == 1.0
    assert report["unseen"]["PER"]["recall"] == 0.0 and report["unseen"]["LOC"]["f1"] == pytest.approx(2 / 3)
    assert report["unseen_share"] == pytest.approx(2 / 5)
    assert (
        cli.main(
            [
                "ner-report",
                str(tmp_path / "pred.txt"),
                "--train_file",
                str(tmp_path / "train.txt"),
                "--json",
                str(tmp_path / "r.json"),
            ]
        )
        == 0
    )
    assert "| unseen | PER |" in capsys.readouterr().out
    assert json.loads((tmp_path / "r.json").read_text())["all"]["ALL"]["gold"] == 5
    (tmp_path / "bad.txt").write_text("Anna B-PER\n")
    with pytest.raises(DataError, match=r"bad\.txt, line 1"):
        read_predictions(str(tmp_path / "bad.txt"))


def test_report_agrees_with_seqeval_strict(tmp_path):
    """Predicted I- tags that extend nothing are no entity, as in the run's own strict IOB2 F1."""
    from vanilla_transformer.evaluation import load_metric

    (tmp_path / "train.txt").write_text("-DOCSTART- O\n\nAnna B-PER\n\n", encoding="utf-8")
    rows = [
        ("Anna", "B-PER", "I-PER"),
        ("and", "O", "O"),
        ("New", "B-LOC", "B-LOC"),
        ("York", "I-LOC", "I-LOC"),
        ("Times", "B-ORG", "I-ORG"),
        ("EU", "B-ORG", "B-ORG"),
        ("Boris", "B-PER", "B-PER"),
        ("Ivan", "I-PER", "O"),
    ]
    (tmp_path / "pred.txt").write_text("".join(" ".join(r) + "\n" for r in rows), encoding="utf-8")
    report = seen_unseen_report(str(tmp_path / "pred.txt"), str(tmp_path / "train.txt"))
    seqeval = load_metric("seqeval_f1").compute(predictions=[[r[2] for r in rows]], references=[[r[1] for r in rows]])
    assert report["all"]["ALL"]["predicted"] == 3  # New York, EU, Boris; the two stray I- tags are not entities
    assert report["all"]["ALL"]["f1"] == pytest.approx(seqeval["overall_f1"])
    assert report["all"]["ALL"]["precision"] == pytest.approx(seqeval["overall_precision"])
