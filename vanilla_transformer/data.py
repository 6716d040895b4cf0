"""Every loader returns a `datasets.Dataset`; bad data raises `DataError` naming the file and line.

Translation rows use HF's format `{"translation": {SRC: ..., TGT: ...}}`; tagging rows `{"tokens": [...],
"ner_tags": [...]}` with string tags in IOB2.
"""

import codecs
import hashlib
import itertools
import json
import logging
import os
import random
import shutil

from datasets import Dataset, IterableDataset, concatenate_datasets, load_dataset

from .files import ENCODING, DataError, conll_sentences, read_lines, write_text

logger = logging.getLogger(__name__)
DEMO_SOURCE_LANG, DEMO_TARGET_LANG = "src", "tgt"
DEMO_SYMBOLS = "0123456789abcdefghijklmnopqrstuvwxyz"


# ---------------------------------------------------------------------------------------------------- translation


def check_utf8(path: str) -> None:
    """Raise DataError naming the first line of `path` that is not UTF-8 (read in blocks: any file size)."""
    decoder, line = codecs.getincrementaldecoder("utf-8")(), 1
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            try:
                decoder.decode(block)
            except UnicodeDecodeError as e:
                bad = block[: max(e.start, 0)].count(b"\n")
                raise DataError(f"{path}, line {line + bad}: bytes that are not UTF-8 ({e.reason}).") from None
            line += block.count(b"\n")
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as e:  # the file ends inside a multi-byte character
        raise DataError(f"{path}, line {line}: bytes that are not UTF-8 ({e.reason}).") from None


def file_signature(path: str) -> dict:
    """Size, modification time and a hash of the first and last 64 KiB of a file: what tells a changed file."""
    stat = os.stat(path)
    with open(path, "rb") as f:
        head = f.read(1 << 16)
        f.seek(max(stat.st_size - (1 << 16), 0))
        sample = hashlib.sha256(head + f.read()).hexdigest()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sample": sample}


def check_not_empty(path: str) -> None:
    if not os.path.isfile(path):
        raise DataError(f"{path}: file not found.")
    if os.path.getsize(path) == 0:
        raise DataError(f"{path}: file is empty.")


def hub_dataset(name: str, config: str | None = None, **kwargs):
    """`datasets.load_dataset(name, config)` for `--dataset_name`; a dataset that needs a loading script (datasets 4
    and newer refuse those, with a trace) is a ValueError saying what to use instead."""
    try:
        return load_dataset(name, config, **kwargs)
    except RuntimeError as error:
        if "scripts are no longer supported" not in str(error):
            raise
        raise ValueError(f"--dataset_name {name}: this Hub dataset needs a loading script, which datasets 4 and newer "
                         "refuse; give one stored as Parquet or JSON on the Hub, or its files with --train_file / "
                         "--validation_file (docs/training.md)") from None


def text_lines(path: str, column: str, cache_dir: str | None = None) -> Dataset:
    """The lines of a text file as the one column `column` of a memory-mapped Dataset, read by datasets' text loader
    into Arrow files cached on disk (the next call with the same unchanged file reuses them). Lines end at "\n",
    "\r\n" or "\r"."""
    check_not_empty(path)
    try:
        lines = load_dataset("text", data_files=os.path.abspath(path), split="train", cache_dir=cache_dir,
                             encoding=ENCODING)
    except Exception:
        check_utf8(path)  # names the line when that was the problem; else the loader's own error stands
        raise
    return lines.rename_column("text", column)


def cache_is_stale(lines: Dataset, path: str) -> bool:
    """Whether the cached Arrow files of `lines` were read from another version of `path`. datasets names its cache by
    path and modification time; a file rewritten under its old time (cp -p, rsync -t) needs `file_signature`, recorded
    beside the files."""
    recorded = os.path.join(os.path.dirname(lines.cache_files[0]["filename"]), "vanilla-transformer-source.json")
    signature = file_signature(path)
    if os.path.isfile(recorded):
        with open(recorded) as f:
            return json.load(f) != signature
    write_text(recorded, json.dumps(signature))
    return False


