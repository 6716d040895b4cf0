"""`python -m vanilla_transformer.run_ner` (and `torchrun -m`): the same as `vanilla-transformer train-ner`
(commands/train_ner.py)."""

import sys

from .commands.train_ner import main
from .console import run_command

if __name__ == "__main__":
    sys.exit(run_command("python -m vanilla_transformer.run_ner", main))
