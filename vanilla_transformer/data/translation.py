"""Translation data as `datasets.Dataset` rows in HF's format `{"translation": {SRC: ..., TGT: ...}}`: parallel text
files (memory-mapped Arrow, cached, or streamed), JSON lines and tab-separated pairs. Bad data raises `DataError`
naming the file and line."""

import hashlib
import itertools
import json
import logging
import os
import shutil

from datasets import Dataset, IterableDataset, concatenate_datasets, load_dataset

from ..files import ENCODING, DataError, check_utf8, read_json, read_lines, require_file, write_text

logger = logging.getLogger(__name__)


def file_signature(path: str) -> dict:
    """Size, modification time and a hash of the first and last 64 KiB of a file: what tells a changed file."""
    stat = os.stat(path)
    with open(path, "rb") as f:
        head = f.read(1 << 16)
        f.seek(max(stat.st_size - (1 << 16), 0))
        sample = hashlib.sha256(head + f.read()).hexdigest()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sample": sample}


def text_lines(path: str, column: str, cache_dir: str | None = None) -> Dataset:
    """The lines of a text file as the one column `column` of a memory-mapped Dataset, read by datasets' text loader
    into Arrow files cached on disk (the next call with the same unchanged file reuses them). Lines end at "\n",
    "\r\n" or "\r"."""
    require_file(path)
    try:
        lines = load_dataset(
            "text", data_files=os.path.abspath(path), split="train", cache_dir=cache_dir, encoding=ENCODING
        )
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
        return read_json(recorded) != signature
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
        raise DataError(
            f"{paths[source_lang]} has {len(sides[0])} lines but {paths[target_lang]} has "
            f"{len(sides[1])}: parallel files must align."
        )
    return (
        concatenate_datasets(sides, axis=1)
        .with_format("arrow")
        .map(
            pair_rows,
            batched=True,
            with_indices=True,
            remove_columns=[source_lang, target_lang],
            fn_kwargs={"source_lang": source_lang, "target_lang": target_lang, "paths": paths},
            desc=f"Pairing {os.path.basename(prefix)}.{{{source_lang},{target_lang}}}",
        )
        .with_format(None)
    )


def stream_parallel_text(prefix: str, source_lang: str, target_lang: str) -> IterableDataset:
    """`PREFIX.SRC` and `PREFIX.TGT` as a stream of pairs (`--streaming`): read line by line when iterated, nothing
    cached on disk. Their problems (lines that do not align, an empty sentence, bytes that are not UTF-8) are found
    as the stream reaches them, each a DataError naming the file and line."""
    paths = {lang: f"{prefix}.{lang}" for lang in (source_lang, target_lang)}
    for path in paths.values():
        require_file(path)
    return IterableDataset.from_generator(parallel_pairs, gen_kwargs={"paths": paths})


def parallel_pairs(paths: dict):
    """The pairs of `stream_parallel_text`, `paths` {language: file}. Lines end at "\n", "\r\n" or "\r"."""
    (source_lang, source_path), (target_lang, target_path) = paths.items()
    with open(source_path, encoding=ENCODING) as source, open(target_path, encoding=ENCODING) as target:
        try:
            for line, texts in enumerate(itertools.zip_longest(source, target), start=1):
                if None in texts:
                    short, long = (source_path, target_path) if texts[0] is None else (target_path, source_path)
                    raise DataError(
                        f"{short} ends after line {line - 1} but {long} goes on: parallel files must align."
                    )
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
                f'{path}, line {i}: expected {{"translation": {{"{source_lang}": ..., "{target_lang}": ...}}}} '
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


def load_translation_file(path: str, src: str, tgt: str, cache_dir: str | None = None):
    """A file of pairs by its name: JSON lines (.json, .jsonl), tab-separated (.tsv, .txt), else a parallel-text
    prefix (PATH.SRC and PATH.TGT)."""
    if path.endswith((".json", ".jsonl")):
        return load_translation_jsonl(path, src, tgt)
    if path.endswith((".tsv", ".txt")):
        return load_translation_tsv(path, src, tgt)
    return load_parallel_text(path, src, tgt, cache_dir)