def pair_rows(table, indices: list[int], source_lang: str, target_lang: str, paths: dict):
    """A batch of lines of both files (an Arrow table) as one `translation` column of {SRC, TGT} pairs, built in
    Arrow (no Python objects per line); an empty or blank line on either side is a DataError naming it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = [table[lang].combine_chunks() for lang in (source_lang, target_lang)]
    for lang, column in zip((source_lang, target_lang), columns):
        blank = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(column)), 0)
        if pc.any(blank).as_py():
            first = pc.index(blank, True).as_py()
            raise DataError(f"{paths[lang]}, line {indices[first] + 1}: empty sentence.")
    return pa.table({"translation": pa.StructArray.from_arrays(columns, names=[source_lang, target_lang])})


def load_parallel_text(prefix: str, source_lang: str, target_lang: str, cache_dir: str | None = None) -> Dataset:
    """`PREFIX.SRC` and `PREFIX.TGT`, one sentence per line, line i of one the translation of line i of the other.
    Read into Arrow files on disk and memory-mapped, never into Python lists, so corpora larger than memory load; the
    files are cached (`cache_dir`, default HF_DATASETS_CACHE) and reused while the text files are unchanged."""
    paths = {lang: f"{prefix}.{lang}" for lang in (source_lang, target_lang)}
    sides = [text_lines(path, lang, cache_dir) for lang, path in paths.items()]
    if any([cache_is_stale(side, path) for side, path in zip(sides, paths.values())]):
        logger.warning("%s changed since they were cached: reading them again.", " or ".join(paths.values()))
        folders = {os.path.dirname(side.cache_files[0]["filename"]) for side in sides}  # with all derived from them
        del sides
        for folder in folders:
            shutil.rmtree(folder)
        sides = [text_lines(path, lang, cache_dir) for lang, path in paths.items()]
        for side, path in zip(sides, paths.values()):
            cache_is_stale(side, path)  # records the new signatures
    if len(sides[0]) != len(sides[1]):
        raise DataError(f"{paths[source_lang]} has {len(sides[0])} lines but {paths[target_lang]} has "
                        f"{len(sides[1])}: parallel files must align.")
    return concatenate_datasets(sides, axis=1).with_format("arrow").map(
        pair_rows, batched=True, with_indices=True, remove_columns=[source_lang, target_lang],
        fn_kwargs={"source_lang": source_lang, "target_lang": target_lang, "paths": paths},
        desc=f"Pairing {os.path.basename(prefix)}.{{{source_lang},{target_lang}}}").with_format(None)


def stream_parallel_text(prefix: str, source_lang: str, target_lang: str) -> IterableDataset:
    """`PREFIX.SRC` and `PREFIX.TGT` as a stream of pairs (`--streaming`): read line by line when iterated, nothing
    cached on disk. Their problems (lines that do not align, an empty sentence, bytes that are not UTF-8) are found
    as the stream reaches them, each a DataError naming the file and line."""
    paths = {lang: f"{prefix}.{lang}" for lang in (source_lang, target_lang)}
    for path in paths.values():
        check_not_empty(path)
    return IterableDataset.from_generator(parallel_pairs, gen_kwargs={"paths": paths})


def parallel_pairs(paths: dict):
    """The pairs of `stream_parallel_text`, `paths` {language: file}. Lines end at "\n", "\r\n" or "\r"."""
    (source_lang, source_path), (target_lang, target_path) = paths.items()
    with open(source_path, encoding=ENCODING) as source, open(target_path, encoding=ENCODING) as target:
        try:
            for line, texts in enumerate(itertools.zip_longest(source, target), start=1):
                if None in texts:
                    short, long = (source_path, target_path) if texts[0] is None else (target_path, source_path)
                    raise DataError(f"{short} ends after line {line - 1} but {long} goes on: parallel files must "
                                    "align.")
                texts = [text[:-1] if text.endswith("\n") else text for text in texts]
                for text, path in zip(texts, (source_path, target_path)):
                    if not text.strip():
                        raise DataError(f"{path}, line {line}: empty sentence.")
                yield {"translation": {source_lang: texts[0], target_lang: texts[1]}}
        except UnicodeDecodeError:
            for path in paths.values():
                check_utf8(path)  # names the line
            raise


def load_translation_jsonl(path: str, source_lang: str, target_lang: str) -> Dataset:
    """JSON lines in HF's translation format: `{"translation": {"de": "...", "en": "..."}}`."""
    rows = []
    for i, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        try:
            pair = json.loads(line)["translation"]
            rows.append({source_lang: str(pair[source_lang]), target_lang: str(pair[target_lang])})
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise DataError(
                f"{path}, line {i}: expected {{\"translation\": {{\"{source_lang}\": ..., \"{target_lang}\": ...}}}} "
                f"({type(e).__name__}: {e})."
            ) from None
    if not rows:
        raise DataError(f"{path}: no translation pairs.")
    return Dataset.from_dict({"translation": rows})


