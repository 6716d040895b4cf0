#!/usr/bin/env python
"""Train and evaluate a named-entity tagger with Trainer (flags as in transformers' run_ner.py).

The same as `vanilla-transformer train-ner --help` once the package is installed (`pip install -e .`).
"""

import sys

from vanilla_transformer.commands.train_ner import main
from vanilla_transformer.console import run_command

if __name__ == "__main__":
    sys.exit(run_command("python scripts/run_ner.py", main))
