"""Text files, the one way every command reads and writes them: UTF-8 lines, written atomically, and CoNLL columns.

A line ends at "\\n", "\\r\\n" or "\\r" (Python's universal newlines, as `datasets`' text loader reads a corpus); other
Unicode separators (U+2028, form feeds, ...) stay inside the line, so a sentence holding one is still one line in and
one line out. A byte-order mark opening a file is no part of its first line (`ENCODING`). Bad bytes raise `DataError`
naming the file and line.
"""

import codecs
import json
import os
import re
import shutil
import sys
import tempfile
from contextlib import contextmanager

LINE_END = re.compile(r"\r\n|\r|\n")
ENCODING = "utf-8-sig"  # UTF-8, where a leading byte-order mark (as Notepad writes) is read as no text
DOCSTART = "-DOCSTART-"


class DataError(ValueError):
    """Bad input data; the message names the file (and line) and what is wrong."""


def split_lines(text: str) -> list[str]:
    """`text` cut at line ends (the module's rule); a last line end starts no extra empty line."""
    lines = LINE_END.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def require_file(path: str, allow_empty: bool = False) -> None:
    """A DataError unless `path` is a file (and, unless `allow_empty`, not an empty one)."""
    if not os.path.isfile(path):
        raise DataError(f"{path}: file not found.")
    if not allow_empty and os.path.getsize(path) == 0:
        raise DataError(f"{path}: file is empty.")


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


def read_lines(path: str | None, allow_empty: bool = False) -> list[str]:
    """The lines of a UTF-8 file (stdin for None or "-") without their line ends. A missing file, an empty one (unless
    `allow_empty`) or bytes that are not UTF-8 raise `DataError` naming the file (and line)."""
    stdin = path in (None, "-")
    name = "<stdin>" if stdin else path
    if stdin:
        raw = sys.stdin.buffer.read()
    else:
        require_file(path, allow_empty=True)  # (emptiness below: a file of blank lines is empty too)
        with open(path, "rb") as f:
            raw = f.read()
    if not allow_empty and not raw.strip():
        raise DataError(f"{name}: file is empty.")
    try:
        text = raw.decode(ENCODING)
    except UnicodeDecodeError as error:
        line = len(split_lines(raw[: error.start].decode("utf-8") + "x"))
        raise DataError(f"{name}, line {line}: bytes that are not UTF-8 ({error.reason}).") from None
    return split_lines(text)


def read_json(path, advice: str = "", mapping: bool = False):
    """A JSON file's contents; one that is not valid JSON (truncated, corrupted), or with `mapping` not a JSON object,
    is an OSError naming it, `advice` ("; export it again ...") ending the message."""
    try:
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise OSError(f"{path} is truncated or corrupted (not valid JSON: {error}){advice}.") from None
    if mapping and not isinstance(values, dict):
        raise OSError(f"{path} is damaged: it holds a JSON {type(values).__name__}, not an object{advice}.")
    return values


def check_output_path(path, what: str = "the output path") -> str:
    """A path a command is about to write, refused when empty (an unset shell variable would make it the current
    directory); returned as given."""
    if path is None or not os.fspath(path).strip():
        raise ValueError(f"{what} is empty: give the file or directory to write.")
    return os.fspath(path)


# ---------------------------------------------------------------------------------------- nothing read is written over
# The rule of every command: no output replaces what the run reads (an input file, a model it loads) or a finished
# model, whichever way the path is spelled. Devices and pipes (/dev/null, /dev/stdout, a FIFO) are written in place and
# replace nothing: they are never refused.
FINISHED_MODEL_FILES = ("config.json", "model.safetensors", "pytorch_model.bin", "model.bin", "model.onnx")
CHECKPOINT_NAME = re.compile(r"checkpoint-(\d+)")  # transformers' PREFIX_CHECKPOINT_DIR + "-STEP"


def run_checkpoints(run_dir) -> list[str]:
    """The `checkpoint-STEP` directories of a run directory, oldest first."""
    run_dir = os.fspath(run_dir)
    if not os.path.isdir(run_dir):
        return []
    steps = [(int(m.group(1)), name) for name in os.listdir(run_dir)
             if (m := CHECKPOINT_NAME.fullmatch(name)) and os.path.isdir(os.path.join(run_dir, name))]
    return [os.path.join(run_dir, name) for _, name in sorted(steps)]


def same_path(a, b) -> bool:
    """Whether `a` and `b` name one file or directory: equal once symlinks, `..`, trailing slashes and (where the file
    system ignores it) case are resolved, or one inode (a hard link)."""
    a, b = os.fspath(a), os.fspath(b)
    try:
        if os.path.samefile(a, b):
            return True
    except (OSError, ValueError):  # (one of them missing)
        pass
    return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


def is_within(path, directory) -> bool:
    """Whether `path` lies in `directory` (at any depth, or is it), symlinks resolved."""
    path, directory = os.path.realpath(os.fspath(path)), os.path.realpath(os.fspath(directory))
    return os.path.normcase(path) == os.path.normcase(directory) or os.path.normcase(path).startswith(
        os.path.normcase(directory.rstrip(os.sep) + os.sep))