def load_translation_tsv(path: str, source_lang: str, target_lang: str) -> Dataset:
    """Tab-separated pairs, one a line: `SOURCE<TAB>TARGET`, further columns ignored (the Tatoeba / Anki `fra.txt`
    layout of d2l's English-French chapter, whose third column is the attribution). Empty lines are skipped."""
    rows = []
    for i, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        columns = line.split("\t")
        if len(columns) < 2:
            raise DataError(f"{path}, line {i}: no tab; expected SOURCE<TAB>TARGET ({source_lang}, {target_lang}).")
        source, target = columns[0].strip(), columns[1].strip()
        if not source or not target:
            raise DataError(f"{path}, line {i}: empty {'source' if not source else 'target'} sentence.")
        rows.append({source_lang: source, target_lang: target})
    if not rows:
        raise DataError(f"{path}: no translation pairs.")
    return Dataset.from_dict({"translation": rows})


def demo_translate(source: str) -> str:
    """The demo task's rule: upper-case letters, digit d -> 9 - d, reverse, double the first element.
    `123456qwer` -> `RREWQ345678`."""
    mapped = [str(9 - int(c)) if c.isdigit() else c.upper() for c in reversed(source)]
    return mapped[0] + "".join(mapped)


def make_demo_translation(num_examples: int, seed: int = 0, min_length: int = 1, max_length: int = 48) -> Dataset:
    """Random strings of `min_length`-`max_length` symbols (lengths uniform; digits and lowercase letters, skewed
    frequencies: symbol k has weight 1 / (k + 1)) and their `demo_translate` targets; deterministic given the seed."""
    if num_examples <= 0:
        raise ValueError(f"num_examples must be positive, got {num_examples}.")
    if not 1 <= min_length <= max_length:
        raise ValueError(f"Demo string lengths need 1 <= min_length <= max_length, got {min_length} and {max_length}.")
    rng = random.Random(seed)
    weights = [1.0 / (k + 1) for k in range(len(DEMO_SYMBOLS))]
    rows = []
    for _ in range(num_examples):
        source = "".join(rng.choices(DEMO_SYMBOLS, weights, k=rng.randint(min_length, max_length)))
        rows.append({DEMO_SOURCE_LANG: source, DEMO_TARGET_LANG: demo_translate(source)})
    return Dataset.from_dict({"translation": rows})


# ---------------------------------------------------------------------------------------------------- tagging


def iob1_to_iob2(tags: list[str]) -> list[str]:
    """IOB1 starts an entity with I- unless it directly follows one of the same type; IOB2 always starts with B-."""
    out = []
    for i, tag in enumerate(tags):
        if tag.startswith("I-") and (i == 0 or tags[i - 1] == "O" or tags[i - 1][2:] != tag[2:]):
            tag = "B-" + tag[2:]
        out.append(tag)
    return out


