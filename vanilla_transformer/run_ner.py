"""Train and evaluate a vanilla Transformer encoder for named-entity recognition with Trainer (in the style of
transformers' examples/pytorch/token-classification/run_ner.py).

Data: `--dataset_name` (Hub, `tokens` / `ner_tags` columns), `--train_file`/`--validation_file`/`--test_file` as
CoNLL column files (tag in the last column, IOB1 or IOB2) or JSON lines `{"tokens": [...], "ner_tags": [...]}`, or
nothing at all: a generated demo tagging task. Labels are IOB2 strings; the label set comes from the training split.
"""

import logging
import os
import sys
from dataclasses import dataclass, field

from datasets import DatasetDict, load_dataset

from . import data as vt_data
from .ner import mentions
from .ner.augmentation import MentionReplacement
from .ner.ensemble import TokenClassificationEnsemble, ensemble_of
from .metrics import load_metric
from .console import run
from .training import (
    AtomicTrainer,
    ModelArguments,
    NerTrainingArguments,
    TaggingDataCollator,
    TokenBudgetArguments,
    build_model,
    check_ranges,
    check_token_budget,
    evaluate_splits,
    finish_run,
    get_tokenizer,
    limit_splits,
    move_label_smoothing_into_model,
    parse_run_arguments,
    train_and_save,
)

logger = logging.getLogger("run_ner")

DEMO_CONFIG_OVERRIDES = "d_model=128,encoder_layers=2,encoder_ffn_dim=256,max_position_embeddings=256"


@dataclass
class DataTrainingArguments(TokenBudgetArguments):
    dataset_name: str | None = field(default=None, metadata={"help": "A Hub dataset, e.g. conll2003."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "The Hub dataset's config."})
    train_file: str | None = field(default=None, metadata={"help": "CoNLL columns or JSON lines."})
    validation_file: str | None = field(default=None, metadata={"help": "CoNLL columns or JSON lines."})
    test_file: str | None = field(default=None, metadata={"help": "CoNLL columns or JSON lines."})
    max_seq_length: int = field(default=256, metadata={"help": "Sub-tokens kept per sentence."})
    label_all_tokens: bool = field(default=False, metadata={
        "help": "Train on every sub-token (I- of the word's type after the first) instead of the first only."})
    context_words: int = field(default=0, metadata={
        "help": "Words of the neighbouring sentences of the same document given as unlabelled context on each side "
                "(CoNLL files mark documents with -DOCSTART-); 0 = each sentence alone."})
    auxiliary_columns: bool = field(default=False, metadata={
        "help": "Training only: learn the training file's columns between token and tag (CoNLL-2003: POS and chunk "
                "tags) as auxiliary tagging tasks (multi-task learning; config.auxiliary_loss_weight); predictions "
                "use the NER head alone, so evaluation and prediction files need no such columns."})
    mention_replacement: float = field(default=0.0, metadata={
        "help": "Training only: probability of replacing each entity mention by a random training mention of the same "
                "type, drawn anew every epoch (Dai & Adel, 2020); 0 = off."})
    ensemble_with: list[str] | None = field(default=None, metadata={
        "help": "Evaluation and prediction only: further trained taggers (directories or Hub ids, same labels and "
                "tokenizer) combined with --model_name_or_path's as a product of experts (scores averaged)."})
    document_consistency: bool = field(default=False, metadata={
        "help": "Evaluation and prediction: within each document (CoNLL files: -DOCSTART- blocks; other data: each "
                "sentence), a word sequence predicted as a mention takes the type most of its mentions were given, "
                "its untagged occurrences are tagged too, and a one-word mention that is a word of a longer person "
                "mention becomes a person. The final scores and predictions files come after it; the evaluations "
                "during training do not."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only this many training sentences."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Use only this many validation sentences."})
    max_predict_samples: int | None = field(default=None, metadata={"help": "Use only this many test sentences."})
    demo_train_examples: int = field(default=4000, metadata={"help": "Demo task: training sentences generated."})
    demo_eval_examples: int = field(default=500, metadata={"help": "Demo task: held-out sentences generated."})

    def __post_init__(self):
        super().__post_init__()
        check_ranges(self, positive=("max_seq_length", "max_train_samples", "max_eval_samples", "max_predict_samples",
                                     "demo_train_examples", "demo_eval_examples"), non_negative=("context_words",),
                     fractions=("mention_replacement",))


