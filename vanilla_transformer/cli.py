"""The `vanilla-transformer` command: `vanilla-transformer COMMAND --help` for each command's flags.

A user's mistake (a missing or damaged file, malformed data, an option out of range, a model of the wrong kind) ends
with one `vanilla-transformer COMMAND: error: ...` line on stderr and exit status 2; `--debug` (before the command, or
after it for every command but `serve`) or VT_DEBUG=1 shows the full trace instead. Other exceptions are bugs and
keep their trace.
"""

import argparse
import importlib
import sys

from .commands import COMMANDS
from .console import run_command


def build_parser() -> argparse.ArgumentParser:
    """The command list; each command's own flags are its module's (`commands/`)."""
    parser = argparse.ArgumentParser(
        prog="vanilla-transformer", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--debug", action="store_true", help="Show the full trace of an error (also: VT_DEBUG=1).")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        commands.add_parser(name, help=help_text, add_help=False)
    return parser


def dispatch(argv: list[str]):
    """The command named first in `argv`, given the rest of it."""
    if not argv or argv[0] not in COMMANDS:
        build_parser().parse_args(argv)  # the usage, or argparse's error naming the unknown command
        return None
    module = importlib.import_module(f".commands.{COMMANDS[argv[0]][0]}", __package__)
    sys.argv[0] = f"vanilla-transformer {argv[0]}"  # the program its --help and errors name
    return module.main(argv[1:])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    return run_command(f"vanilla-transformer {command}" if command else "vanilla-transformer", dispatch, argv)


if __name__ == "__main__":
    sys.exit(main())
