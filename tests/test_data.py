import json
import os

import pytest

from vanilla_transformer import data
from vanilla_transformer.data import DataError


def test_demo_rule_and_determinism():
    assert data.demo_translate("123456qwer") == "RREWQ345678"
    a, b = data.make_demo_translation(50, seed=3), data.make_demo_translation(50, seed=3)
    assert a["translation"] == b["translation"]
    assert a["translation"] != data.make_demo_translation(50, seed=4)["translation"]
    for pair in a["translation"]:
        assert 1 <= len(pair["src"]) <= 48 and set(pair["src"]) <= set(data.DEMO_SYMBOLS)
        assert pair["tgt"] == data.demo_translate(pair["src"]) and len(pair["tgt"]) == len(pair["src"]) + 1
    lengths = {len(pair["src"]) for pair in data.make_demo_translation(2000, seed=0)["translation"]}
    assert lengths == set(range(1, 49))  # every length a user may type, 1 to 48
    assert {len(p["src"]) for p in data.make_demo_translation(50, 0, 30, 31)["translation"]} == {30, 31}
    with pytest.raises(ValueError, match="min_length <= max_length, got 0 and 5"):
        data.make_demo_translation(5, min_length=0, max_length=5)
    counts = {c: 0 for c in data.DEMO_SYMBOLS}
    for pair in data.make_demo_translation(300, seed=0)["translation"]:
        for c in pair["src"]:
            counts[c] += 1
    assert counts["0"] > 5 * counts["z"]  # skewed frequencies


def test_parallel_text(tmp_path):
    (tmp_path / "train.de").write_text("Ein Hund.\nZwei Katzen.\n", encoding="utf-8")
    (tmp_path / "train.en").write_text("A dog.\nTwo cats.\n", encoding="utf-8")
    ds = data.load_parallel_text(str(tmp_path / "train"), "de", "en")
    assert ds["translation"] == [{"de": "Ein Hund.", "en": "A dog."}, {"de": "Zwei Katzen.", "en": "Two cats."}]


def test_parallel_text_errors(tmp_path):
    (tmp_path / "a.de").write_text("eins\nzwei\ndrei\n")
    (tmp_path / "a.en").write_text("one\ntwo\n")
    with pytest.raises(DataError, match=r"a\.de has 3 lines but .*a\.en has 2"):
        data.load_parallel_text(str(tmp_path / "a"), "de", "en")
    with pytest.raises(DataError, match=r"b\.de: file not found"):
        data.load_parallel_text(str(tmp_path / "b"), "de", "en")
    (tmp_path / "c.de").write_text("")
    (tmp_path / "c.en").write_text("x\n")
    with pytest.raises(DataError, match=r"c\.de: file is empty"):
        data.load_parallel_text(str(tmp_path / "c"), "de", "en")
    (tmp_path / "d.de").write_bytes(b"gut\nschlecht \xff\xfe\n")
    (tmp_path / "d.en").write_text("good\nbad\n")
    with pytest.raises(DataError, match=r"d\.de, line 2: bytes that are not UTF-8"):
        data.load_parallel_text(str(tmp_path / "d"), "de", "en")
    (tmp_path / "f.de").write_bytes(b"gut\nschlecht \xc3")  # ends inside a two-byte character
    (tmp_path / "f.en").write_text("good\nbad\n")
    with pytest.raises(DataError, match=r"f\.de, line 2: bytes that are not UTF-8"):
        data.load_parallel_text(str(tmp_path / "f"), "de", "en")
    (tmp_path / "e.de").write_text("eins\n\n")
    (tmp_path / "e.en").write_text("one\ntwo\n")
    with pytest.raises(DataError, match=r"e\.de, line 2: empty sentence"):
        data.load_parallel_text(str(tmp_path / "e"), "de", "en")


def test_translation_jsonl(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"translation": {"de": "Hallo", "en": "Hello"}}) + "\n\n")
    assert data.load_translation_jsonl(str(path), "de", "en")["translation"] == [{"de": "Hallo", "en": "Hello"}]
    path.write_text(json.dumps({"translation": {"de": "Hallo", "en": "Hello"}}) + '\n{"translation": {"de": 1}}\n')
    with pytest.raises(DataError, match=r"t\.jsonl, line 2"):
        data.load_translation_jsonl(str(path), "de", "en")
    path.write_text("not json\n")
    with pytest.raises(DataError, match=r"line 1"):
        data.load_translation_jsonl(str(path), "de", "en")


