#!/usr/bin/env python
"""Train and evaluate a translation model with Seq2SeqTrainer (flags as in transformers' run_translation.py).

The same as `vanilla-transformer train-translation --help` once the package is installed (`pip install -e .`).
"""

import sys

from vanilla_transformer.commands.train_translation import main
from vanilla_transformer.console import run_command

if __name__ == "__main__":
    sys.exit(run_command("python scripts/run_translation.py", main))
