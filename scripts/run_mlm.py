#!/usr/bin/env python
"""Pretrain an encoder by masked language modelling with Trainer (flags as in transformers' run_mlm.py), to fine-tune
as a tagger with `run_ner.py --model_name_or_path OUTPUT_DIR`.

The same as `vanilla-transformer pretrain-encoder --help` once the package is installed (`pip install -e .`).
"""

import sys

from vanilla_transformer.commands.pretrain_encoder import main
from vanilla_transformer.console import run_command

if __name__ == "__main__":
    sys.exit(run_command("python scripts/run_mlm.py", main))
