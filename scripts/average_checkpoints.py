#!/usr/bin/env python
"""Average the weights of a run's last N checkpoints (the paper, section 6.1).

The same as `vanilla-transformer average-checkpoints --help` once the package is installed (`pip install -e .`).
"""

import sys

from vanilla_transformer.commands.average_checkpoints import main
from vanilla_transformer.console import run_command

if __name__ == "__main__":
    sys.exit(run_command("python scripts/average_checkpoints.py", main))
