"""Train and evaluate a vanilla Transformer for translation with Seq2SeqTrainer (in the style of transformers'
examples/pytorch/translation/run_translation.py).

Data: `--dataset_name` (Hub), `--train_file`/`--validation_file`/`--test_file` as JSON lines
(`{"translation": {"de": ..., "en": ...}}`), as tab-separated pairs (`.tsv`/`.txt`: SOURCE<TAB>TARGET a line, more
columns ignored, as Tatoeba's `fra.txt`) or as parallel text prefixes (`data/train` -> data/train.de +
data/train.en), or nothing at all: the built-in demo task. Multi-process: `torchrun --nproc_per_node 2 ...`.
"""

import logging
import os
from dataclasses import dataclass, field

import numpy as np
from datasets import DatasetDict, Features, List, Value
from transformers import DataCollatorForSeq2Seq

from .. import data as vt_data
from ..evaluation.scores import TranslationScores
from ..files import write_lines
from ..tokenization import PairFeatures
from ..training.arguments import (
    ModelArguments,
    TokenBudgetArguments,
    TranslationTrainingArguments,
    check_ranges,
    parse_run_arguments,
    run_parser,
)
from ..training.batching import check_token_budget, sequence_lengths
from ..training.bpe_dropout import BpeDropout
from ..training.models import build_model, get_tokenizer
from ..training.precision import fast_bf16
from ..training.runs import ensemble_loading, evaluate_splits, finish_run, limit_splits, train_and_save
from ..training.trainers import AtomicSeq2SeqTrainer, EpochOfSampler

logger = logging.getLogger(__name__)

# The built-in demo task's defaults (what they reach: docs/results.md; `demo_defaults` adds --bf16: true where a bf16
# matrix product measures faster than fp32). Pre-LN (a deviation from the paper's post-LN) and cosine decay to zero,
# which learn this algorithmic task sooner than post-LN with inverse-square-root decay. Flags given on the command
# line override these.
DEMO_ARGS = [
    "--config_name",
    "small",
    "--config_overrides",
    "d_model=128,encoder_ffn_dim=512,decoder_ffn_dim=512,dropout=0.0,normalize_before=true",
    "--max_steps",
    "1800",
    "--learning_rate",
    "2e-3",
    "--warmup_steps",
    "200",
    "--lr_scheduler_type",
    "cosine",
    "--per_device_train_batch_size",
    "32",
    "--label_smoothing_factor",
    "0.0",
    "--max_grad_norm",
    "1.0",
    "--logging_steps",
    "100",
    "--save_strategy",
    "no",
    "--output_dir",
    "outputs/demo",
]
DEMO_MIN_EXACT_MATCH = 0.95  # a demo model below this on held-out strings has not learned the task: fail loudly
DATA_FLAGS = ("--dataset_name", "--train_file", "--validation_file", "--test_file")


# token ids as int32: half the disk and page cache of int64 for a tokenized corpus
TOKEN_IDS = Features({"input_ids": List(Value("int32")), "labels": List(Value("int32"))})
FILE_HELP = "JSON lines (.json/.jsonl), tab-separated pairs (.tsv/.txt: source first) or a parallel-text prefix."


