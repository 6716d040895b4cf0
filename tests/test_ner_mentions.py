"""Entity mentions, document consistency and mention replacement (vanilla_transformer.ner)."""

import pytest
from datasets import Dataset

from vanilla_transformer import data
from vanilla_transformer.ner import mentions
from vanilla_transformer.ner.augmentation import MentionReplacement


def test_mention_spans():
    assert mentions.mention_spans(["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-ORG"]) == [
        (0, 2, "PER"),
        (3, 4, "LOC"),
        (4, 5, "LOC"),
        (5, 6, "ORG"),
    ]


def test_document_consistency_gives_a_name_one_type_within_a_document():
    tokens = [
        ["Magna", "rose", "."],
        ["Magna", "'s", "chief", "Ann", "Lee"],
        ["Magna", "fell"],
        ["Ann", "Lee", "Ann"],
        ["Magna", "rose"],
    ]
    tags = [
        ["B-ORG", "O", "O"],
        ["B-PER", "O", "O", "B-PER", "I-PER"],
        ["B-ORG", "O"],
        ["O", "O", "B-LOC"],
        ["B-PER", "O"],
    ]
    documents = [0, 0, 0, 0, 1]
    fixed = mentions.document_consistency(tokens, tags, documents)
    assert fixed[:3] == [["B-ORG", "O", "O"], ["B-ORG", "O", "O", "B-PER", "I-PER"], ["B-ORG", "O"]]  # 2 ORG : 1 PER
    assert fixed[3] == ["B-PER", "I-PER", "B-PER"]  # an untagged "Ann Lee" tagged (the longer sequence first), and
    # the lone "Ann" is a word of a person mention of the document
    assert fixed[4] == ["B-PER", "O"]  # another document keeps its own
    assert tags[1][0] == "B-PER"  # the input is not modified
    tie = mentions.document_consistency([["Ulm", "x"], ["Ulm"], ["Ulm"]], [["B-LOC", "O"], ["B-ORG"], ["O"]], [0, 0, 0])
    assert tie == [["B-LOC", "O"], ["B-ORG"], ["B-LOC"]]  # a tie keeps each mention's type; untagged: the first's
    # a one-word mention that is a capitalised word of a longer person mention is that person; not so for other types
    tokens = [["Jeffrey", "Lurie", "of", "Bank", "of", "Spain"], ["Lurie", "and", "Spain", "and", "of"]]
    tags = [["B-PER", "I-PER", "O", "B-ORG", "I-ORG", "I-ORG"], ["B-ORG", "O", "B-LOC", "O", "B-MISC"]]
    assert mentions.document_consistency(tokens, tags, [0, 0])[1] == ["B-PER", "O", "B-LOC", "O", "B-MISC"]
    # without documents each sentence is its own
    assert mentions.document_consistency([["Ulm"], ["Ulm"]], [["B-LOC"], ["O"]], range(2)) == [["B-LOC"], ["O"]]


def test_mention_replacement_swaps_mentions_of_the_same_type_inside_the_sentence():
    rows = Dataset.from_dict(
        {
            "tokens": [["ctx", "Anna", "Lee", "met", "Bob", "in", "Rome", "ctx2"], ["Ulm", "is", "small"]],
            "ner_tags": [["B-LOC", "B-PER", "I-PER", "O", "B-PER", "O", "B-LOC", "O"], ["B-LOC", "O", "O"]],
            "first": [1, 0],
            "last": [7, 3],
        }
    )
    aug = MentionReplacement(rows, lambda w, t, first, last, aux: (w, t, first, last), prob=1.0, seed=0)
    assert len(aug) == 2
    assert sorted(tuple(w) for w, _ in aug.pool["PER"]) == [("Anna", "Lee"), ("Bob",)]  # context words: no mentions
    assert sorted(tuple(w) for w, _ in aug.pool["LOC"]) == [("Rome",), ("Ulm",)]
    seen = set()
    for _ in range(30):
        words, tags, first, last = aug[0]
        assert (words[0], tags[0], first, words[-1], tags[-1]) == ("ctx", "B-LOC", 1, "ctx2", "O")  # context kept
        assert last == len(words) - 1
        spans = mentions.mention_spans(tags[first:last])
        assert [kind for *_, kind in spans] == ["PER", "PER", "LOC"]
        assert [w for w, t in zip(words[first:last], tags[first:last]) if t == "O"] == ["met", "in"]
        seen.add(" ".join(words[first:last]))
    assert len(seen) > 4  # a new draw at every access
    assert MentionReplacement(rows, lambda *a: a, prob=0.0)[0] == (*rows[0].values(), None)
    with pytest.raises(ValueError, match="probability"):
        MentionReplacement(rows, lambda *a: a, prob=1.5)


def test_auxiliary_columns_follow_their_words(tmp_path):
    """CoNLL's middle columns (POS, chunk) ride along through document context and mention replacement."""
    path = tmp_path / "train.txt"
    path.write_text(
        "-DOCSTART- -X- -X- O\n\nAnna NNP B-NP B-PER\nLee NNP I-NP I-PER\nsings VBZ B-VP O\n\n"
        "Bob NNP B-NP B-PER\nruns VBZ B-VP O\n"
    )
    ds = data.load_conll(str(path))
    assert ds["auxiliary_tags"][1] == [["NNP", "B-NP"], ["VBZ", "B-VP"]]
    ctx = data.with_document_context(ds, 2)
    assert ctx["tokens"][1] == ["Lee", "sings", "Bob", "runs"]
    assert ctx["auxiliary_tags"][1] == [["NNP", "I-NP"], ["VBZ", "B-VP"], ["NNP", "B-NP"], ["VBZ", "B-VP"]]
    aug = MentionReplacement(ctx, lambda *a: a, prob=1.0, seed=0)
    for _ in range(20):
        words, tags, first, last, aux = aug[1]
        assert len(aux) == len(words) == len(tags)
        assert aux[-1] == ["VBZ", "B-VP"] and aux[:2] == [["NNP", "I-NP"], ["VBZ", "B-VP"]]  # context kept
        assert (words[first : last - 1], aux[first : last - 1]) in (
            (["Bob"], [["NNP", "B-NP"]]),
            (["Anna", "Lee"], [["NNP", "B-NP"], ["NNP", "I-NP"]]),
        )
    two_columns = tmp_path / "plain.txt"
    two_columns.write_text("Anna B-PER\n")
    assert "auxiliary_tags" not in data.load_conll(str(two_columns)).column_names
