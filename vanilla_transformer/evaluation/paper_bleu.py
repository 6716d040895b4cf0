"""Scores of a translation file against its reference file: sacreBLEU (cased, detokenized, 13a: the comparable
number) and the paper's own metric, tokenized BLEU with compound splitting (tensor2tensor's `get_ende_bleu.sh`, the
script behind the paper's WMT14 English-German 27.3 / 28.4): both sides tokenized with the Moses tokenizer, every
hyphen between two non-spaces split off as `##AT##-##AT##`, then BLEU over those tokens (multi-bleu.perl). Tokenized
BLEU depends on the tokenization and is not comparable with sacreBLEU; report both.

(`vanilla-transformer score`: commands/score.py.)
"""

import re

import sacrebleu

COMPOUND_HYPHEN = re.compile(r"(\S)-(\S)")


def moses_compound_split(lines: list[str], lang: str) -> list[str]:
    try:
        from sacremoses import MosesTokenizer
    except ImportError:
        raise ImportError(
            "The paper's tokenized BLEU needs the Moses tokenizer: pip install 'vanilla-transformer[wmt]' (sacremoses)."
        ) from None
    tokenizer = MosesTokenizer(lang=lang)
    split = []
    for line in lines:
        tokens = tokenizer.tokenize(line, return_str=True, escape=False)
        split.append(COMPOUND_HYPHEN.sub(r"\1 ##AT##-##AT## \2", tokens))  # once, as the script's perl line
    return split


def score(hypotheses: list[str], references: list[str], lang: str) -> dict:
    """sacreBLEU and the paper's tokenized, compound-split BLEU of `hypotheses` against `references` (one each); without
    sacremoses (the `wmt` extra) sacreBLEU alone and a `note` saying what the paper's BLEU needs."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} translations but {len(references)} references: one reference a line.")
    detokenized = sacrebleu.metrics.BLEU()
    sacre = detokenized.corpus_score(hypotheses, [references])
    result = {
        "sacrebleu": sacre.score,
        "sacrebleu_signature": str(detokenized.get_signature()),
        "sentences": len(hypotheses),
    }
    try:
        split = moses_compound_split(hypotheses, lang), [moses_compound_split(references, lang)]
    except ImportError as error:  # sacreBLEU alone; the paper's BLEU needs the wmt extra
        return {**result, "note": str(error)}
    tokenized = sacrebleu.metrics.BLEU(tokenize="none", force=True).corpus_score(*split)
    return {**result, "tokenized_bleu_compound_split": tokenized.score}
