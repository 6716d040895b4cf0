"""`vanilla-transformer tag`: entities of text lines as JSON with character offsets, CoNLL files with a tag column
added, long sentences in windows, ensembles, document consistency, and bad input named."""

import json

import pytest
import torch

from vanilla_transformer.cli import main as cli
from vanilla_transformer.deploy.taggers import Tagger, tag_lines, words_of

LINE = "yesterday Anna Novak visited Acme Corp in Oslo"


@pytest.fixture(scope="module")
def tagger(small_ner_model):
    return Tagger(small_ner_model, device="cpu")


def direct_tags(tagger, words):
    """The tags of `words` computed here, independently: argmax of the model's logits at each word's first piece."""
    batch = tagger.tokenizer([words], is_split_into_words=True, return_tensors="pt", return_token_type_ids=False)
    with torch.no_grad():
        best = tagger.model(**batch).logits[0].argmax(-1)
    first = {}
    for position, word in enumerate(batch.word_ids(0)):
        first.setdefault(word, position)
    return [tagger.labels[best[first[i]]] for i in range(len(words))]


def test_words_follow_conll_tokenization():
    line = 'Novak said: "Acme Corp\'s U.S. office has 1,000 staff, 3.5 per cent more; Sino-Japanese talks."'
    words = words_of(line)
    assert [w for w, _, _ in words] == [
        "Novak",
        "said",
        ":",
        '"',
        "Acme",
        "Corp",
        "'s",
        "U.S.",
        "office",
        "has",
        "1,000",
        "staff",
        ",",
        "3.5",
        "per",
        "cent",
        "more",
        ";",
        "Sino-Japanese",
        "talks",
        ".",
        '"',
    ]
    assert all(line[start:end] == word for word, start, end in words)


def test_text_lines_give_entities_with_offsets_into_the_line(tagger):
    """Each output line is a JSON array of the input line's entities; their text is the line's slice at their
    offsets, their tags those of the model computed independently; an empty line gives an empty array."""
    lines = [LINE, "", "  Oslo   and Acme Corp welcomed Anna  "]
    out = [json.loads(line) for line in tag_lines(tagger, lines)]
    assert len(out) == 3 and out[1] == []
    assert [(e["text"], e["type"]) for e in out[0]] == [("Anna Novak", "PER"), ("Acme Corp", "ORG"), ("Oslo", "LOC")]
    for line, found in zip(lines, out):
        for entity in found:
            assert line[entity["start"] : entity["end"]] == entity["text"] and 0 < entity["score"] <= 1
        words = [w for w, _, _ in words_of(line)]
        if words:
            from vanilla_transformer.ner.mentions import mention_spans

            expected = [(" ".join(words[s:e]), kind) for s, e, kind in mention_spans(direct_tags(tagger, words))]
            assert [(" ".join(e["text"].split()), e["type"]) for e in found] == expected


def test_conll_lines_keep_their_columns_and_gain_the_tag(tagger):
    """Document and blank lines unchanged, every token line as written plus its predicted tag (tab-separated input
    stays tab-separated), the same tags as the words tagged as text."""
    lines = ["-DOCSTART- -X- O", "", "yesterday\tO", "Anna\tB-PER", "Novak\tI-PER", "", "Oslo\tB-LOC", "welcomed\tO"]
    out = tag_lines(tagger, lines, form="conll")
    assert len(out) == len(lines)
    assert [out[i] for i in (0, 1, 5)] == [lines[i] for i in (0, 1, 5)]
    tags = {i: out[i].split("\t")[-1] for i in (2, 3, 4, 6, 7)}
    assert all(out[i] == lines[i] + "\t" + tags[i] for i in tags)
    assert [tags[i] for i in (2, 3, 4)] == direct_tags(tagger, ["yesterday", "Anna", "Novak"])
    assert [tags[i] for i in (6, 7)] == direct_tags(tagger, ["Oslo", "welcomed"])


def test_a_sentence_longer_than_the_positions_is_tagged_whole_in_windows(small_ner_model):
    """Windows of consecutive words that fit the model's positions cover the sentence; every word gets the tag of
    its window tagged alone."""
    tagger = Tagger(small_ner_model, device="cpu")
    tagger.window = 8  # word pieces a window holds (the model's positions minus the special tokens)
    words = (LINE.split() + ["and"]) * 4
    windows = tagger.windows(words)
    assert len(windows) > 3 and windows[0][0] == 0 and windows[-1][1] == len(words)
    assert all(a[1] == b[0] for a, b in zip(windows, windows[1:]))
    pieces = tagger.tokenizer(words, add_special_tokens=False)["input_ids"]
    assert all(sum(len(p) for p in pieces[a:b]) <= 8 for a, b in windows)
    tags, probs = tagger([words])[0]
    assert len(tags) == len(probs) == len(words)
    assert tags == [t for a, b in windows for t in direct_tags(tagger, words[a:b])]


