#!/usr/bin/env python
"""Train and evaluate a translation model with Seq2SeqTrainer (flags as in transformers' run_translation.py).

The same as `vanilla-transformer train-translation --help` once the package is installed (`pip install -e .`).
"""

from vanilla_transformer.run_translation import main

if __name__ == "__main__":
    main()
