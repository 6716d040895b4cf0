"""Tagging data as `datasets.Dataset` rows `{"tokens": [...], "ner_tags": [...]}` with string tags in IOB2: CoNLL
column files (IOB1 or IOB2 in) and JSON lines, and sentences with their document's context. Bad data raises
`DataError` naming the file and line."""

import json

from datasets import Dataset

from ..files import DataError, conll_sentences, read_lines


def iob1_to_iob2(tags: list[str]) -> list[str]:
    """IOB1 starts an entity with I- unless it directly follows one of the same type; IOB2 always starts with B-."""
    out = []
    for i, tag in enumerate(tags):
        if tag.startswith("I-") and (i == 0 or tags[i - 1] == "O" or tags[i - 1][2:] != tag[2:]):
            tag = "B-" + tag[2:]
        out.append(tag)
    return out


def check_tag(tag: str, where: str) -> None:
    if tag != "O" and not (len(tag) > 2 and tag[:2] in ("B-", "I-")):
        raise DataError(f"{where}: tag {tag!r} is not O, B-TYPE or I-TYPE.")


def load_conll(path: str) -> Dataset:
    """CoNLL column files: one token per line, the tag in the last column, a blank line between sentences,
    `-DOCSTART-` lines start a new document (the `document` column counts them from 0). IOB1 or IOB2 in, IOB2 out.
    Every token line must have the same column count. Columns between the token and the tag (CoNLL-2003: POS and
    chunk) become `auxiliary_tags`: per word, the list of those columns' values."""
    sentences = conll_sentences(read_lines(path), path)
    if not sentences:
        raise DataError(f"{path}: no sentences.")
    for numbers, rows, _ in sentences:
        for number, parts in zip(numbers, rows):
            if len(parts) < 2:
                raise DataError(f"{path}, line {number + 1}: expected a token and a tag, got {' '.join(parts)!r}.")
            check_tag(parts[-1], f"{path}, line {number + 1}")
    first = sentences[0][2]  # -DOCSTART- lines before the first sentence start no document of their own
    columns = {
        "tokens": [[parts[0] for parts in rows] for _, rows, _ in sentences],
        "ner_tags": [iob1_to_iob2([parts[-1] for parts in rows]) for _, rows, _ in sentences],
        "document": [document - first for _, _, document in sentences],
    }
    if len(sentences[0][1][0]) > 2:
        columns["auxiliary_tags"] = [[parts[1:-1] for parts in rows] for _, rows, _ in sentences]
    return Dataset.from_dict(columns)


def around(column: list, before: int, i: int, after: int, num_words: int) -> tuple[list, int]:
    """(row i of `column` with the last `num_words` per-word items of rows [before, i) and the first `num_words` of
    rows (i, after), how many came before)."""
    left = [x for row in column[before:i] for x in row][-num_words:] if num_words else []
    return left + column[i] + [x for row in column[i + 1 : after] for x in row][:num_words], len(left)


def with_document_context(dataset: Dataset, num_words: int) -> Dataset:
    """Each sentence with up to `num_words` words of the neighbouring sentences of its document on either side (in
    the spirit of FLERT, Schweter & Akbik 2020). Columns: `tokens` (context + sentence + context), `ner_tags` (context
    tagged O) and `first`/`last`: the sentence's word span; `auxiliary_tags`, if any, spans the same words. Without a
    `document` column, sentences are their own documents."""
    if not isinstance(num_words, int) or num_words < 0:
        raise ValueError(f"The number of context words must be a non-negative integer, got {num_words!r}.")
    words, tags = dataset["tokens"], dataset["ner_tags"]
    docs = dataset["document"] if "document" in dataset.column_names else list(range(len(words)))
    aux = dataset["auxiliary_tags"] if "auxiliary_tags" in dataset.column_names else None
    out = {"tokens": [], "ner_tags": [], "first": [], "last": []} | ({"auxiliary_tags": []} if aux else {})
    for i, sentence in enumerate(words):
        before, count = i, 0  # sentences [before, i) hold `count` words
        while before > 0 and docs[before - 1] == docs[i] and count < num_words:
            before -= 1
            count += len(words[before])
        after, count = i + 1, 0
        while after < len(words) and docs[after] == docs[i] and count < num_words:
            count += len(words[after])
            after += 1

        out_words, first = around(words, before, i, after, num_words)
        out["tokens"].append(out_words)
        out["ner_tags"].append(["O"] * first + tags[i] + ["O"] * (len(out_words) - first - len(sentence)))
        out["first"].append(first)
        out["last"].append(first + len(sentence))
        if aux:
            out["auxiliary_tags"].append(around(aux, before, i, after, num_words)[0])
    return Dataset.from_dict(out)


def load_ner_jsonl(path: str) -> Dataset:
    """JSON lines `{"tokens": [...], "ner_tags": [...]}` with string tags (IOB1 or IOB2)."""
    tokens, tags = [], []
    for i, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            words, labels = [str(w) for w in row["tokens"]], [str(t) for t in row["ner_tags"]]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise DataError(f'{path}, line {i}: expected {{"tokens": [...], "ner_tags": [...]}} ({e}).') from None
        if len(words) != len(labels) or not words:
            raise DataError(f"{path}, line {i}: {len(words)} tokens but {len(labels)} tags.")
        for tag in labels:
            check_tag(tag, f"{path}, line {i}")
        tokens.append(words)
        tags.append(iob1_to_iob2(labels))
    if not tokens:
        raise DataError(f"{path}: no sentences.")
    return Dataset.from_dict({"tokens": tokens, "ner_tags": tags})


def load_ner_file(path: str) -> Dataset:
    """`.json`/`.jsonl` -> JSON lines, anything else -> CoNLL columns."""
    return load_ner_jsonl(path) if path.endswith((".json", ".jsonl")) else load_conll(path)