def load_raw_datasets(data_args, training_args) -> DatasetDict:
    files = {"train": data_args.train_file, "validation": data_args.validation_file, "test": data_args.test_file}
    if data_args.dataset_name:
        raw = load_dataset(data_args.dataset_name, data_args.dataset_config_name)
        feature = raw[next(iter(raw))].features["ner_tags"]
        names = getattr(getattr(feature, "feature", None), "names", None)
        if names:  # ClassLabel ids -> IOB2 strings
            raw = raw.map(lambda b: {"ner_tags": [[names[t] for t in tags] for tags in b["ner_tags"]]}, batched=True)
        return DatasetDict({k: v.select_columns(["tokens", "ner_tags"]) for k, v in raw.items()})  # no documents
    if any(files.values()):
        return DatasetDict({split: vt_data.load_ner_file(path) for split, path in files.items() if path})
    logger.info("No data given: using the built-in demo tagging task.")
    return DatasetDict({
        "train": vt_data.make_demo_ner(data_args.demo_train_examples, seed=training_args.seed),
        "validation": vt_data.make_demo_ner(data_args.demo_eval_examples, seed=training_args.seed + 1),
        "test": vt_data.make_demo_ner(data_args.demo_eval_examples, seed=training_args.seed + 2),
    })


def label_list_from(train_tags, other_splits: dict) -> list[str]:
    """Sorted label set of the training split ("O" first). A label seen only outside training is an error: the
    model could never predict it and its scores would silently be wrong."""
    labels = sorted({t for tags in train_tags for t in tags}, key=lambda t: (t != "O", t[2:], t))
    for split, tag_lists in other_splits.items():
        unseen = sorted({t for tags in tag_lists for t in tags} - set(labels))
        if unseen:
            raise ValueError(f"Labels {unseen} occur in the {split} split but never in training; add them to the "
                             "training data or map them (e.g. to O) before running.")
    return labels


def ensemble(model, tokenizer, paths, model_args, training_args) -> TokenClassificationEnsemble:
    """`model` (loaded from --model_name_or_path) and the taggers at `paths` as one ensemble."""
    if training_args.do_train or not model_args.model_name_or_path:
        raise ValueError("--ensemble_with combines trained taggers: give --model_name_or_path and --do_eval and/or "
                         "--do_predict, without --do_train.")
    return ensemble_of(model, tokenizer, paths, cache_dir=model_args.cache_dir,
                       trust_remote_code=model_args.trust_remote_code,
                       attn_implementation=model_args.attn_implementation)


