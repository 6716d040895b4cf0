"""Train and evaluate a vanilla Transformer encoder for named-entity recognition with Trainer (in the style of
transformers' examples/pytorch/token-classification/run_ner.py).

Data: `--dataset_name` (Hub, `tokens` / `ner_tags` columns), `--train_file`/`--validation_file`/`--test_file` as
CoNLL column files (tag in the last column, IOB1 or IOB2) or JSON lines `{"tokens": [...], "ner_tags": [...]}`, or
nothing at all: a generated demo tagging task. Labels are IOB2 strings; the label set comes from the training split.
"""

import functools
import logging
import os
from dataclasses import dataclass, field

from datasets import DatasetDict

from .. import data as vt_data
from ..evaluation.scores import TagScores
from ..files import write_lines
from ..ner import mentions
from ..ner.augmentation import MentionReplacement
from ..ner.ensemble import ensemble_of
from ..tokenization import TaggingFeatures
from ..training.arguments import (
    ModelArguments,
    NerTrainingArguments,
    TokenBudgetArguments,
    check_ranges,
    parse_run_arguments,
    run_parser,
)
from ..training.batching import check_token_budget
from ..training.models import TaggingDataCollator, build_model, get_tokenizer
from ..training.runs import ensemble_loading, evaluate_splits, finish_run, limit_splits, train_and_save
from ..training.trainers import AtomicTrainer

logger = logging.getLogger(__name__)

DEMO_CONFIG_OVERRIDES = "d_model=128,encoder_layers=2,encoder_ffn_dim=256,max_position_embeddings=256"


@dataclass
class DataTrainingArguments(TokenBudgetArguments):
    dataset_name: str | None = field(
        default=None,
        metadata={
            "help": "A Hub dataset stored as Parquet or JSON (`tokens` / `ner_tags` columns); datasets 4 and newer "
            "refuse those with a loading script."
        },
    )
    dataset_config_name: str | None = field(default=None, metadata={"help": "The Hub dataset's config."})
    train_file: str | None = field(default=None, metadata={"help": "CoNLL columns or JSON lines."})
    validation_file: str | None = field(default=None, metadata={"help": "CoNLL columns or JSON lines."})
    test_file: str | None = field(default=None, metadata={"help": "CoNLL columns or JSON lines."})
    max_seq_length: int = field(default=256, metadata={"help": "Sub-tokens kept per sentence."})
    label_all_tokens: bool = field(
        default=False,
        metadata={
            "help": "Train on every sub-token (I- of the word's type after the first) instead of the first only."
        },
    )
    context_words: int = field(
        default=0,
        metadata={
            "help": "Words of the neighbouring sentences of the same document given as unlabelled context on each side "
            "(CoNLL files mark documents with -DOCSTART-); 0 = each sentence alone."
        },
    )
    auxiliary_columns: bool = field(
        default=False,
        metadata={
            "help": "Training only: learn the training file's columns between token and tag (CoNLL-2003: POS and chunk "
            "tags) as auxiliary tagging tasks (multi-task learning; config.auxiliary_loss_weight); predictions "
            "use the NER head alone, so evaluation and prediction files need no such columns."
        },
    )
    mention_replacement: float = field(
        default=0.0,
        metadata={
            "help": "Training only: probability of replacing each entity mention by a random training mention of the "
            "same type, drawn anew every epoch (Dai & Adel, 2020); 0 = off."
        },
    )
    ensemble_with: list[str] | None = field(
        default=None,
        metadata={
            "help": "Evaluation and prediction only: further trained taggers (directories or Hub ids, same labels and "
            "tokenizer) combined with --model_name_or_path's as a product of experts (scores averaged)."
        },
    )
    document_consistency: bool = field(
        default=False,
        metadata={
            "help": "Evaluation and prediction: within each document (CoNLL files: -DOCSTART- blocks; other data: each "
            "sentence), a word sequence predicted as a mention takes the type most of its mentions were given, "
            "its untagged occurrences are tagged too, and a one-word mention that is a word of a longer person "
            "mention becomes a person. The final scores and predictions files come after it; the evaluations "
            "during training do not."
        },
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only this many training sentences."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Use only this many validation sentences."})
    max_predict_samples: int | None = field(default=None, metadata={"help": "Use only this many test sentences."})
    demo_train_examples: int = field(default=4000, metadata={"help": "Demo task: training sentences generated."})
    demo_eval_examples: int = field(default=500, metadata={"help": "Demo task: held-out sentences generated."})

    def __post_init__(self):
        super().__post_init__()
        check_ranges(
            self,
            positive=(
                "max_seq_length",
                "max_train_samples",
                "max_eval_samples",
                "max_predict_samples",
                "demo_train_examples",
                "demo_eval_examples",
            ),
            non_negative=("context_words",),
            fractions=("mention_replacement",),
        )


