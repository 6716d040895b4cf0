#!/usr/bin/env python
"""Side-by-side speed and memory against HF Marian / BART / BERT of the same shape (vanilla_transformer.benchmark).

    python scripts/benchmark.py [--presets small base] [--quick] [--output results.json]
"""

import sys

from vanilla_transformer.benchmark import main

if __name__ == "__main__":
    sys.exit(main())
