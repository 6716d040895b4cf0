"""Tuning splits held out from a training set, so that every choice is made without looking at validation (the
commands `split-documents` and `split-pairs`).

`split_documents` writes OUTPUT_DIR/train.txt and OUTPUT_DIR/tune.txt: whole documents (`-DOCSTART-` blocks) of a
CoNLL file. `split_pairs` writes OUTPUT_DIR/train.{SRC,TGT} and OUTPUT_DIR/tune.{SRC,TGT}: line pairs of the parallel
files PREFIX.SRC and PREFIX.TGT. Both hold out the same items for the same seed and keep the input's order in each
file. Tune on the tune files; score validation once, at the end.
"""

import os
import random

from ..files import DOCSTART, DataError, check_output_path, read_lines, refuse_overwriting, write_lines


def held_out(count: int, fraction: float, seed: int) -> set[int]:
    """The indices of `fraction` of `count` items (at least one, never all), drawn with `seed`."""
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be between 0 and 1, got {fraction}.")
    return set(random.Random(seed).sample(range(count), min(count - 1, max(1, round(fraction * count)))))


def split_outputs(output_dir: str, names, inputs) -> dict:
    """{name: OUTPUT_DIR/name} for the files a split writes, checked first: none of them is one of the `inputs` (by any
    spelling: links, `..`, case), and OUTPUT_DIR holds no finished model or checkpoints."""
    check_output_path(output_dir, "the output directory")
    paths = {name: os.path.join(output_dir, name) for name in names}
    refuse_overwriting(paths.values(), inputs, model_dirs=[output_dir])
    return paths


def check_language_codes(*codes: str) -> None:
    """Language codes name files (PREFIX.CODE): two different plain names, no path (`../x`, `a/b`) or blank."""
    for code in codes:
        if not code.strip() or code in (".", "..") or "/" in code or os.sep in code or code != code.strip():
            raise ValueError(f"the language code {code!r} is not a plain name (it names the files PREFIX.CODE).")
    if len(set(codes)) < len(codes):
        raise ValueError(f"--source_lang and --target_lang are both {codes[0]!r}: a pair needs two languages.")


def write_split(paths: dict, items: list, tune: set[int]) -> None:
    """`paths` {"train": path, "tune": path}: each file gets the lines of its items, in order."""
    for name, path in paths.items():
        write_lines(path, [line for i, item in enumerate(items) if (i in tune) == (name == "tune") for line in item])


def conll_documents(path: str) -> list[list[str]]:
    """The lines of a CoNLL file grouped by document: each group starts at a `-DOCSTART-` line."""
    lines = read_lines(path)
    starts = [i for i, line in enumerate(lines) if line.startswith(DOCSTART)]
    if not starts:
        raise DataError(f"{path}: no {DOCSTART} lines, so no documents to split by.")
    if any(line.strip() for line in lines[: starts[0]]):
        raise DataError(f"{path}, line 1: sentences before the first {DOCSTART} line belong to no document.")
    return [lines[a:b] for a, b in zip(starts, starts[1:] + [len(lines)])]


def split_documents(path: str, output_dir: str, fraction: float = 0.1, seed: int = 0) -> dict:
    """Hold out `fraction` of the documents (at least one, seeded) as tune.txt; the rest is train.txt."""
    outputs = split_outputs(output_dir, ("train.txt", "tune.txt"), [path])
    documents = conll_documents(path)
    if len(documents) < 2:
        raise DataError(f"{path}: one document only; a tuning split needs two or more.")
    tune = held_out(len(documents), fraction, seed)
    os.makedirs(output_dir, exist_ok=True)
    write_split({name: outputs[f"{name}.txt"] for name in ("train", "tune")}, documents, tune)
    return {"documents": len(documents), "tune_documents": len(tune), "train_documents": len(documents) - len(tune)}


def split_pairs(
    prefix: str, output_dir: str, source_lang: str, target_lang: str, fraction: float = 0.035, seed: int = 0
) -> dict:
    """Hold out `fraction` of the line pairs of PREFIX.SRC / PREFIX.TGT (at least one, seeded) as tune.{SRC,TGT}; the
    rest is train.{SRC,TGT}. Files that do not align are a DataError naming both."""
    check_language_codes(source_lang, target_lang)
    inputs = [f"{prefix}.{lang}" for lang in (source_lang, target_lang)]
    split_outputs(
        output_dir, [f"{name}.{lang}" for name in ("train", "tune") for lang in (source_lang, target_lang)], inputs
    )
    sides = {lang: read_lines(f"{prefix}.{lang}") for lang in (source_lang, target_lang)}
    (source, target) = sides.values()
    if len(source) != len(target):
        raise DataError(
            f"{prefix}.{source_lang} has {len(source)} lines but {prefix}.{target_lang} has "
            f"{len(target)}: parallel files must align."
        )
    if len(source) < 2:
        raise DataError(f"{prefix}.{source_lang}: one pair only; a tuning split needs two or more.")
    tune = held_out(len(source), fraction, seed)
    os.makedirs(output_dir, exist_ok=True)
    for lang, lines in sides.items():
        paths = {name: os.path.join(output_dir, f"{name}.{lang}") for name in ("train", "tune")}
        write_split(paths, [[line] for line in lines], tune)
    return {"pairs": len(source), "tune_pairs": len(tune), "train_pairs": len(source) - len(tune)}
