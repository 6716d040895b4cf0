"""`python -m vanilla_transformer.run_translation` (and `torchrun -m`): the same as
`vanilla-transformer train-translation` (commands/train_translation.py)."""

import sys

from .commands.train_translation import main
from .console import run_command

if __name__ == "__main__":
    sys.exit(run_command("python -m vanilla_transformer.run_translation", main))