def test_translation_tsv(tmp_path):
    path = tmp_path / "fra.txt"  # Tatoeba / Anki layout: English, French, attribution
    path.write_text(
        "Go.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272 (CM)\n\nHi.\tSalut !\n", encoding="utf-8"
    )
    assert data.load_translation_tsv(str(path), "en", "fr")["translation"] == [
        {"en": "Go.", "fr": "Va !"},
        {"en": "Hi.", "fr": "Salut !"},
    ]
    path.write_text("Go.\tVa !\nRun! Cours !\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"fra\.txt, line 2: no tab"):
        data.load_translation_tsv(str(path), "en", "fr")
    path.write_text("Go.\t \n", encoding="utf-8")
    with pytest.raises(DataError, match=r"line 1: empty target"):
        data.load_translation_tsv(str(path), "en", "fr")


CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP I-ORG
rejects VBZ B-VP O
German JJ B-NP I-MISC
call NN I-NP O

Peter NNP B-NP I-PER
Blackburn NNP I-NP I-PER
"""


def test_conll_iob1_to_iob2(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text(CONLL)
    ds = data.load_conll(str(path))
    assert ds["tokens"] == [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]]
    assert ds["ner_tags"] == [["B-ORG", "O", "B-MISC", "O"], ["B-PER", "I-PER"]]
    assert data.iob1_to_iob2(["I-PER", "I-PER", "I-LOC", "O", "I-LOC", "B-LOC"]) == [
        "B-PER",
        "I-PER",
        "B-LOC",
        "O",
        "B-LOC",
        "B-LOC",
    ]


def test_conll_documents_and_context(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("-DOCSTART- -X- -X- O\n\na O\nb B-PER\n\nc O\n\n-DOCSTART- -X- -X- O\n\nd B-LOC\ne O\n")
    ds = data.load_conll(str(path))
    assert ds["document"] == [0, 0, 1]
    ctx = data.with_document_context(ds, 1)
    assert ctx["tokens"] == [["a", "b", "c"], ["b", "c"], ["d", "e"]]  # context never crosses a document
    assert ctx["ner_tags"] == [["O", "B-PER", "O"], ["O", "O"], ["B-LOC", "O"]]
    assert list(zip(ctx["first"], ctx["last"])) == [(0, 2), (1, 2), (0, 2)]
    alone = data.with_document_context(ds, 0)
    assert alone["tokens"] == ds["tokens"] and alone["first"] == [0, 0, 0]
    with pytest.raises(ValueError, match="got -1"):
        data.with_document_context(ds, -1)


def test_conll_errors(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("EU NNP B-NP B-ORG\nrejects VBZ O\n")
    with pytest.raises(DataError, match=r"bad\.txt, line 2: 3 columns where earlier lines have 4"):
        data.load_conll(str(path))
    path.write_text("EU NNP B-NP ORG\n")
    with pytest.raises(DataError, match=r"line 1: tag 'ORG'"):
        data.load_conll(str(path))
    path.write_text("-DOCSTART- -X- -X- O\n\n")
    with pytest.raises(DataError, match="no sentences"):
        data.load_conll(str(path))


def test_ner_jsonl(tmp_path):
    path = tmp_path / "n.jsonl"
    path.write_text(json.dumps({"tokens": ["Anna", "Berg"], "ner_tags": ["I-PER", "I-PER"]}) + "\n")
    assert data.load_ner_file(str(path))["ner_tags"] == [["B-PER", "I-PER"]]
    path.write_text(json.dumps({"tokens": ["Anna", "Berg"], "ner_tags": ["B-PER"]}) + "\n")
    with pytest.raises(DataError, match="line 1: 2 tokens but 1 tags"):
        data.load_ner_file(str(path))


def test_demo_ner_is_valid_iob2():
    ds = data.make_demo_ner(100, seed=0)
    for words, tags in zip(ds["tokens"], ds["ner_tags"]):
        assert len(words) == len(tags)
        assert data.iob1_to_iob2(tags) == tags


def test_parallel_text_is_cached_and_a_changed_file_is_read_again(tmp_path):
    """The Arrow files of a parallel corpus are reused while its text files are unchanged, and never after a change."""
    (tmp_path / "train.de").write_text("Ein Hund.\nZwei Katzen.\n", encoding="utf-8")
    (tmp_path / "train.en").write_text("A dog.\nTwo cats.\n", encoding="utf-8")
    cache = str(tmp_path / "cache")
    first = data.load_parallel_text(str(tmp_path / "train"), "de", "en", cache_dir=cache)
    again = data.load_parallel_text(str(tmp_path / "train"), "de", "en", cache_dir=cache)
    names = [f["filename"] for f in first.cache_files]
    assert names and [f["filename"] for f in again.cache_files] == names
    assert all(f["filename"].startswith(cache) for f in first.cache_files)  # on disk, memory-mapped
    (tmp_path / "train.en").write_text("A dog.\nThree cats.\n", encoding="utf-8")
    changed = data.load_parallel_text(str(tmp_path / "train"), "de", "en", cache_dir=cache)
    assert changed["translation"][1] == {"de": "Zwei Katzen.", "en": "Three cats."}


def test_lines_end_only_at_line_breaks(tmp_path):
    """A sentence holding U+2028 or a form feed stays one line (str.splitlines would split it and misalign the pair)."""
    (tmp_path / "t.de").write_text("eins\u2028zwei\ndrei\x0cvier\n", encoding="utf-8")
    (tmp_path / "t.en").write_text("one two\nthree four\n", encoding="utf-8")
    ds = data.load_parallel_text(str(tmp_path / "t"), "de", "en", cache_dir=str(tmp_path / "cache"))
    assert [p["de"] for p in ds["translation"]] == ["eins\u2028zwei", "drei\x0cvier"]


def test_a_file_changed_under_the_same_time_is_read_again(tmp_path):
    """datasets names its cache by path and modification time; a file rewritten with its old time (cp -p, rsync -t)
    is still detected, and nothing derived from the old text (the pairs) is reused."""
    (tmp_path / "train.de").write_text("Ein Hund.\nZwei Katzen.\n", encoding="utf-8")
    (tmp_path / "train.en").write_text("A dog.\nTwo cats.\n", encoding="utf-8")
    cache = str(tmp_path / "cache")
    assert data.load_parallel_text(str(tmp_path / "train"), "de", "en", cache_dir=cache)["translation"][1]["en"] == (
        "Two cats."
    )
    stat = os.stat(tmp_path / "train.en")
    (tmp_path / "train.en").write_text("A dog.\nTwo mice.\n", encoding="utf-8")
    os.utime(tmp_path / "train.en", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    changed = data.load_parallel_text(str(tmp_path / "train"), "de", "en", cache_dir=cache)
    assert changed["translation"][1] == {"de": "Zwei Katzen.", "en": "Two mice."}


def test_every_command_reads_lines_by_one_rule(tmp_path):
    """A line ends at \\n, \\r\\n or \\r; U+2028 and form feeds stay inside their line; a last line end adds no line."""
    from vanilla_transformer.files import read_lines

    path = tmp_path / "mixed.txt"
    path.write_bytes("one\r\ntwo\rthree\nfour\u2028still four\x0cand this\n\n".encode())
    assert read_lines(str(path)) == ["one", "two", "three", "four\u2028still four\x0cand this", ""]
    (tmp_path / "empty.txt").write_bytes(b"")
    assert read_lines(str(tmp_path / "empty.txt"), allow_empty=True) == []
    with pytest.raises(DataError, match="empty.txt: file is empty"):
        read_lines(str(tmp_path / "empty.txt"))


def test_a_write_is_whole_or_leaves_what_was_there(tmp_path):
    """files.replaced_atomically, under every atomic write (text files, averaged weights, exports): a failed block
    leaves the old file or directory and no temporary; a finished one replaces a directory whole."""
    from vanilla_transformer.files import replaced_atomically, write_text

    write_text(tmp_path / "a.txt", "old")
    with pytest.raises(RuntimeError), replaced_atomically(tmp_path / "a.txt") as temporary:
        with open(temporary, "w", encoding="utf-8") as f:
            f.write("half")
        raise RuntimeError
    assert (tmp_path / "a.txt").read_text() == "old" and os.listdir(tmp_path) == ["a.txt"]
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "stale").write_text("x")
    with replaced_atomically(tmp_path / "d") as temporary:
        os.makedirs(temporary)
        write_text(os.path.join(temporary, "new"), "y")
    assert os.listdir(tmp_path / "d") == ["new"] and sorted(os.listdir(tmp_path)) == ["a.txt", "d"]
    with pytest.raises(OSError):  # a file is never written over a directory (`translate --output DIR`)
        write_text(tmp_path / "d", "text")
    assert os.listdir(tmp_path / "d") == ["new"] and sorted(os.listdir(tmp_path)) == ["a.txt", "d"]
    write_text(tmp_path / "e" / "b.txt", "in a folder made for it")
    assert (tmp_path / "e" / "b.txt").read_text() == "in a folder made for it"
    (tmp_path / "plain.txt").write_text("made by open")  # the same permissions as any file (not a temporary's 0600)
    assert os.stat(tmp_path / "a.txt").st_mode == os.stat(tmp_path / "plain.txt").st_mode


def test_a_hub_dataset_with_a_loading_script_is_one_clear_error(monkeypatch):
    """datasets 4 and newer refuse a Hub dataset that needs a loading script (`conll2003` under that name), with a
    RuntimeError; `--dataset_name` answers with a ValueError saying what to give instead. Other errors pass through."""
    from vanilla_transformer import data
    from vanilla_transformer.data import hub

    def refuse(name, *args, **kwargs):
        raise RuntimeError(f"Dataset scripts are no longer supported, but found {name}.py")

    monkeypatch.setattr(hub, "load_dataset", refuse)
    with pytest.raises(ValueError, match="--dataset_name conll2003: this Hub dataset needs a loading script"):
        data.hub_dataset("conll2003")

    def fail(name, *args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(hub, "load_dataset", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        data.hub_dataset("x")