@dataclass
class DataTrainingArguments(TokenBudgetArguments):
    source_lang: str | None = field(default=None, metadata={"help": "Source language code, e.g. de."})
    target_lang: str | None = field(default=None, metadata={"help": "Target language code, e.g. en."})
    dataset_name: str | None = field(default=None, metadata={"help": "A Hub dataset, e.g. wmt16."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "The Hub dataset's config, e.g. de-en."})
    train_file: str | None = field(default=None, metadata={"help": FILE_HELP})
    validation_file: str | None = field(default=None, metadata={"help": FILE_HELP})
    test_file: str | None = field(default=None, metadata={"help": FILE_HELP})
    max_source_length: int = field(default=128, metadata={"help": "Source tokens kept (longer are truncated)."})
    max_target_length: int = field(default=128, metadata={"help": "Target tokens kept (longer are truncated)."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only this many training pairs."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Use only this many validation pairs."})
    max_predict_samples: int | None = field(default=None, metadata={"help": "Use only this many test pairs."})
    num_beams: int | None = field(
        default=None,
        metadata={
            "help": "Beams for evaluation/prediction, saved in the model's generation config (default: a loaded "
            "model's own, else 1)."
        },
    )
    length_penalty: float | None = field(
        default=None,
        metadata={
            "help": "Beam search length penalty, saved with --num_beams (default: a loaded model's own, else 1.0)."
        },
    )
    ensemble_with: list[str] | None = field(
        default=None,
        metadata={
            "help": "Evaluation and prediction only: further trained translation models (directories or Hub ids, same "
            "tokenizer) decoding with --model_name_or_path's as one, their log-probabilities averaged."
        },
    )
    bpe_dropout: float = field(
        default=0.0,
        metadata={
            "help": "Training only: BPE-dropout (Provilkov et al., 2020). Each epoch, every merged subword of the "
            "training pairs is split into the two it was merged from with this probability, each part again (0: off). "
            "Batches by --max_tokens count the pairs as tokenized without it."
        },
    )
    demo_train_examples: int = field(default=40000, metadata={"help": "Demo task: training pairs generated."})
    demo_eval_examples: int = field(default=500, metadata={"help": "Demo task: held-out pairs generated."})
    demo_min_length: int = field(default=1, metadata={"help": "Demo task: shortest source string."})
    demo_max_length: int = field(default=48, metadata={"help": "Demo task: longest source string."})
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": "Processes for tokenization."})
    streaming: bool = field(
        default=False,
        metadata={
            "help": "Read, tokenize and batch the training files (--train_file PREFIX: PREFIX.SRC + PREFIX.TGT) as "
            "they are trained on, caching nothing; with --max_tokens and --max_steps."
        },
    )

    def __post_init__(self):
        super().__post_init__()
        check_ranges(
            self,
            positive=(
                "max_source_length",
                "max_target_length",
                "max_train_samples",
                "max_eval_samples",
                "max_predict_samples",
                "num_beams",
                "demo_train_examples",
                "demo_eval_examples",
                "demo_min_length",
                "demo_max_length",
                "preprocessing_num_workers",
            ),
            fractions=("bpe_dropout",),
        )
        if self.bpe_dropout and (self.streaming or self.packing):
            sizing = "--streaming" if self.streaming else "--packing"
            raise ValueError(
                f"--bpe_dropout lengthens the pairs after {sizing} has sized their batches: drop one of the two."
            )
        if self.demo_min_length > self.demo_max_length:
            raise ValueError(
                f"--demo_min_length {self.demo_min_length} is above --demo_max_length {self.demo_max_length}."
            )


def load_raw_datasets(data_args: DataTrainingArguments, model_args, training_args) -> tuple[DatasetDict, tuple]:
    """The splits, and the (source, target) languages of their pairs."""
    files = {"train": data_args.train_file, "validation": data_args.validation_file, "test": data_args.test_file}
    if data_args.dataset_name:
        raw = vt_data.hub_dataset(data_args.dataset_name, data_args.dataset_config_name, cache_dir=model_args.cache_dir)
    elif any(files.values()):
        if not (data_args.source_lang and data_args.target_lang):
            raise ValueError("Local translation files need --source_lang and --target_lang.")
        raw = DatasetDict(
            {
                split: vt_data.load_translation_file(
                    path, data_args.source_lang, data_args.target_lang, model_args.cache_dir
                )
                for split, path in files.items()
                if path and not (split == "train" and data_args.streaming)
            }
        )
        if data_args.streaming:
            raw["train"] = vt_data.stream_parallel_text(files["train"], data_args.source_lang, data_args.target_lang)
    else:
        logger.info("No data given: using the built-in demo task.")
        lengths = dict(min_length=data_args.demo_min_length, max_length=data_args.demo_max_length)
        raw = DatasetDict(
            {
                "train": vt_data.make_demo_translation(data_args.demo_train_examples, training_args.seed, **lengths),
                "validation": vt_data.make_demo_translation(
                    data_args.demo_eval_examples, training_args.seed + 1, **lengths
                ),
                "test": vt_data.make_demo_translation(data_args.demo_eval_examples, training_args.seed + 2, **lengths),
            }
        )
        return raw, (vt_data.DEMO_SOURCE_LANG, vt_data.DEMO_TARGET_LANG)
    if data_args.source_lang is None or data_args.target_lang is None:
        raise ValueError("Set --source_lang and --target_lang.")
    return raw, (data_args.source_lang, data_args.target_lang)