def load_raw_datasets(data_args, training_args) -> DatasetDict:
    files = {"train": data_args.train_file, "validation": data_args.validation_file, "test": data_args.test_file}
    if data_args.dataset_name:
        raw = vt_data.hub_dataset(data_args.dataset_name, data_args.dataset_config_name)
        feature = raw[next(iter(raw))].features["ner_tags"]
        names = getattr(getattr(feature, "feature", None), "names", None)
        if names:  # ClassLabel ids -> IOB2 strings
            raw = raw.map(lambda b: {"ner_tags": [[names[t] for t in tags] for tags in b["ner_tags"]]}, batched=True)
        return DatasetDict({k: v.select_columns(["tokens", "ner_tags"]) for k, v in raw.items()})  # no documents
    if any(files.values()):
        return DatasetDict({split: vt_data.load_ner_file(path) for split, path in files.items() if path})
    logger.info("No data given: using the built-in demo tagging task.")
    return DatasetDict(
        {
            "train": vt_data.make_demo_ner(data_args.demo_train_examples, seed=training_args.seed),
            "validation": vt_data.make_demo_ner(data_args.demo_eval_examples, seed=training_args.seed + 1),
            "test": vt_data.make_demo_ner(data_args.demo_eval_examples, seed=training_args.seed + 2),
        }
    )


def label_list_from(train_tags, other_splits: dict) -> list[str]:
    """Sorted label set of the training split ("O" first). A label seen only outside training is an error: the
    model could never predict it and its scores would silently be wrong."""
    labels = sorted({t for tags in train_tags for t in tags}, key=lambda t: (t != "O", t[2:], t))
    for split, tag_lists in other_splits.items():
        unseen = sorted({t for tags in tag_lists for t in tags} - set(labels))
        if unseen:
            raise ValueError(
                f"Labels {unseen} occur in the {split} split but never in training; add them to the "
                "training data or map them (e.g. to O) before running."
            )
    return labels


def demo_defaults(args: list[str]) -> list[str]:
    """The demo's shape when `args` name no data and no model (later, user flags win over it); else nothing."""
    given = {arg.split("=", 1)[0] for arg in args}
    data = {"--dataset_name", "--train_file", "--validation_file", "--test_file"}
    model = {"--model_name_or_path", "--config_name", "--config_overrides"}
    return [] if given & (data | model) else ["--config_overrides", DEMO_CONFIG_OVERRIDES]


def build_parser():
    """The command's flags: the model's, the data's and the Trainer's (HfArgumentParser dataclasses)."""
    return run_parser((ModelArguments, DataTrainingArguments, NerTrainingArguments))


def parse(argv):
    """The command line, checked: (model_args, data_args, training_args, the checkpoint to resume from)."""
    parsed = parse_run_arguments(build_parser(), argv, logger, demo_defaults)
    data_args, training_args = parsed[1], parsed[2]
    check_token_budget(data_args, training_args, logger)
    if data_args.max_tokens and data_args.mention_replacement:
        raise ValueError(
            "--max_tokens cuts batches by the sentences' lengths, which --mention_replacement changes "
            "every epoch: use one of them."
        )
    return parsed


def labels_of(raw: DatasetDict, model_args) -> list[str] | None:
    """The label set of the training split; None where a saved model brings its own."""
    if "train" in raw:
        return label_list_from(raw["train"]["ner_tags"], {k: v["ner_tags"] for k, v in raw.items() if k != "train"})
    if model_args.model_name_or_path:
        return None
    raise ValueError("Without a training split, pass --model_name_or_path of a trained tagger.")


def auxiliary_labels(raw: DatasetDict, data_args) -> tuple[DatasetDict, list[dict]]:
    """The splits without the auxiliary columns they do not train on, and per auxiliary column tag -> id (from the
    training split; none without --auxiliary_columns)."""
    raw = DatasetDict(
        {
            split: ds.remove_columns("auxiliary_tags")
            if "auxiliary_tags" in ds.column_names and not (data_args.auxiliary_columns and split == "train")
            else ds
            for split, ds in raw.items()
        }
    )
    if not data_args.auxiliary_columns:
        return raw, []
    if "train" not in raw or "auxiliary_tags" not in raw["train"].column_names:
        raise ValueError(
            "--auxiliary_columns needs a CoNLL --train_file with columns between the token and the "
            "tag (e.g. 'EU NNP B-NP B-ORG')."
        )
    columns = list(zip(*(word for sentence in raw["train"]["auxiliary_tags"] for word in sentence)))
    return raw, [{tag: i for i, tag in enumerate(sorted(set(column)))} for column in columns]


def build_tagger(model_args, training_args, raw, label_list, aux_label2id, demo: bool):
    """The tokenizer and the tagger (built, or loaded from --model_name_or_path), and the model's labels."""
    tokenizer = get_tokenizer(
        model_args,
        lambda rows: (" ".join(words) for words in rows["tokens"]),
        raw.get("train"),
        default_vocab_size=2000 if demo else 8000,
    )
    task_fields = {"label_smoothing": training_args.label_smoothing_factor}
    if label_list is not None:
        task_fields.update(
            id2label=dict(enumerate(label_list)), label2id={label: i for i, label in enumerate(label_list)}
        )
    if aux_label2id:
        task_fields["auxiliary_num_labels"] = [len(column) for column in aux_label2id]
    model = build_model(model_args, tokenizer, "token_classification", **task_fields)
    label_list = [model.config.id2label[i] for i in range(model.config.num_labels)]
    for split, ds in raw.items():
        unknown = sorted({t for tags in ds["ner_tags"] for t in tags} - set(label_list))
        if unknown:
            raise ValueError(f"Labels {unknown} in the {split} split are not labels of the model {label_list}.")
    logger.info("Labels: %s; model: %s parameters", label_list, f"{model.num_parameters():,}")
    return tokenizer, model, label_list


