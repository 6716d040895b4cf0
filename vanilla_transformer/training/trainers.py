"""The Trainer classes of the training commands: token-budget and packed batches, evaluation in dataset order, atomic
checkpoints, tokens per second."""

import math
import time

import torch
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler
from transformers import EvalPrediction, Seq2SeqTrainer, Trainer, TrainerCallback

from .batching import (
    EvaluationBatches,
    PackedBatchSampler,
    PackedSeq2SeqCollator,
    RowsOf,
    TokenBudgetBatchSampler,
    TokenBudgetStream,
    default_packing_length,
    sequence_lengths,
)
from .checkpoints import AtomicCheckpointMixin


class TokenBudgetMixin:
    """The training commands' batches. Training: by a token budget instead of a number of examples (`max_tokens`:
    TokenBudgetBatchSampler, or packed rows), else the Trainer's own. Evaluation and prediction: in the dataset's order,
    by a token budget (`eval_max_tokens`: EvaluationBatches) or `per_device_eval_batch_size` examples a batch.
    (transformers 5 applies `--train_sampling_strategy group_by_length` to evaluation too; the metrics would survive
    the shuffle, but the predictions files would pair each prediction with another sentence's source.) The dataset's
    `input_ids` and `labels` (else `input_ids` again) give the lengths."""

    def __init__(
        self,
        *args,
        max_tokens: int | None = None,
        eval_max_tokens: int | None = None,
        packing: bool = False,
        packing_length: int | None = None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.max_tokens, self.eval_max_tokens, self.evaluated_examples = max_tokens, eval_max_tokens, None
        self.packing, self.packing_length = packing, packing_length
        if eval_max_tokens and self.compute_metrics is not None:
            self.compute_metrics = self.on_real_examples(self.compute_metrics)

    def lengths(self, dataset):
        targets = "labels" if "labels" in dataset.column_names else "input_ids"
        return sequence_lengths(dataset, "input_ids"), sequence_lengths(dataset, targets)

    def pad_to_multiple_of(self) -> int:
        return getattr(self.data_collator, "pad_to_multiple_of", None) or 1

    def loader(self, dataset, batch_sampler, collate_fn=None):
        return self.accelerator.prepare(
            DataLoader(
                dataset,
                batch_sampler=batch_sampler,
                collate_fn=collate_fn or self.data_collator,
                num_workers=self.args.dataloader_num_workers,
                pin_memory=self.args.dataloader_pin_memory,
            )
        )

    def packed_collator(self, length: int):
        config = self.model.config
        return PackedSeq2SeqCollator(
            config.pad_token_id, config.decoder_start_token_id, self.max_tokens // length, length
        )

    def get_train_dataloader(self):
        if not self.max_tokens:
            return super().get_train_dataloader()
        if not hasattr(self.train_dataset, "__len__"):  # a stream: its own batches on each process (not dispatched)
            length = self.packing_length if self.packing else None  # (the command sets it for a stream)
            stream = TokenBudgetStream(
                self.train_dataset,
                self.max_tokens,
                self.packed_collator(length) if length else self.data_collator,
                seed=self.args.seed,
                pad_to_multiple_of=self.pad_to_multiple_of(),
                rank=self.args.process_index,
                processes=self.args.world_size,
                packing_length=length,
            )
            return DataLoader(
                stream,
                batch_size=None,
                num_workers=self.args.dataloader_num_workers,
                pin_memory=self.args.dataloader_pin_memory,
            )
        if self.packing:
            source, target = self.lengths(self.train_dataset)
            length = self.packing_length or default_packing_length(
                max(source.max(), target.max()), self.max_tokens, self.model.config.d_model
            )
            sampler = PackedBatchSampler(source, target, length, self.max_tokens // length, seed=self.args.seed)
            self.add_callback(EpochOfSampler(sampler))
            return self.loader(RowsOf(self.train_dataset), sampler, self.packed_collator(length))
        sampler = TokenBudgetBatchSampler(
            *self.lengths(self.train_dataset),
            self.max_tokens,
            seed=self.args.seed,
            pad_to_multiple_of=self.pad_to_multiple_of(),
        )
        self.add_callback(EpochOfSampler(sampler))
        return self.loader(self.train_dataset, sampler)

    def evaluation_loader(self, dataset):
        """Batches of `dataset` in its order (the processes take turns by batch, as accelerate shards them)."""
        if self.eval_max_tokens:
            batches = EvaluationBatches(
                *self.lengths(dataset),
                self.eval_max_tokens,
                processes=self.args.world_size,
                pad_to_multiple_of=self.pad_to_multiple_of(),
            )
            self.evaluated_examples = batches.real_examples
        else:
            batches = BatchSampler(
                SequentialSampler(dataset), self.args.eval_batch_size, drop_last=self.args.dataloader_drop_last
            )
        return self.loader(dataset, batches)

    def get_eval_dataloader(self, eval_dataset=None):
        if eval_dataset is None or isinstance(eval_dataset, str):  # the eval dataset, or one of a dict of them
            eval_dataset = self.eval_dataset if eval_dataset is None else self.eval_dataset[eval_dataset]
        if not hasattr(eval_dataset, "__len__"):  # a stream: read in its order already
            return super().get_eval_dataloader(eval_dataset)
        return self.evaluation_loader(eval_dataset)

    def get_test_dataloader(self, test_dataset):
        if not hasattr(test_dataset, "__len__"):
            return super().get_test_dataloader(test_dataset)
        return self.evaluation_loader(test_dataset)

    def on_real_examples(self, compute_metrics):
        """`compute_metrics` on the evaluated examples only, without the repeats that top up the last round of
        evaluation batches under several processes."""

        def cut(x):
            return tuple(cut(y) for y in x) if isinstance(x, tuple) else x[: self.evaluated_examples]

        def metrics(eval_preds):
            return compute_metrics(
                EvalPrediction(predictions=cut(eval_preds.predictions), label_ids=cut(eval_preds.label_ids))
            )

        return metrics


class EpochOfSampler(TrainerCallback):
    """Gives a batch sampler, or BPE-dropout's transform, the epoch about to run. The Trainer reaches a batch
    sampler's `set_epoch` itself, except under several processes on a run resumed in the middle of an epoch (where
    accelerate wraps it twice); then the epoch's batch order would be another epoch's."""

    def __init__(self, sampler):
        self.sampler = sampler

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.sampler.set_epoch(math.floor(state.epoch + 1e-6))  # whole epochs done (state.epoch is a float sum)


class ModelLossMixin:
    """The loss is the model's, label smoothing included (`label_smoothing` in its config, set from
    `--label_smoothing_factor` when the command builds it): a token sum divided by `num_items_in_batch`, right under
    gradient accumulation and several processes. The Trainer's own label smoother (a per-batch mean) stays unused."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.label_smoother = None


class AtomicTrainer(ModelLossMixin, TokenBudgetMixin, AtomicCheckpointMixin, Trainer):
    pass


class TokenCountMixin:
    """Counts the real (not padding) source and target tokens trained on, on the device without waiting for it, and
    the token slots of the batches (real + padding): `train_and_save` reports tokens per second (fairseq's wps) and
    the padding fraction, summed over processes. Each training log (every `--logging_steps`) gets `tokens_per_second`
    since the previous one: the speed once compiled and warm, which the whole run's average hides."""

    tokens_trained, token_slots = 0, 0
    last_log = None  # (real tokens, perf_counter time) at the previous training log

    def log(self, logs: dict, *args, **kwargs) -> None:
        if "loss" in logs:  # a training log (every process logs: the counts are summed over them)
            now, (real, _) = time.perf_counter(), self.tokens_trained_all_processes()
            if self.last_log is not None:
                logs["tokens_per_second"] = round((real - self.last_log[0]) / (now - self.last_log[1]), 1)
            self.last_log = real, now
        elif any(key.startswith("eval_") for key in logs):
            self.last_log = None  # an evaluation in between: the next interval starts after it
        super().log(logs, *args, **kwargs)

    def training_step(self, model, inputs, num_items_in_batch=None):
        if "attention_mask" in inputs and "labels" in inputs:
            self.tokens_trained = (
                self.tokens_trained + (inputs["attention_mask"] != 0).sum() + (inputs["labels"] >= 0).sum()
            )
            self.token_slots += inputs["attention_mask"].numel() + inputs["labels"].numel()
        return super().training_step(model, inputs, num_items_in_batch)

    def tokens_trained_all_processes(self) -> tuple[int, int]:
        """(real tokens, token slots) trained on by all processes."""
        if not torch.is_tensor(self.tokens_trained):
            return 0, 0
        counts = torch.stack([self.tokens_trained, self.tokens_trained.new_tensor(self.token_slots)])
        real, slots = self.accelerator.reduce(counts, reduction="sum").tolist()
        return int(real), int(slots)


class AtomicSeq2SeqTrainer(ModelLossMixin, TokenCountMixin, TokenBudgetMixin, AtomicCheckpointMixin, Seq2SeqTrainer):
    pass


class TrainingClock(TrainerCallback):
    """Writes `train_minutes` into each evaluation's entry of the log history (trainer_state.json): the wall time of
    training so far, evaluations excluded (`plot quality-vs-time` draws the score against it). A resumed run counts
    from the checkpoint's value."""

    start = stopped = None

    def minutes(self) -> float:
        return self.stopped if self.stopped is not None else (time.perf_counter() - self.start - self.eval_seconds) / 60

    def on_train_begin(self, args, state, control, **kwargs):
        done = [entry["train_minutes"] for entry in state.log_history if "train_minutes" in entry]
        self.start, self.eval_seconds = time.perf_counter() - 60 * (done[-1] if done else 0.0), 0.0

    def on_train_end(self, args, state, control, **kwargs):
        self.stopped = self.minutes()  # evaluations after training are at the final model's time

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if self.start is None or not state.log_history:  # no training in this run
            return
        self.eval_seconds += next((v for k, v in (metrics or {}).items() if k.endswith("_runtime")), 0.0)
        state.log_history[-1]["train_minutes"] = round(self.minutes(), 3)
