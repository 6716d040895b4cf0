#!/usr/bin/env python
"""Push a saved model directory to the Hugging Face Hub.

The same as `vanilla-transformer push --help` once the package is installed (`pip install -e .`).
"""

import sys

from vanilla_transformer.commands.push import main
from vanilla_transformer.console import run_command

if __name__ == "__main__":
    sys.exit(run_command("python scripts/push_to_hub.py", main))
