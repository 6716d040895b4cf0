"""`python -m vanilla_transformer.run_mlm` (and `torchrun -m`): the same as `vanilla-transformer pretrain-encoder`
(commands/pretrain_encoder.py)."""

import sys

from .commands.pretrain_encoder import main
from .console import run_command

if __name__ == "__main__":
    sys.exit(run_command("python -m vanilla_transformer.run_mlm", main))
