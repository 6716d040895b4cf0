"""What the training commands (`run_translation.py`, `run_ner.py`, `run_mlm.py`) share, in parts:

- `arguments`: the model's arguments, the paper's training defaults, token budgets, the run prologue;
- `models`: the tokenizer, config and model a command starts from;
- `precision`: bf16 where it pays, the accelerator;
- `batching`: token-budget batches, packed rows, streams;
- `checkpoints`: atomic checkpoints and resuming;
- `trainers`: the Trainer classes;
- `runs`: training, evaluation, prediction, the model card and the end of a run.

Every name is importable from `vanilla_transformer.training` itself.
"""

from .arguments import (MlmTrainingArguments, ModelArguments, NerTrainingArguments, PaperTrainingArguments,
                        TokenBudgetArguments, TranslationTrainingArguments, check_ranges, dataset_label,
                        parse_config_overrides, parse_run_arguments, trainer_default)
from .batching import (EvaluationBatches, PackedBatchSampler, PackedSeq2SeqCollator, RowsOf, TokenBudgetBatchSampler,
                       TokenBudgetStream, check_token_budget, default_packing_length, pack_rows, padded_lengths,
                       sequence_lengths)
from .checkpoints import AtomicCheckpointMixin, AtomicCheckpoints, check_checkpoint_files, last_checkpoint
from .models import (TaggingDataCollator, build_config, build_model, evenly_spaced, get_tokenizer,
                     tokenizer_cache_path)
from .precision import (BF16_MIN_SPEEDUP, accelerator_type, bf16_matmul_speedup, fast_bf16, native_bf16,
                        warn_if_slow_bf16, with_device_default)
from .runs import (close_process_group, evaluate_splits, finish_run, limit_splits, predict_split, train_and_save,
                   write_card_and_push)
from .trainers import (AtomicSeq2SeqTrainer, AtomicTrainer, EpochOfSampler, ModelLossMixin, TokenBudgetMixin,
                       TokenCountMixin, TrainingClock)
