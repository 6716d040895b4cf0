#!/usr/bin/env python
"""Side-by-side speed and memory against HF Marian / BART / BERT of the same shape, the deployment engines, training at
natural lengths and on GPUs, large corpora, CPU kernels (the `benchmarks` package at the repository root).

    python scripts/benchmark.py [--presets small base] [--quick] [--output results.json]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository: `benchmarks`

from benchmarks.run import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
