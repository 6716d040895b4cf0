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


def require_file(path: str, allow_empty: bool = False, stream: bool = False) -> None:
    """A DataError unless `path` is a file (and, unless `allow_empty`, not an empty one). A pipe or device (a FIFO,
    `<(command)`'s /dev/fd/N) is accepted where the caller reads it once from start to end (`stream`; its emptiness is
    the caller's to find) and elsewhere refused as what it is, never as a missing file."""
    if os.path.isdir(path):
        raise DataError(f"{path} is a directory: give a file.")
    if os.path.exists(path) and not os.path.isfile(path):
        if stream:
            return
        raise DataError(
            f"{path} is a pipe or device, not a regular file: this command reads its input more than "
            "once; save it to a file first."
        )
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
        require_file(path, allow_empty=True, stream=True)  # (emptiness below: a file of blank lines is empty too)
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
    steps = [
        (int(m.group(1)), name)
        for name in os.listdir(run_dir)
        if (m := CHECKPOINT_NAME.fullmatch(name)) and os.path.isdir(os.path.join(run_dir, name))
    ]
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
        os.path.normcase(directory.rstrip(os.sep) + os.sep)
    )


# A path naming an open file descriptor (/dev/stdout, /dev/fd/3, /proc/self/fd/1, /proc/PID/fd/N): what it leads to
# (a log that stdout is appended to) is written through it, never replaced.
DESCRIPTOR_PATH = re.compile(r"/dev/(?:std(?:in|out|err)|fd/\d+)|/proc/(?:self|thread-self|\d+)/fd/\d+")
STANDARD_STREAMS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def descriptor_path(path) -> str | None:
    """The descriptor path (`DESCRIPTOR_PATH`) that `path` is or leads to through symlinks, else None."""
    path = os.path.abspath(os.fspath(path))
    for _ in range(40):  # (the kernel's limit of symlinks followed)
        if DESCRIPTOR_PATH.fullmatch(path):
            return path
        if not os.path.islink(path):
            return None
        try:
            path = os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(path)))
        except OSError:
            return None
    return None


def own_descriptor(path) -> int | None:
    """The number of this process's file descriptor that `path` names (/dev/stdout: 1, /proc/self/fd/3: 3), else
    None."""
    found = descriptor_path(path)
    if found is None:
        return None
    if found in STANDARD_STREAMS:
        return STANDARD_STREAMS[found]
    parts = found.split("/")  # ['', 'dev', 'fd', N] or ['', 'proc', PID, 'fd', N]
    if parts[1] == "dev" or parts[2] in ("self", "thread-self", str(os.getpid())):
        return int(parts[-1])
    return None


def written_in_place(path) -> bool:
    """A device, a pipe or a file descriptor's path (/dev/stdout: whatever file it leads to): written in place,
    never replaced."""
    path = os.fspath(path)
    if descriptor_path(path) is not None:
        return True
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
            found += [
                os.path.join(os.fspath(directory), name)
                for name in sorted(os.listdir(directory))
                if os.path.isfile(os.path.join(os.fspath(directory), name))
            ]
    return found


# A model directory's own files (what loading, exporting or pushing it reads), beside the outputs commands add there
MODEL_FILES = (
    *FINISHED_MODEL_FILES,
    "generation_config.json",
    "model.onnx.data",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "shared_vocabulary.json",
    "README.md",
    "card_info.json",
)


def model_holding(path) -> str | None:
    """The directory holding a finished model or checkpoints (`finished_model`) whose own file an existing regular
    file `path` is: one of `MODEL_FILES` or code (`.py`) in it, or any file of one of its `checkpoint-STEP` folders;
    None for anything else (an earlier output a command wrote beside the model is written again)."""
    if path in (None, "-") or written_in_place(path) or not os.path.isfile(os.fspath(path)):
        return None
    real = os.path.realpath(os.fspath(path))
    folder, name = os.path.split(real)
    if CHECKPOINT_NAME.fullmatch(os.path.basename(folder)) and finished_model(os.path.dirname(folder)):
        return os.path.dirname(folder)
    if (name in MODEL_FILES or name.endswith((".py", ".safetensors"))) and finished_model(folder):
        return folder
    return None


def refuse_overwriting(outputs, inputs=(), replaced=(), model_dirs=()) -> None:
    """A `ValueError` naming both paths when a command would write over something of the user's: one of `outputs`
    (files or directories it writes) that is one of `inputs` (files and directories the run reads), or a directory of
    `replaced` (replaced whole) that is or holds one of them, or one of `model_dirs` (directories it writes files
    into) that holds a finished model or checkpoints, or an existing file of `outputs` inside such a directory or one
    of its checkpoints (`model_holding`). Devices, pipes and descriptors are not refused (written in place)."""
    inputs = [os.fspath(path) for path in inputs if path not in (None, "-") and os.fspath(path).strip()]
    for output in [*outputs, *replaced, *model_dirs]:
        if output in (None, "-") or written_in_place(output):
            continue
        for source in inputs:
            if same_path(output, source):
                raise ValueError(
                    f"the output {os.fspath(output)} is the input {source}: writing it would replace "
                    "what the run reads; give another output."
                )
    for output in outputs:
        model = model_holding(output)
        if model is not None:
            raise ValueError(
                f"the output {os.fspath(output)} is a file of the finished model or checkpoints in "
                f"{model}: writing it would replace it; give another output."
            )
    for directory in replaced:
        for source in inputs:
            if is_within(source, directory):
                raise ValueError(
                    f"the output directory {os.fspath(directory)} holds the input {source}: replacing it "
                    "would delete what the run reads; give another output directory."
                )
    for directory in model_dirs:
        held = finished_model(directory)
        if held:
            what = ", ".join(held[:4]) + (", ..." if len(held) > 4 else "")
            raise ValueError(
                f"the output directory {os.fspath(directory)} holds a finished model or checkpoints "
                f"({what}): writing into it would replace them; give another output directory."
            )


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
    is a device, a pipe or a descriptor's path (/dev/null, a FIFO a reader waits on, /dev/stdout appended to a log),
    which a replacement would destroy: this process's own descriptors are written through (at their offset), others
    opened for appending, so nothing there is truncated. An empty path is refused (`replaced_atomically`)."""
    descriptor = own_descriptor(check_output_path(path))
    if descriptor is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        data = text.encode("utf-8")
        while data:
            data = data[os.write(descriptor, data) :]
        return
    if os.path.isdir(path):
        raise IsADirectoryError(f"{os.fspath(path)} is a directory: give a file to write to.")
    if written_in_place(path):
        with open(path, "a", encoding="utf-8") as f:
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
    return {
        "sentences": sentences,
        "lines": lines,
        "seconds": seconds,
        "sentences_per_second": sentences / seconds if seconds > 0 else 0.0,
        "engine_seconds": engine_seconds,
    }
