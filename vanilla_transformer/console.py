"""How every command meets its user, whether started as `vanilla-transformer COMMAND`, `python -m
vanilla_transformer.MODULE` or under `torchrun -m`: argparse types, and a user's mistake (a missing or damaged file,
malformed data, an option out of range, a model of the wrong kind) answered with one `PROGRAM: error: ...` line on
stderr and exit status 2. `--debug` anywhere on the command line (or VT_DEBUG=1) shows the full trace instead, except
after `serve`, where it is LibreTranslate's, refused (`OWN_DEBUG`). Other exceptions are bugs and keep their trace."""

import argparse
import os
import re
import sys

INTEGER = re.compile(r"[+-]?[0-9]+")  # ASCII digits only: int() would also take " 5", "1_000" and other scripts' digits
DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")  # float()'s forms less nan, inf and "_"


def int_at_least(lowest: int, highest: int | None = None):
    """An argparse type: an integer of ASCII digits >= `lowest` (and <= `highest` where given; the option is named by
    argparse's own error line)."""

    def parse(text: str) -> int:
        if not INTEGER.fullmatch(text) or len(text) > 100:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}")
        value = int(text)
        if value < lowest:
            raise argparse.ArgumentTypeError(f"must be at least {lowest}, got {value}")
        if highest is not None and value > highest:
            raise argparse.ArgumentTypeError(f"must be at most {highest}, got {value}")
        return value

    parse.__name__ = "integer"  # (argparse's name for the type in its messages)
    return parse


positive_int, non_negative_int = int_at_least(1), int_at_least(0)


def number_between(lowest: float, highest: float, lowest_allowed: bool = True):
    """An argparse type: a finite decimal number in [`lowest`, `highest`) (`lowest` itself refused unless
    `lowest_allowed`); nan, inf and numbers too large for a float are refused."""

    def parse(text: str) -> float:
        if not DECIMAL.fullmatch(text) or len(text) > 100:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}")
        value = float(text)
        if not (lowest <= value < highest if lowest_allowed else lowest < value < highest):
            bound = "at least" if lowest_allowed else "more than"
            raise argparse.ArgumentTypeError(f"must be {bound} {lowest:g} and less than {highest:g}, got {text}")
        return value

    parse.__name__ = "number"
    return parse


def output_path(text: str) -> str:
    """argparse type: a path to write, refused when empty (an unset shell variable would make it the current
    directory)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty: give the file or directory to write")
    return text


def port_number(text: str) -> int:
    """argparse type: a TCP port, 1-65535."""
    if not re.fullmatch(r"[0-9]{1,5}", text) or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number (1-65535): {text!r}")
    return int(text)


OWN_DEBUG = ("serve",)  # commands whose `--debug` is their own argument (serve: LibreTranslate's, refused by name)


def take_debug(argv: list[str]) -> tuple[bool, list[str]]:
    """(whether to show traces, `argv` without `--debug`). A `--debug` followed by one of TrainingArguments' debug
    options (`--debug underflow_overflow`) is the training commands' own flag and stays; so is a `--debug` after a
    command of `OWN_DEBUG` (before the command it is the console's: `vanilla-transformer --debug serve ...`)."""
    debug, rest, command = os.environ.get("VT_DEBUG", "") not in ("", "0"), [], None
    for i, arg in enumerate(argv):
        following = argv[i + 1] if i + 1 < len(argv) else ""
        command = command or (arg if not arg.startswith("-") else None)
        if (
            arg == "--debug"
            and command not in OWN_DEBUG
            and (not following or following.startswith("-") or not is_training_debug(following))
        ):
            debug = True
        else:
            rest.append(arg)
    return debug, rest


def is_training_debug(value: str) -> bool:
    from transformers.debug_utils import DebugOption

    return all(part in {option.value for option in DebugOption} for part in value.split())


def user_errors() -> tuple[type[Exception], ...]:
    """What the library raises for a user's mistake, always with a message naming the file, line, option or value:
    DataError and other ValueErrors, a config field out of range (StrictDataclassError, from the config's @strict
    checks), missing or unreadable files (OSError), a missing optional extra (ImportError)."""
    from huggingface_hub.errors import StrictDataclassError  # here: it takes a tenth of a second to import

    return ValueError, StrictDataclassError, OSError, ImportError


def run_command(program: str, function, argv=None) -> int:
    """`function(argv)` with a user's mistake answered as one error line (exit status 2); returns the exit status (0
    for a function that returns None, 1 for False)."""
    debug, argv = take_debug(sys.argv[1:] if argv is None else list(argv))
    try:
        result = function(argv)
    except Exception as error:
        if debug or not isinstance(error, user_errors()):
            raise
        message = " ".join(str(error).split()) or type(error).__name__  # one line
        print(f"{program}: error: {message}", file=sys.stderr)
        return 2
    if result is None or result is True:
        return 0
    return 1 if result is False else result if isinstance(result, int) else 0


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    from .model_dirs import DEVICES

    parser.add_argument(
        "--device",
        default="auto",
        choices=DEVICES,
        help="auto (default): a CUDA GPU where the engine sees one, else the CPU.",
    )


def add_engine_argument(parser: argparse.ArgumentParser, task: str, help_text: str) -> None:
    from .model_dirs import ENGINES

    parser.add_argument("--engine", default="auto", choices=ENGINES[task], help=help_text)


def add_file_arguments(parser: argparse.ArgumentParser, what: str, batch_size: int) -> None:
    """The flags of the commands that run a model over a file: --input, --output, --batch_size, --quiet, --stats."""
    parser.add_argument("--input", default=None, help=f"UTF-8 file to {what} (default: stdin).")
    parser.add_argument("--output", type=output_path, default=None, help="File to write to (default: stdout).")
    parser.add_argument(
        "--batch_size", type=positive_int, default=batch_size, help=f"Sentences per batch (default {batch_size})."
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="No progress bars or loading messages; the one-line summary (sentences, seconds) still goes to stderr.",
    )
    parser.add_argument(
        "--stats",
        action="store_true",
        help="Also print the counts, speed and the engine's share of the time as JSON (stderr).",
    )


def print_file_stats(stats: dict, as_json: bool) -> None:
    """What a file command says when it is done (stderr: stdout may be its output)."""
    import json

    print(
        f"{stats['sentences']} sentences in {stats['seconds']:.2f} s: {stats['sentences_per_second']:.1f} sentences/s",
        file=sys.stderr,
    )
    if as_json:
        print(json.dumps(stats), file=sys.stderr)


def sentence_progress(total: int, shown: bool):
    """A progress bar of `total` sentences on stderr (a context manager with `.update(n)`), silent unless `shown`."""
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="sentence", file=sys.stderr, disable=not shown)