def tokenize_splits(raw, data_args, training_args, features: TaggingFeatures) -> tuple[dict, dict]:
    """(tokenized splits, the splits with their document context)."""
    tokenized, in_context = {}, {}
    with training_args.main_process_first(desc="tokenization"):
        for split, ds in raw.items():
            in_context[split] = ds = vt_data.with_document_context(ds, data_args.context_words)
            # evaluation always labels first sub-tokens only, so labelled positions are exactly the words
            all_tokens = data_args.label_all_tokens and split == "train"
            tokenized[split] = ds.map(
                features,
                batched=True,
                remove_columns=ds.column_names,
                fn_kwargs={"all_tokens": all_tokens},
                desc=f"Tokenizing {split}",
            )
    return tokenized, in_context


def training_dataset(tokenized, in_context, data_args, training_args, features: TaggingFeatures):
    """The tokenized training split, or its mention replacement (new mentions drawn every epoch)."""
    if not data_args.mention_replacement or "train" not in tokenized:
        return tokenized.get("train")
    encode = functools.partial(features.one, all_tokens=data_args.label_all_tokens)
    return MentionReplacement(in_context["train"], encode, data_args.mention_replacement, seed=training_args.seed)


def prediction_writer(trainer, raw, data_args, tag_scores: TagScores):
    """What `evaluate_splits` calls with each split's predictions: document consistency (scores re-computed after
    it), then `predictions_SPLIT.txt` (CoNLL: token gold predicted; words cut by truncation -> O)."""

    def consistent_and_written(split, prefix, predictions, label_ids, metrics):
        pred_tags, gold_tags = tag_scores.word_tags(predictions, label_ids)
        if data_args.document_consistency:
            rows = raw[split]
            documents = rows["document"] if "document" in rows.column_names else range(len(rows))
            words = [w[: len(p)] for w, p in zip(rows["tokens"], pred_tags)]  # words cut by truncation stay O
            pred_tags = mentions.document_consistency(words, pred_tags, documents)
            metrics.update({f"{prefix}_{k}": v for k, v in tag_scores.scores(pred_tags, gold_tags).items()})
        if trainer.is_world_process_zero():
            lines = []
            for words, gold, pred in zip(raw[split]["tokens"], raw[split]["ner_tags"], pred_tags):
                pred = pred + ["O"] * (len(words) - len(pred))
                lines += [f"{w} {g} {p}" for w, g, p in zip(words, gold, pred)] + [""]
            write_lines(os.path.join(trainer.args.output_dir, f"predictions_{split}.txt"), lines)

    return consistent_and_written


def main(argv=None):
    model_args, data_args, training_args, resume_from = parse(argv)
    demo = not (data_args.dataset_name or data_args.train_file or data_args.validation_file or data_args.test_file)
    raw = load_raw_datasets(data_args, training_args)
    label_list = labels_of(raw, model_args)
    raw, aux_label2id = auxiliary_labels(raw, data_args)
    tokenizer, model, label_list = build_tagger(model_args, training_args, raw, label_list, aux_label2id, demo)
    if data_args.ensemble_with:
        model = ensemble_of(
            model, tokenizer, data_args.ensemble_with, **ensemble_loading(model_args, training_args, "taggers")
        )
    features = TaggingFeatures(tokenizer, data_args.max_seq_length, label_list, aux_label2id)
    raw = limit_splits(raw, data_args)
    tokenized, in_context = tokenize_splits(raw, data_args, training_args, features)
    tag_scores = TagScores(label_list)
    trainer = AtomicTrainer(
        model=model,
        args=training_args,
        train_dataset=training_dataset(tokenized, in_context, data_args, training_args, features)
        if training_args.do_train
        else None,
        eval_dataset=tokenized.get("validation") if training_args.do_eval else None,
        processing_class=tokenizer,
        data_collator=TaggingDataCollator(tokenizer, pad_to_multiple_of=8),
        compute_metrics=tag_scores,
        max_tokens=data_args.max_tokens,
        eval_max_tokens=data_args.eval_max_tokens,
    )
    all_metrics = {}
    if training_args.do_train:
        all_metrics.update(train_and_save(trainer, tokenized["train"], resume_from))
    all_metrics.update(
        evaluate_splits(
            trainer, training_args, tokenized, tag_scores, prediction_writer(trainer, raw, data_args, tag_scores)
        )
    )
    finish_run(
        trainer,
        training_args,
        model,
        "token-classification",
        data_args,
        len(tokenized.get("train", ())),
        all_metrics,
        argv,
        labels=label_list,
    )
    return all_metrics