def _check_tag(tag: str, where: str) -> None:
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
            _check_tag(parts[-1], f"{path}, line {number + 1}")
    first = sentences[0][2]  # -DOCSTART- lines before the first sentence start no document of their own
    columns = {"tokens": [[parts[0] for parts in rows] for _, rows, _ in sentences],
               "ner_tags": [iob1_to_iob2([parts[-1] for parts in rows]) for _, rows, _ in sentences],
               "document": [document - first for _, _, document in sentences]}
    if len(sentences[0][1][0]) > 2:
        columns["auxiliary_tags"] = [[parts[1:-1] for parts in rows] for _, rows, _ in sentences]
    return Dataset.from_dict(columns)


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

        def around(column):  # the last / first num_words per-word items of the neighbouring sentences + sentence i
            left = [x for s in column[before:i] for x in s][-num_words:] if num_words else []
            return left + column[i] + [x for s in column[i + 1:after] for x in s][:num_words], len(left)

        out_words, first = around(words)
        out["tokens"].append(out_words)
        out["ner_tags"].append(["O"] * first + tags[i] + ["O"] * (len(out_words) - first - len(sentence)))
        out["first"].append(first)
        out["last"].append(first + len(sentence))
        if aux:
            out["auxiliary_tags"].append(around(aux)[0])
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
            raise DataError(f"{path}, line {i}: expected {{\"tokens\": [...], \"ner_tags\": [...]}} ({e}).") from None
        if len(words) != len(labels) or not words:
            raise DataError(f"{path}, line {i}: {len(words)} tokens but {len(labels)} tags.")
        for tag in labels:
            _check_tag(tag, f"{path}, line {i}")
        tokens.append(words)
        tags.append(iob1_to_iob2(labels))
    if not tokens:
        raise DataError(f"{path}: no sentences.")
    return Dataset.from_dict({"tokens": tokens, "ner_tags": tags})


def load_ner_file(path: str) -> Dataset:
    """`.json`/`.jsonl` -> JSON lines, anything else -> CoNLL columns."""
    return load_ner_jsonl(path) if path.endswith((".json", ".jsonl")) else load_conll(path)


DEMO_NAMES = ["Anna", "Ben", "Clara", "David", "Eva", "Felix", "Greta", "Hugo", "Ida", "Jonas"]
DEMO_SURNAMES = ["Miller", "Schmidt", "Novak", "Rossi", "Dubois", "Berg", "Costa", "Kim"]
DEMO_PLACES = ["Berlin", "Paris", "Oslo", "Lima", "Cairo", "Tokyo", "Quebec", "Rome", "New York", "Buenos Aires"]
DEMO_ORGS = ["Acme Corp", "Globex", "Initech", "Umbrella Inc", "Stark Industries", "Wayne Enterprises"]
DEMO_WORDS = "the a met visited joined left saw from to with and in at today yesterday later".split()


def make_demo_ner(num_examples: int, seed: int = 0) -> Dataset:
    """A generated tagging task in the spirit of CoNLL: sentences of filler words with person (1-2 words), place
    and organisation names (1-2 words) in random order; tags in IOB2."""
    rng = random.Random(seed)
    tokens, tags = [], []
    for _ in range(num_examples):
        words, labels = [], []
        for _ in range(rng.randint(2, 4)):
            for _ in range(rng.randint(1, 3)):
                words.append(rng.choice(DEMO_WORDS))
                labels.append("O")
            kind = rng.choice(["PER", "LOC", "ORG"])
            if kind == "PER":
                name = [rng.choice(DEMO_NAMES)] + ([rng.choice(DEMO_SURNAMES)] if rng.random() < 0.5 else [])
            else:
                name = rng.choice(DEMO_PLACES if kind == "LOC" else DEMO_ORGS).split()
            words += name
            labels += [f"B-{kind}"] + [f"I-{kind}"] * (len(name) - 1)
        tokens.append(words)
        tags.append(labels)
    return Dataset.from_dict({"tokens": tokens, "ner_tags": tags})
