#!/usr/bin/env python
"""Train and evaluate a named-entity tagger with Trainer (flags as in transformers' run_ner.py).

The same as `vanilla-transformer train-ner --help` once the package is installed (`pip install -e .`).
"""

import sys

from vanilla_transformer.console import run
from vanilla_transformer.run_ner import main

if __name__ == "__main__":
    sys.exit(run("python scripts/run_ner.py", main))
