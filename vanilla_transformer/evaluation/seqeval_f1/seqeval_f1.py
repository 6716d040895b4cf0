"""Entity-level precision / recall / F1 (CoNLL scoring through seqeval, IOB2) as an `evaluate` metric, shipped with
the package because the Hub's `seqeval` metric script cannot be downloaded offline."""

import datasets
import evaluate
from seqeval.metrics import accuracy_score, classification_report
from seqeval.scheme import IOB2

_DESCRIPTION = "seqeval entity-level scores; strict IOB2 matching by default (mode='strict')."
_KWARGS = """predictions, references: list of list of str tags. mode: 'strict' (default) or None (conlleval-style).
Returns overall_precision, overall_recall, overall_f1, overall_accuracy and, per entity type, precision, recall,
f1 and number."""


class SeqevalF1(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="Nakayama, 2018. seqeval: A Python framework for sequence labeling evaluation.",
            inputs_description=_KWARGS,
            features=datasets.Features(
                {
                    "predictions": datasets.Sequence(datasets.Value("string")),
                    "references": datasets.Sequence(datasets.Value("string")),
                }
            ),
        )

    def _compute(self, predictions, references, mode="strict"):
        kwargs = {"mode": "strict", "scheme": IOB2} if mode == "strict" else {}
        report = classification_report(references, predictions, output_dict=True, zero_division=0, **kwargs)
        scores = {}
        for name, values in report.items():
            if name in ("micro avg", "macro avg", "weighted avg"):
                continue
            scores[name] = {
                "precision": float(values["precision"]),
                "recall": float(values["recall"]),
                "f1": float(values["f1-score"]),
                "number": int(values["support"]),
            }
        micro = report["micro avg"]
        scores.update(
            overall_precision=float(micro["precision"]),
            overall_recall=float(micro["recall"]),
            overall_f1=float(micro["f1-score"]),
            overall_accuracy=float(accuracy_score(references, predictions)),
        )
        return scores
