#!/usr/bin/env python
"""PNG pictures of a run and a model: training curves, attention heatmaps, the position encoding.

The same as `vanilla-transformer plot --help` once the package is installed (`pip install -e .`).
"""

import sys

from vanilla_transformer.commands.plot import main
from vanilla_transformer.console import run_command

if __name__ == "__main__":
    sys.exit(run_command("python scripts/plot.py", main))