def test_batches_of_similar_lengths_cost_least_and_tag_as_one_at_a_time(small_ner_model):
    """On a CPU the length-sorted windows are cut into consecutive batches of at most batch_size that minimize the
    padded words computed plus CALL_COST_WORDS a call (checked against every possible cut); on a GPU full batches. The
    tags are those of each sentence tagged alone."""
    import itertools
    import random

    from vanilla_transformer.deploy.taggers import CALL_COST_WORDS

    tagger = Tagger(small_ner_model, device="cpu", batch_size=4)

    def cost(spans, lengths):
        return sum(CALL_COST_WORDS + (b - a) * lengths[b - 1] for a, b in spans)

    rng = random.Random(0)
    for _ in range(30):
        lengths = sorted(rng.choice([1, 3, 8, 40, 120, 400]) for _ in range(rng.randint(1, 9)))
        spans = tagger.batches(lengths)
        assert spans[0][0] == 0 and spans[-1][1] == len(lengths) and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
        assert all(0 < b - a <= 4 for a, b in spans)
        every = [
            list(zip((0,) + cut, cut + (len(lengths),)))
            for k in range(len(lengths))
            for cut in itertools.combinations(range(1, len(lengths)), k)
        ]
        assert cost(spans, lengths) == min(cost(c, lengths) for c in every if all(b - a <= 4 for a, b in c))
    assert tagger.batches([5, 5, 5, 400]) == [(0, 3), (3, 4)]  # the long one alone: padding the others costs more
    assert len(tagger.batches([5] * 9)) == 3  # equal lengths: as few calls as fit
    assert Tagger(small_ner_model, device="cpu").call_words == CALL_COST_WORDS
    tagger.call_words = None  # a GPU's: full batches
    assert tagger.batches([5, 5, 5, 400, 400]) == [(0, 4), (4, 5)]
    tagger.call_words = CALL_COST_WORDS
    sentences = [(LINE.split() * rng.randint(1, 6))[: rng.randint(1, 40)] for _ in range(11)]
    alone = Tagger(small_ner_model, device="cpu", batch_size=1)
    assert [t for t, _ in tagger(sentences)] == [t for t, _ in alone(sentences)]


def test_quiet_shows_no_progress_bar_not_even_loading(small_ner_model, tmp_path):
    """`tag --quiet` writes the tags and its summary line, and no bar: not the file's, not the weights' loading."""
    import os
    import subprocess
    import sys

    (tmp_path / "in.txt").write_text(LINE + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}  # (the suite's own setting)
    stderr = {}
    for flags in ([], ["--quiet"]):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "vanilla_transformer.cli",
                "tag",
                str(small_ner_model),
                "--input",
                str(tmp_path / "in.txt"),
                "--output",
                str(tmp_path / "out.jsonl"),
                "--device",
                "cpu",
                *flags,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        stderr[tuple(flags)] = proc.stderr
    assert "Loading weights" in stderr[()] and "Loading weights" not in stderr["--quiet",]
    assert "it/s]" not in stderr["--quiet",] and "1 sentences in" in stderr["--quiet",]


def test_an_ensemble_of_a_tagger_with_itself_tags_as_the_tagger(small_ner_model, tagger):
    ensemble = Tagger(small_ner_model, ensemble_with=[small_ner_model], device="cpu")
    assert type(ensemble.model).__name__ == "TokenClassificationEnsemble"
    sentences = [LINE.split(), "Oslo welcomed Anna".split()]
    assert [t for t, _ in ensemble(sentences)] == [t for t, _ in tagger(sentences)]


def test_document_consistency_works_within_paragraphs():
    """With --document_consistency, a one-word mention of a name that a person mention of the same paragraph holds
    becomes a person; a blank line starts a new document, where it does not."""

    class Fixed:  # "Anna Novak ..." -> a person; "Novak ..." -> an organisation
        def __call__(self, sentences, progress=False):
            tags = [
                ["B-PER", "I-PER"] + ["O"] * (len(s) - 2)
                if s[:2] == ["Anna", "Novak"]
                else ["B-ORG"] + ["O"] * (len(s) - 1)
                if s
                else []
                for s in sentences
            ]
            return [(t, [1.0] * len(t)) for t in tags]

    types = lambda out: [[e["type"] for e in json.loads(line)] for line in out]  # noqa: E731
    assert types(tag_lines(Fixed(), ["Anna Novak came", "Novak left"], consistent=True)) == [["PER"], ["PER"]]
    assert types(tag_lines(Fixed(), ["Anna Novak came", "", "Novak left"], consistent=True)) == [["PER"], [], ["ORG"]]
    assert types(tag_lines(Fixed(), ["Anna Novak came", "Novak left"])) == [["PER"], ["ORG"]]


def test_the_command_tags_a_file_and_names_bad_input(small_ner_model, small_demo_model, tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text(LINE + "\n", encoding="utf-8")
    assert (
        cli(
            [
                "tag",
                str(small_ner_model),
                "--input",
                str(text),
                "--output",
                str(tmp_path / "out.jsonl"),
                "--quiet",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    assert [e["type"] for e in json.loads((tmp_path / "out.jsonl").read_text())] == ["PER", "ORG", "LOC"]
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")  # no lines in: none out, not an error
    for form in ("text", "conll"):
        assert (
            cli(
                [
                    "tag",
                    str(small_ner_model),
                    "--input",
                    str(tmp_path / "empty.txt"),
                    "--output",
                    str(tmp_path / "none.txt"),
                    "--format",
                    form,
                    "--quiet",
                ]
            )
            == 0
        )
        assert (tmp_path / "none.txt").read_text(encoding="utf-8") == ""
    (tmp_path / "bad.txt").write_bytes(b"Oslo\n\xff\xfe Anna\n")
    (tmp_path / "bad.conll").write_text("Oslo B-LOC\nAnna\n", encoding="utf-8")
    for argv, named in (
        (["tag", str(small_ner_model), "--input", str(tmp_path / "bad.txt")], "bad.txt, line 2"),
        (
            ["tag", str(small_ner_model), "--input", str(tmp_path / "bad.conll"), "--format", "conll"],
            "bad.conll, line 2: 1 columns",
        ),
        (["tag", str(small_demo_model), "--input", str(text)], "not a tagger"),
        (["tag", str(tmp_path / "missing"), "--input", str(text)], "missing"),
    ):
        capsys.readouterr()
        assert cli(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("vanilla-transformer tag: error:") and named in err[0], err
