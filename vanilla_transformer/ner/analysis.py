"""Honest NER numbers, for `vanilla-transformer ner-report`: F1 on entities whose words were seen in training against
those with a word never seen (the tuning split held out by document: `..data.splits`).

`read_predictions` reads a predictions file (`token gold predicted` a line, a blank line between sentences, as the
training command writes); `seen_unseen_report` gives precision, recall and F1 per entity type for all entities, the
seen ones and the unseen ones.
"""

from ..files import conll_sentences, read_lines


def read_predictions(path: str) -> list[tuple[list[str], list[str], list[str]]]:
    """(words, gold tags, predicted tags) per sentence of a `token gold predicted` file."""
    from ..data import iob1_to_iob2  # data.py imports `datasets`, a second: not for --help

    sentences = conll_sentences(read_lines(path), path, columns=3)  # token gold predicted
    return [
        ([p[0] for p in rows], iob1_to_iob2([p[1] for p in rows]), [p[2] for p in rows]) for _, rows, _ in sentences
    ]


def strict_spans(tags: list[str]) -> list[tuple[int, int, str]]:
    """Entities (start, end, type) as seqeval's strict IOB2 mode reads them, so the report agrees with the run's own
    F1: a B- tag starts one, I- tags of its type extend it; an I- tag that extends nothing is no entity."""
    spans = []
    for i, tag in enumerate(tags):
        if tag.startswith("B-"):
            spans.append((i, i + 1, tag[2:]))
        elif tag.startswith("I-") and spans and spans[-1][1] == i and spans[-1][2] == tag[2:]:
            spans[-1] = (spans[-1][0], i + 1, spans[-1][2])
    return spans


def scores(tp: int, n_pred: int, n_gold: int) -> dict:
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "gold": n_gold, "predicted": n_pred}


def seen_unseen_report(predictions_path: str, train_path: str) -> dict:
    """Strict entity scores (type and exact span) per group and type. An entity is "seen" when every one of its
    words occurs in the training file; gold and predicted entities are grouped by that same rule, so each group's
    precision counts the predictions that fall in it."""
    from ..data import load_conll

    vocabulary = {word for row in load_conll(train_path)["tokens"] for word in row}
    counts = {}  # (group, type) -> [true positives, predicted, gold]

    def add(kind, words, index):
        group = "seen" if all(w in vocabulary for w in words) else "unseen"
        for key in ((g, t) for g in ("all", group) for t in ("ALL", kind)):
            counts.setdefault(key, [0, 0, 0])[index] += 1

    for words, gold, pred in read_predictions(predictions_path):
        gold_spans, pred_spans = set(strict_spans(gold)), set(strict_spans(pred))
        for spans, index in ((gold_spans, 2), (pred_spans, 1), (gold_spans & pred_spans, 0)):
            for start, end, kind in spans:
                add(kind, words[start:end], index)
    report = {}
    for (group, kind), (tp, n_pred, n_gold) in sorted(counts.items()):
        report.setdefault(group, {})[kind] = scores(tp, n_pred, n_gold)
    gold_total = report.get("all", {}).get("ALL", {}).get("gold", 0)
    report["unseen_share"] = report.get("unseen", {}).get("ALL", {}).get("gold", 0) / gold_total if gold_total else 0.0
    return report


def format_report(report: dict) -> str:
    lines = [
        "| entities | type | precision | recall | F1 | gold | predicted |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for group in ("all", "seen", "unseen"):
        for kind, s in sorted(report.get(group, {}).items(), key=lambda item: (item[0] != "ALL", item[0])):
            lines.append(
                f"| {group} | {kind} | {s['precision']:.4f} | {s['recall']:.4f} | {s['f1']:.4f} | "
                f"{s['gold']} | {s['predicted']} |"
            )
    lines.append(f"\nGold entities with a word never seen in training: {report['unseen_share']:.1%}")
    return "\n".join(lines)
