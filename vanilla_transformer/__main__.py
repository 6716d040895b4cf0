"""`python -m vanilla_transformer COMMAND ...`: the same as `vanilla-transformer COMMAND ...`."""

import sys

from .cli import main

sys.exit(main())