def check_streaming(data_args: DataTrainingArguments, training_args) -> int | None:
    """A streamed training set's flags checked; returns the packed rows' length (--packing): as given, else as long
    as the longest pair the stream may hold."""
    if not data_args.streaming:
        return data_args.packing_length
    train_file = data_args.train_file or ""
    if not train_file or train_file.endswith((".json", ".jsonl", ".tsv", ".txt")):
        raise ValueError(
            f"--streaming reads parallel text files: give --train_file PREFIX (PREFIX.SRC + PREFIX.TGT), "
            f"not {train_file or 'no --train_file'}."
        )
    if not data_args.max_tokens or training_args.max_steps <= 0:
        raise ValueError(
            "--streaming needs --max_tokens (batches form as the stream is read) and --max_steps (a "
            "stream has no length to count epochs in)."
        )
    multiple = 8 if training_args.device.type == "cuda" or data_args.packing else 1  # the collator's padding
    longest = -(-max(data_args.max_source_length, data_args.max_target_length) // multiple) * multiple
    packing_length = (data_args.packing_length or longest) if data_args.packing else None
    longest = packing_length or longest
    if data_args.max_tokens < longest:
        raise ValueError(
            f"--streaming: --max_tokens {data_args.max_tokens} is below the longest pair the stream may "
            f"hold ({longest} tokens, --max_source_length / --max_target_length): raise --max_tokens or "
            "lower those, so that no pair read later can stop the run."
        )
    return packing_length


def in_order(rows: list, order) -> list:
    """Rows produced for `dataset.select(order)` back in `dataset`'s order."""
    restored = [None] * len(rows)
    for row, position in zip(rows, order):
        restored[position] = row
    return restored


def demo_defaults(args: list[str]) -> list[str]:
    """The demo's flags when `args` name no data and no model (later, user flags win over them); else none."""
    demo = not any(a.split("=")[0] in DATA_FLAGS for a in args)
    from_saved = any(a.split("=")[0] in ("--model_name_or_path", "--config_name") for a in args)
    return DEMO_ARGS + ["--bf16", str(fast_bf16()).lower()] if demo and not from_saved else []


def build_parser():
    """The command's flags: the model's, the data's and the Trainer's (HfArgumentParser dataclasses)."""
    return run_parser((ModelArguments, DataTrainingArguments, TranslationTrainingArguments))


def parse(argv):
    """The command line, checked: (model_args, data_args, training_args, the checkpoint to resume from, the packed
    rows' length)."""
    model_args, data_args, training_args, resume_from = parse_run_arguments(build_parser(), argv, logger, demo_defaults)
    check_token_budget(data_args, training_args, logger, packs=True)
    packing_length = check_streaming(data_args, training_args)
    return model_args, data_args, training_args, resume_from, packing_length


def read_data(data_args, model_args, training_args) -> tuple[DatasetDict, tuple]:
    """The splits and their (source, target) languages."""
    with training_args.main_process_first(desc="reading data"):
        raw, languages = load_raw_datasets(data_args, model_args, training_args)
    if training_args.do_train and "train" not in raw:
        raise ValueError("--do_train needs a training split (--train_file or --dataset_name).")
    return raw, languages


def build_translator(model_args, data_args, training_args, raw, languages, demo: bool):
    """The tokenizer (trained on the training split unless given; the demo's stays character-level: characters are
    the units of its task) and the model, with the generation settings evaluation uses."""

    def training_texts(rows):  # a Dataset or a stream (whose Arrow formatting would go pair by pair: Python batches)
        for batch in rows.iter(batch_size=10_000):
            yield [pair[side] for pair in batch["translation"] for side in languages]

    with training_args.main_process_first(desc="tokenizer"):
        tokenizer = get_tokenizer(model_args, training_texts, raw.get("train"), default_vocab_size=8 if demo else 8000)
    model = build_model(model_args, tokenizer, "seq2seq", label_smoothing=training_args.label_smoothing_factor)
    gen = model.generation_config  # what Seq2SeqTrainer generates with unless --generation_* say otherwise
    gen.max_length = training_args.generation_max_length or data_args.max_target_length
    gen.num_beams = training_args.generation_num_beams or data_args.num_beams or gen.num_beams or 1
    if data_args.length_penalty is not None:
        gen.length_penalty = data_args.length_penalty
    logger.info("Model: %s parameters, config %s", f"{model.num_parameters():,}", model.config.to_diff_dict())
    return tokenizer, model


def training_pairs(tokenized, tokenizer, data_args, training_args) -> tuple:
    """(the training split as the Trainer reads it, the callbacks it needs): with --bpe_dropout, split anew each
    epoch."""
    train = tokenized.get("train") if training_args.do_train else None
    if train is None or not data_args.bpe_dropout:
        return train, []
    dropout = BpeDropout(
        tokenizer,
        data_args.bpe_dropout,
        training_args.seed,
        {"input_ids": data_args.max_source_length, "labels": data_args.max_target_length},
    )
    return train.with_transform(dropout), [EpochOfSampler(dropout)]


def tokenize_splits(raw, data_args, training_args, features: PairFeatures) -> tuple[dict, dict]:
    """(tokenized splits, the order of each evaluation split: longest first, so batches hold similar lengths; the
    predictions are put back in the files' order with it)."""
    tokenized = {}
    with training_args.main_process_first(desc="tokenization"):
        for split, ds in limit_splits(raw, data_args).items():
            if not hasattr(ds, "__len__"):  # a stream: tokenized as it is read, in Python batches
                tokenized[split] = ds.map(
                    features.of_python_batch, batched=True, batch_size=10_000, remove_columns=["translation"]
                )
                continue
            tokenized[split] = (
                ds.with_format("arrow")
                .map(
                    features,
                    batched=True,
                    batch_size=10_000,
                    remove_columns=ds.column_names,
                    features=TOKEN_IDS,
                    num_proc=data_args.preprocessing_num_workers,
                    desc=f"Tokenizing {split}",
                )
                .with_format(None)
            )
    orders = {}
    for split in ("validation", "test"):
        if split in tokenized:
            orders[split] = np.argsort(-sequence_lengths(tokenized[split], "input_ids"), kind="stable")
            tokenized[split] = tokenized[split].select(orders[split])
    return tokenized, orders


def prediction_writer(trainer, raw, orders, languages, scores: TranslationScores):
    """What `evaluate_splits` calls with each split's predictions: `generated_predictions_SPLIT.txt` in the files'
    order, and a few samples printed."""

    def write_predictions(split, prefix, predictions, label_ids, metrics):
        if not trainer.is_world_process_zero() or predictions is None:
            return
        hyps = in_order(scores.decode(predictions), orders[split])
        refs = in_order(scores.decode(label_ids), orders[split])
        write_lines(os.path.join(trainer.args.output_dir, f"generated_predictions_{split}.txt"), hyps)
        sources = [pair[languages[0]] for pair in raw[split]["translation"]]
        print(f"\nSample {split} predictions (source -> prediction | reference):")
        for s, h, r in list(zip(sources, hyps, refs))[:5]:
            print(f"  {s}\n    -> {h}\n     | {r}  [{'ok' if h == r else 'WRONG'}]")

    return write_predictions


def check_demo(all_metrics: dict, training_args) -> None:
    """A demo model below DEMO_MIN_EXACT_MATCH on held-out strings has not learned the task: the command fails."""
    low = {k: v for k, v in all_metrics.items() if k.endswith("_exact_match") and v < DEMO_MIN_EXACT_MATCH}
    if training_args.do_train and low:
        raise SystemExit(
            f"Demo failed: held-out exact match {low} is below {DEMO_MIN_EXACT_MATCH}; the trained model "
            "does not translate the demo task. Check the installed transformers version (make setup "
            "installs the tested ones from constraints.txt) and the flags given."
        )


def main(argv=None):
    model_args, data_args, training_args, resume_from, packing_length = parse(argv)
    demo = not (data_args.dataset_name or data_args.train_file or data_args.validation_file or data_args.test_file)
    raw, languages = read_data(data_args, model_args, training_args)
    tokenizer, model = build_translator(model_args, data_args, training_args, raw, languages, demo)
    if data_args.ensemble_with:
        from ..translation_ensemble import translation_ensemble

        model = translation_ensemble(
            model,
            tokenizer,
            data_args.ensemble_with,
            **ensemble_loading(model_args, training_args, "translation models"),
        )
    features = PairFeatures(tokenizer, data_args.max_source_length, data_args.max_target_length, languages)
    tokenized, orders = tokenize_splits(raw, data_args, training_args, features)
    scores = TranslationScores(tokenizer, demo)
    train_dataset, callbacks = training_pairs(tokenized, tokenizer, data_args, training_args)
    trainer = AtomicSeq2SeqTrainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        callbacks=callbacks,
        eval_dataset=tokenized.get("validation") if training_args.do_eval else None,
        processing_class=tokenizer,
        # lengths rounded up to a multiple of 8 suit a GPU's matrix units; on a CPU they are only padding
        data_collator=DataCollatorForSeq2Seq(
            tokenizer,
            model=model,
            label_pad_token_id=-100,
            pad_to_multiple_of=8 if training_args.device.type == "cuda" else None,
        ),
        compute_metrics=scores if training_args.predict_with_generate else None,
        max_tokens=data_args.max_tokens,
        eval_max_tokens=data_args.eval_max_tokens,
        packing=data_args.packing,
        packing_length=packing_length,
    )
    all_metrics = {}
    if training_args.do_train:
        all_metrics.update(train_and_save(trainer, tokenized["train"], resume_from))
    all_metrics.update(
        evaluate_splits(
            trainer, training_args, tokenized, scores, prediction_writer(trainer, raw, orders, languages, scores)
        )
    )
    finish_run(
        trainer,
        training_args,
        model,
        "translation",
        data_args,
        all_metrics.get("train_samples"),
        all_metrics,
        argv,
        languages=list(languages),
    )
    if demo:
        check_demo(all_metrics, training_args)
    return all_metrics