def main(argv=None):
    model_args, data_args, training_args, resume_from = parse_run_arguments(
        (ModelArguments, DataTrainingArguments, NerTrainingArguments), argv, logger)
    check_token_budget(data_args, training_args, logger)
    if data_args.max_tokens and data_args.mention_replacement:
        raise ValueError("--max_tokens cuts batches by the sentences' lengths, which --mention_replacement changes "
                         "every epoch: use one of them.")
    demo = not (data_args.dataset_name or data_args.train_file or data_args.validation_file or data_args.test_file)
    if demo and not (model_args.model_name_or_path or model_args.config_name or model_args.config_overrides):
        model_args.config_overrides = DEMO_CONFIG_OVERRIDES

    raw = load_raw_datasets(data_args, training_args)
    if "train" in raw:
        label_list = label_list_from(raw["train"]["ner_tags"],
                                     {k: v["ner_tags"] for k, v in raw.items() if k != "train"})
    elif model_args.model_name_or_path:
        label_list = None  # taken from the saved model below
    else:
        raise ValueError("Without a training split, pass --model_name_or_path of a trained tagger.")

    aux_label2id = []  # per auxiliary column: tag -> id, from the training split
    for split in list(raw):
        if "auxiliary_tags" in raw[split].column_names and not (data_args.auxiliary_columns and split == "train"):
            raw[split] = raw[split].remove_columns("auxiliary_tags")
    if data_args.auxiliary_columns:
        if "train" not in raw or "auxiliary_tags" not in raw["train"].column_names:
            raise ValueError("--auxiliary_columns needs a CoNLL --train_file with columns between the token and the "
                             "tag (e.g. 'EU NNP B-NP B-ORG').")
        columns = list(zip(*(word for sentence in raw["train"]["auxiliary_tags"] for word in sentence)))
        aux_label2id = [{tag: i for i, tag in enumerate(sorted(set(column)))} for column in columns]

    tokenizer = get_tokenizer(model_args, lambda rows: (" ".join(words) for words in rows["tokens"]), raw.get("train"),
                              default_vocab_size=2000 if demo else 8000)
    task_fields = {}
    if label_list is not None:
        task_fields = dict(id2label=dict(enumerate(label_list)), label2id={l: i for i, l in enumerate(label_list)})
    if aux_label2id:
        task_fields["auxiliary_num_labels"] = [len(column) for column in aux_label2id]
    model = build_model(model_args, tokenizer, "token_classification", **task_fields)
    move_label_smoothing_into_model(model, training_args)
    label_list = [model.config.id2label[i] for i in range(model.config.num_labels)]
    label2id = {l: i for i, l in enumerate(label_list)}
    for split, ds in raw.items():
        unknown = sorted({t for tags in ds["ner_tags"] for t in tags} - set(label_list))
        if unknown:
            raise ValueError(f"Labels {unknown} in the {split} split are not labels of the model {label_list}.")
    logger.info("Labels: %s; model: %s parameters", label_list, f"{model.num_parameters():,}")
    if data_args.ensemble_with:
        model = ensemble(model, tokenizer, data_args.ensemble_with, model_args, training_args)

    def inside(label: str, vocab: dict) -> str:  # the tag of a non-first sub-token with --label_all_tokens
        inner = "I-" + label[2:]
        return inner if label.startswith("B-") and inner in vocab else label

    def preprocess(batch, all_tokens: bool):
        enc = tokenizer(batch["tokens"], is_split_into_words=True, truncation=True,
                        max_length=data_args.max_seq_length, return_token_type_ids=False)
        enc["labels"] = []
        aux = batch.get("auxiliary_tags")
        if aux is not None:
            enc["auxiliary_targets"] = []  # (length, tasks) per sentence, at the positions that have a label
        for i, tags in enumerate(batch["ner_tags"]):
            previous, row, aux_row = None, [], []
            for word in enc.word_ids(i):
                first_piece, previous = word != previous, word
                if word is None or not batch["first"][i] <= word < batch["last"][i] or not (first_piece or all_tokens):
                    row.append(-100)  # special token, context, or a non-first sub-token
                    aux_row.append([-100] * len(aux_label2id))
                    continue
                row.append(label2id[tags[word] if first_piece else inside(tags[word], label2id)])
                if aux is not None:
                    aux_row.append([vocab.get(tag if first_piece else inside(tag, vocab), -100)
                                    for tag, vocab in zip(aux[i][word], aux_label2id)])
            enc["labels"].append(row)
            if aux is not None:
                enc["auxiliary_targets"].append(aux_row)
        return enc

    tokenized, in_context = {}, {}
    with training_args.main_process_first(desc="tokenization"):
        raw = limit_splits(raw, data_args)
        for split, ds in raw.items():
            in_context[split] = ds = vt_data.with_document_context(ds, data_args.context_words)
            # evaluation always labels first sub-tokens only, so labelled positions are exactly the words
            all_tokens = data_args.label_all_tokens and split == "train"
            tokenized[split] = ds.map(preprocess, batched=True, remove_columns=ds.column_names,
                                      fn_kwargs={"all_tokens": all_tokens}, desc=f"Tokenizing {split}")

    train_dataset = tokenized.get("train")
    if data_args.mention_replacement and train_dataset is not None:
        def encode(words, tags, first, last, auxiliary_tags=None):
            batch = {"tokens": [words], "ner_tags": [tags], "first": [first], "last": [last]}
            if auxiliary_tags is not None:
                batch["auxiliary_tags"] = [auxiliary_tags]
            return {k: v[0] for k, v in preprocess(batch, data_args.label_all_tokens).items()}

        train_dataset = MentionReplacement(in_context["train"], encode, data_args.mention_replacement,
                                                   seed=training_args.seed)

    seqeval = load_metric("seqeval_f1")

    def to_word_tags(predictions, labels):
        preds = predictions.argmax(-1) if predictions.ndim == 3 else predictions
        keep = labels != -100
        return ([[label_list[p] for p in row[k]] for row, k in zip(preds, keep)],
                [[label_list[t] for t in row[k]] for row, k in zip(labels, keep)])

    def tag_metrics(pred_tags, gold_tags):
        scores = seqeval.compute(predictions=pred_tags, references=gold_tags)
        flat = {k: v for k, v in scores.items() if k.startswith("overall_")}
        for name, values in scores.items():
            if isinstance(values, dict):
                flat[f"{name}_f1"] = values["f1"]
        return {k.replace("overall_", ""): v for k, v in flat.items()}

    def compute_metrics(eval_preds):
        return tag_metrics(*to_word_tags(*eval_preds))

    trainer = AtomicTrainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset if training_args.do_train else None,
        eval_dataset=tokenized.get("validation") if training_args.do_eval else None,
        processing_class=tokenizer,
        data_collator=TaggingDataCollator(tokenizer, pad_to_multiple_of=8),
        compute_metrics=compute_metrics,
        max_tokens=data_args.max_tokens,
        eval_max_tokens=data_args.eval_max_tokens,
    )

    all_metrics = {}
    if training_args.do_train:
        all_metrics.update(train_and_save(trainer, tokenized["train"], resume_from))

    def consistent_and_written(split, prefix, predictions, label_ids, metrics):
        pred_tags, gold_tags = to_word_tags(predictions, label_ids)
        if data_args.document_consistency:
            rows = raw[split]
            documents = rows["document"] if "document" in rows.column_names else range(len(rows))
            words = [w[:len(p)] for w, p in zip(rows["tokens"], pred_tags)]  # words cut by truncation stay O
            pred_tags = mentions.document_consistency(words, pred_tags, documents)
            metrics.update({f"{prefix}_{k}": v for k, v in tag_metrics(pred_tags, gold_tags).items()})
        if trainer.is_world_process_zero():
            path = os.path.join(training_args.output_dir, f"predictions_{split}.txt")
            with open(path, "w", encoding="utf-8") as f:  # CoNLL: token gold predicted; words cut by truncation -> O
                for words, gold, pred in zip(raw[split]["tokens"], raw[split]["ner_tags"], pred_tags):
                    pred = pred + ["O"] * (len(words) - len(pred))
                    f.write("".join(f"{w} {g} {p}\n" for w, g, p in zip(words, gold, pred)) + "\n")

    all_metrics.update(evaluate_splits(trainer, training_args, tokenized, compute_metrics, consistent_and_written))
    finish_run(trainer, training_args, model, "token-classification", data_args, len(tokenized.get("train", ())),
               all_metrics, argv, labels=label_list)
    return all_metrics


if __name__ == "__main__":
    sys.exit(run("python -m vanilla_transformer.run_ner", main))
