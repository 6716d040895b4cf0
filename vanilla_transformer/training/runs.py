"""A run's steps after the trainer is built: train and save, evaluate and predict the splits, write the model card,
push, and end the process group."""

import os
import time
import weakref

import torch

from .arguments import dataset_label
from .trainers import TokenCountMixin, TrainingClock


def write_card_and_push(
    trainer,
    training_args,
    model,
    task: str,
    dataset_name: str,
    train_samples,
    languages=None,
    labels=None,
    wall_seconds=None,
    argv=None,
) -> None:
    """End of a run (main process): record what the run knows, render README.md next to the model, and with
    `--push_to_hub` upload the directory (`--hub_model_id`, default: the output directory's name)."""
    if not trainer.is_world_process_zero():
        return
    from ..model_card import invoked_command, render_card, write_card_info
    from ..upload import push_model_dir

    command = invoked_command(argv, {"HUB_TOKEN": training_args.hub_token})  # (however its flag was spelled)
    write_card_info(
        training_args.output_dir,
        task,
        dataset_name,
        train_samples,
        command,
        training_args,
        languages=languages,
        labels=labels,
        wall_seconds=wall_seconds,
        label_smoothing=model.config.label_smoothing,
    )
    repo_id = training_args.hub_model_id or os.path.basename(os.path.abspath(training_args.output_dir))
    render_card(training_args.output_dir, repo_id)
    if training_args.push_to_hub:
        push_model_dir(
            training_args.output_dir,
            repo_id,
            token=training_args.hub_token,
            private=bool(training_args.hub_private_repo),
        )


def predict_split(trainer, dataset, prefix: str, compute_metrics=None):
    """`trainer.predict` with exactly one prediction per sample. Under data parallelism the last batch is padded with
    repeated samples so every process gets a full batch; when those come back in the gathered predictions they are
    cut and the metrics recomputed, so N processes report what one process would."""
    output = trainer.predict(dataset, metric_key_prefix=prefix)
    predictions, labels, metrics = output.predictions, output.label_ids, dict(output.metrics)
    n = len(dataset)
    if predictions is not None and len(predictions) > n:
        predictions, labels = predictions[:n], labels[:n]
        if compute_metrics is not None:
            metrics.update({f"{prefix}_{k}": v for k, v in compute_metrics((predictions, labels)).items()})
    metrics[f"{prefix}_samples"] = n
    return predictions, labels, metrics


def train_and_save(trainer, train_dataset, resume_from=None) -> dict:
    """Train (resuming when asked), save model + tokenizer + state, and write train_results.json."""
    trainer.add_callback(TrainingClock())
    start = time.time()
    result = trainer.train(resume_from_checkpoint=resume_from)
    trainer.save_model()
    metrics = dict(result.metrics)
    if hasattr(train_dataset, "__len__"):  # not a stream
        metrics["train_samples"] = len(train_dataset)
    metrics["train_wall_seconds"] = time.time() - start
    if isinstance(trainer, TokenCountMixin):
        real, slots = trainer.tokens_trained_all_processes()
        metrics["train_tokens_per_second"] = real / metrics["train_runtime"]
        if slots:
            metrics["train_padding_fraction"] = 1 - real / slots
    trainer.log_metrics("train", metrics)
    trainer.save_metrics("train", metrics)
    trainer.save_state()
    return metrics


def limit_splits(raw, data_args) -> dict:
    """The splits a run uses (train, validation, test), each cut to its --max_*_samples."""
    limits = {
        "train": data_args.max_train_samples,
        "validation": data_args.max_eval_samples,
        "test": data_args.max_predict_samples,
    }

    def cut(ds, limit):
        if limit is None:
            return ds
        return ds.select(range(min(limit, len(ds)))) if hasattr(ds, "__len__") else ds.take(limit)  # or a stream's

    return {split: cut(ds, limits[split]) for split, ds in raw.items() if split in limits}


def evaluate_splits(trainer, training_args, tokenized, compute_metrics, after=None) -> dict:
    """Evaluation (--do_eval: validation, metrics `eval_*`) and prediction (--do_predict: test, `predict_*`) on the
    splits there are; `after(split, prefix, predictions, label_ids, metrics)` may add metrics and write the
    predictions before the metrics are logged and saved."""
    all_metrics = {}
    for split, prefix, enabled in (
        ("validation", "eval", training_args.do_eval),
        ("test", "predict", training_args.do_predict),
    ):
        if not enabled or split not in tokenized:
            continue
        predictions, label_ids, metrics = predict_split(trainer, tokenized[split], prefix, compute_metrics)
        if after is not None:
            after(split, prefix, predictions, label_ids, metrics)
        trainer.log_metrics(prefix, metrics)
        trainer.save_metrics(prefix, metrics)
        all_metrics.update(metrics)
    return all_metrics


def finish_run(
    trainer, training_args, model, task: str, data_args, train_samples, metrics: dict, argv=None, **card
) -> None:
    """The end of every training command: after training, the model card (and the upload with --push_to_hub); then
    the run's metrics printed."""
    if training_args.do_train:
        write_card_and_push(
            trainer,
            training_args,
            model,
            task,
            dataset_label(data_args),
            train_samples,
            wall_seconds=metrics.get("train_wall_seconds"),
            argv=argv,
            **card,
        )
    if trainer.is_world_process_zero():
        print("\nMetrics:", {k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()})
    close_process_group(trainer)


def close_process_group(trainer) -> None:
    """Under torchrun, closes the process group once the run is done. Left to the interpreter's exit, a CPU (Gloo)
    worker thread still releasing the tensors of the last collective can abort the process after a good run
    ("terminate called without an active exception"). Closing it while the data-parallel wrapper still holds it would
    instead stop its threads from a destructor that keeps the interpreter's lock those threads wait for (a hang), so the
    wrapper goes first; where something else still holds the wrapper, the group is left to the interpreter's exit."""
    if not torch.distributed.is_initialized():
        return
    wrapper = weakref.ref(trainer.model_wrapped)
    trainer.model_wrapped = trainer.model
    trainer.accelerator.free_memory()  # its references to the wrapper, then a garbage collection
    if wrapper() is None:
        torch.distributed.destroy_process_group()


def ensemble_loading(model_args, training_args, what: str) -> dict:
    """The `from_pretrained` arguments of `--ensemble_with`'s members. An ensemble combines trained models (`what`)
    for evaluation and prediction: a run that trains, or names no `--model_name_or_path`, is refused."""
    if training_args.do_train or not model_args.model_name_or_path:
        raise ValueError(
            f"--ensemble_with combines trained {what}: give --model_name_or_path and --do_eval and/or "
            "--do_predict, without --do_train."
        )
    return dict(
        cache_dir=model_args.cache_dir,
        trust_remote_code=model_args.trust_remote_code,
        attn_implementation=model_args.attn_implementation,
    )
