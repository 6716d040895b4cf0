"""The shipped evaluate modules give the same numbers as sacrebleu and seqeval called directly."""

import pytest
import sacrebleu
from seqeval.metrics import f1_score, precision_score, recall_score
from seqeval.scheme import IOB2

from vanilla_transformer.evaluation import load_metric

HYPS = ["A dog runs in the park.", "Two cats sit on a mat", "The man is playing guitar ."]
REFS = ["A dog is running in the park.", "Two cats sit on the mat.", "A man plays the guitar."]


def test_bleu_chrf_match_sacrebleu():
    scores = load_metric("bleu_chrf").compute(predictions=HYPS, references=REFS)
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS]).score)
    assert scores["chrf"] == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score)
    assert "tok:13a" in scores["bleu_signature"] and "case:mixed" in scores["bleu_signature"]
    perfect = load_metric("bleu_chrf").compute(predictions=REFS, references=[[r] for r in REFS])
    assert perfect["bleu"] == pytest.approx(100.0)


def test_seqeval_matches_seqeval():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O", "B-MISC", "I-MISC"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O", "B-MISC", "O"]]
    scores = load_metric("seqeval_f1").compute(predictions=pred, references=gold)
    kw = dict(mode="strict", scheme=IOB2)
    assert scores["overall_f1"] == pytest.approx(f1_score(gold, pred, **kw))
    assert scores["overall_precision"] == pytest.approx(precision_score(gold, pred, **kw))
    assert scores["overall_recall"] == pytest.approx(recall_score(gold, pred, **kw))
    assert scores["PER"]["f1"] == 1.0 and scores["LOC"]["number"] == 1 and scores["LOC"]["f1"] == 0.0


def test_unknown_metric():
    with pytest.raises(ValueError, match="'rouge'"):
        load_metric("rouge")
