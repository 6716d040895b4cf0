"""sacreBLEU BLEU (cased, detokenized, 13a tokenization) and chrF as one `evaluate` metric, shipped with the package
because the Hub's `sacrebleu` / `chrf` metric scripts cannot be downloaded offline."""

import datasets
import evaluate
import sacrebleu

_DESCRIPTION = "Corpus BLEU (sacreBLEU defaults: 13a, cased) and chrF over detokenized text; one reference per line."
_KWARGS = """predictions: list of str; references: list of str or list of list of str.
Returns {"bleu": float, "chrf": float, "bleu_signature": str, "precisions": list, "brevity_penalty": float,
"sys_len": int, "ref_len": int}, and what the Hub's `sacrebleu` metric returns ("score" = "bleu", "counts",
"totals", "bp"), so code written for `evaluate.load("sacrebleu")` reads it unchanged."""


class BleuChrf(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="Post, 2018. A Call for Clarity in Reporting BLEU Scores.",
            inputs_description=_KWARGS,
            features=[
                datasets.Features(
                    {"predictions": datasets.Value("string"), "references": datasets.Sequence(datasets.Value("string"))}
                ),
                datasets.Features({"predictions": datasets.Value("string"), "references": datasets.Value("string")}),
            ],
        )

    def _compute(self, predictions, references):
        refs = [[r] if isinstance(r, str) else list(r) for r in references]
        n_refs = len(refs[0]) if refs else 1
        if any(len(r) != n_refs for r in refs):
            raise ValueError("Every prediction needs the same number of references.")
        streams = [[r[i] for r in refs] for i in range(n_refs)]
        bleu = sacrebleu.metrics.BLEU()
        score = bleu.corpus_score(predictions, streams)
        chrf = sacrebleu.metrics.CHRF().corpus_score(predictions, streams)
        return {
            "bleu": score.score,
            "chrf": chrf.score,
            "bleu_signature": str(bleu.get_signature()),
            "precisions": list(score.precisions),
            "brevity_penalty": score.bp,
            "sys_len": score.sys_len,
            "ref_len": score.ref_len,
            "score": score.score,
            "counts": list(score.counts),
            "totals": list(score.totals),
            "bp": score.bp,
        }