def written_in_place(path) -> bool:
    """A device or pipe: written in place, never replaced."""
    path = os.fspath(path)
    return os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path)


def finished_model(directory) -> list[str]:
    """What makes `directory` a finished model or a run's: the model files and `checkpoint-STEP` folders it holds."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        return []
    found = [name for name in FINISHED_MODEL_FILES if os.path.isfile(os.path.join(directory, name))]
    return found + [os.path.basename(path) for path in run_checkpoints(directory)]


def files_of(*directories) -> list[str]:
    """The files at the top of each of `directories` that is a local directory (a model's: what the run reads)."""
    found = []
    for directory in directories:
        if directory and os.path.isdir(os.fspath(directory)):
            found += [os.path.join(os.fspath(directory), name) for name in sorted(os.listdir(directory))
                      if os.path.isfile(os.path.join(os.fspath(directory), name))]
    return found


def refuse_overwriting(outputs, inputs=(), replaced=(), model_dirs=()) -> None:
    """A `ValueError` naming both paths when a command would write over something of the user's: one of `outputs`
    (files or directories it writes) that is one of `inputs` (files and directories the run reads), or a directory of
    `replaced` (replaced whole) that is or holds one of them, or one of `model_dirs` (directories it writes files
    into) that holds a finished model or checkpoints. Devices and pipes are not refused (written in place)."""
    inputs = [os.fspath(path) for path in inputs if path not in (None, "-") and os.fspath(path).strip()]
    for output in [*outputs, *replaced, *model_dirs]:
        if output in (None, "-") or written_in_place(output):
            continue
        for source in inputs:
            if same_path(output, source):
                raise ValueError(f"the output {os.fspath(output)} is the input {source}: writing it would replace "
                                 "what the run reads; give another output.")
    for directory in replaced:
        for source in inputs:
            if is_within(source, directory):
                raise ValueError(f"the output directory {os.fspath(directory)} holds the input {source}: replacing it "
                                 "would delete what the run reads; give another output directory.")
    for directory in model_dirs:
        held = finished_model(directory)
        if held:
            what = ", ".join(held[:4]) + (", ..." if len(held) > 4 else "")
            raise ValueError(f"the output directory {os.fspath(directory)} holds a finished model or checkpoints "
                             f"({what}): writing into it would replace them; give another output directory.")


@contextmanager
def replaced_atomically(path):
    """A name for the block to write a file or a directory to, in a private folder beside `path` (same file system),
    renamed to `path` when the block ends (a directory written replaces a directory there; a file never does) and
    deleted if it fails: `path` is whole or as it was, never half written. Missing parent folders are made; a symlink
    is followed (its target is replaced, the link stays); an empty path is refused."""
    path = os.path.realpath(check_output_path(path))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=os.path.dirname(path))
    written = os.path.join(staging, os.path.basename(path))
    try:
        yield written
        if os.path.isdir(written) and os.path.isdir(path):
            shutil.rmtree(path)
        os.replace(written, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def write_text(path: str, text: str) -> None:
    """Write `text` to `path`: atomically (never half a file) where `path` is a regular file or new; in place where it
    is a device or a pipe (/dev/null, /dev/stdout, a FIFO a reader waits on), which a replacement would destroy. An
    empty path is refused (`replaced_atomically`)."""
    if os.path.isdir(path):
        raise IsADirectoryError(f"{os.fspath(path)} is a directory: give a file to write to.")
    if os.path.exists(path) and not os.path.isfile(path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return
    with replaced_atomically(path) as temporary, open(temporary, "w", encoding="utf-8") as f:
        f.write(text)


def write_lines(path: str | None, lines: list[str]) -> None:
    """One line each, to stdout (None or "-") or atomically to a file."""
    text = "".join(line + "\n" for line in lines)
    if path in (None, "-"):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_text(path, text)


def conll_sentences(lines: list[str], name: str, columns: int | None = None):
    """CoNLL lines -> one `(line numbers, columns, document)` per sentence: numbers index `lines`, columns are each
    token line split on whitespace, `document` counts the `-DOCSTART-` lines before it. A blank line or a `-DOCSTART-`
    line ends a sentence. Every token line must have `columns` columns (default: as many as the first), else a
    `DataError` names the line."""
    sentences, current, document = [], [], 0
    expected = f" (expected {columns})" if columns is not None else None
    for number, line in enumerate(lines + [""], start=1):
        if not line.strip() or line.startswith(DOCSTART):
            if current:
                sentences.append(([n for n, _ in current], [parts for _, parts in current], document))
                current = []
            document += line.startswith(DOCSTART)
            continue
        parts = line.split()
        if columns is None:
            columns, expected = len(parts), f" where earlier lines have {len(parts)}"
        elif len(parts) != columns:
            raise DataError(f"{name}, line {number}: {len(parts)} columns{expected}: {line!r}.")
        current.append((number - 1, parts))
    return sentences


def file_stats(sentences: int, lines: int, seconds: float, engine_seconds: float) -> dict:
    """What `translate` and `tag` report: counts, speed, and the seconds of it spent in the engine's calls."""
    return {"sentences": sentences, "lines": lines, "seconds": seconds,
            "sentences_per_second": sentences / seconds if seconds > 0 else 0.0, "engine_seconds": engine_seconds}
