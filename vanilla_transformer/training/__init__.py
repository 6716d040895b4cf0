"""What the training commands (`train-translation`, `train-ner`, `pretrain-encoder`) share, in parts:

- `arguments`: the model's arguments, the paper's training defaults, token budgets, the run prologue;
- `models`: the tokenizer, config and model a command starts from;
- `precision`: bf16 where it pays, the accelerator;
- `batching`: token-budget batches, packed rows, streams;
- `checkpoints`: atomic checkpoints and resuming;
- `trainers`: the Trainer classes;
- `runs`: training, evaluation, prediction, the model card and the end of a run.

The package itself offers what the recipes and docs ask of it: whether bf16 pays on this machine.
"""

from .precision import bf16_matmul_speedup, fast_bf16

__all__ = ["bf16_matmul_speedup", "fast_bf16"]
