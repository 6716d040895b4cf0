"""Trainer's `compute_metrics` of the three tasks: BLEU, chrF and exact match of translations (`TranslationScores`),
seqeval's entity scores of tags (`TagScores`), the share of masked words predicted right in pretraining
(`masked_accuracy`)."""

import numpy as np

from . import load_metric


class TranslationScores:
    """BLEU, chrF, exact match and generated length of decoded translations (Trainer's `compute_metrics`); the demo's
    strings are one unspaced "word" each, where BLEU's word n-grams say nothing: no BLEU there."""

    def __init__(self, tokenizer, demo: bool):
        self.tokenizer, self.demo, self.bleu_chrf = tokenizer, demo, load_metric("bleu_chrf")

    def token_rows(self, ids) -> list[list[int]]:
        """Generated/label ids -> lists of real token ids: drops -100, padding, the None fill that gathering uneven
        generations across processes can leave, and everything after the first end-of-sentence token (beam search
        fills finished hypotheses with it)."""
        rows, pad, eos = [], self.tokenizer.pad_token_id, self.tokenizer.eos_token_id
        for row in ids:
            tokens = [int(t) for t in row if t is not None and t >= 0 and t != pad]
            if eos in tokens:
                tokens = tokens[: tokens.index(eos) + 1]
            rows.append(tokens)
        return rows

    def decode(self, ids) -> list[str]:
        return [t.strip() for t in self.tokenizer.batch_decode(self.token_rows(ids), skip_special_tokens=True)]

    def __call__(self, eval_preds) -> dict:
        preds, labels = eval_preds
        preds = preds[0] if isinstance(preds, tuple) else preds
        hyps, refs = self.decode(preds), self.decode(labels)
        scores = self.bleu_chrf.compute(predictions=hyps, references=refs)
        metrics = {
            "bleu": scores["bleu"],
            "chrf": scores["chrf"],
            "exact_match": float(np.mean([h == r for h, r in zip(hyps, refs)])),
            "gen_len": float(np.mean([len(row) for row in self.token_rows(preds)])),
        }
        if self.demo:
            del metrics["bleu"]
        return metrics


class TagScores:
    """seqeval's entity scores of predicted word tags (Trainer's `compute_metrics`), and the word tags themselves."""

    def __init__(self, label_list: list[str]):
        self.label_list, self.seqeval = label_list, load_metric("seqeval_f1")

    def word_tags(self, predictions, labels):
        """(predicted, gold) tags of the labelled positions: the words."""
        preds = predictions.argmax(-1) if predictions.ndim == 3 else predictions
        keep = labels != -100
        return (
            [[self.label_list[p] for p in row[k]] for row, k in zip(preds, keep)],
            [[self.label_list[t] for t in row[k]] for row, k in zip(labels, keep)],
        )

    def scores(self, pred_tags, gold_tags) -> dict:
        scores = self.seqeval.compute(predictions=pred_tags, references=gold_tags)
        flat = {k: v for k, v in scores.items() if k.startswith("overall_")}
        for name, values in scores.items():
            if isinstance(values, dict):
                flat[f"{name}_f1"] = values["f1"]
        return {k.replace("overall_", ""): v for k, v in flat.items()}

    def __call__(self, eval_preds):
        return self.scores(*self.word_tags(*eval_preds))


def masked_accuracy(eval_preds) -> dict:
    """The share of masked words predicted right (the predictions are the argmax ids: preprocess_logits_for_metrics)."""
    predictions, labels = eval_preds
    keep = labels != -100
    return {"accuracy": float((predictions[keep] == labels[keep]).mean())}
