"""Pretrain the encoder on text without labels by masked language modelling (Devlin et al., 2019; in the style of
transformers' examples/pytorch/language-modeling/run_mlm.py), then fine-tune it as a tagger:
`run_ner.py --model_name_or_path OUTPUT_DIR ...` loads the encoder and its tokenizer and adds a new tagging head.

Data: `--train_file` text files (one sentence per line, words split at whitespace; `--split_punctuation` splits
punctuation off the words as CoNLL files are tokenized) and/or `--train_conll_file` CoNLL column files (their tokens;
the tags are not used). Each sentence is tokenized word by word, exactly as run_ner.py does, and whole words are masked.
A BPE with a `<mask>` token is trained on the text unless `--tokenizer_name` gives one. The architecture flags
(`--config_name`, `--config_overrides`) must be the tagger's: fine-tuning keeps the encoder's shape.
"""

import logging
import math
from dataclasses import dataclass, field

from datasets import Dataset

from .. import data as vt_data
from ..evaluation.scores import masked_accuracy
from ..files import read_lines
from ..training.arguments import (
    MlmTrainingArguments,
    ModelArguments,
    TokenBudgetArguments,
    check_ranges,
    parse_run_arguments,
    run_parser,
)
from ..training.batching import check_token_budget
from ..training.models import WholeWordMaskCollator, build_model, get_tokenizer
from ..training.runs import finish_run, train_and_save
from ..training.trainers import AtomicTrainer
from ..words import words_of

logger = logging.getLogger(__name__)

MASK_TOKEN = "<mask>"


@dataclass
class DataTrainingArguments(TokenBudgetArguments):
    train_file: list[str] | None = field(
        default=None, metadata={"help": "Text files, one sentence per line, words separated by whitespace."}
    )
    train_conll_file: list[str] | None = field(
        default=None, metadata={"help": "CoNLL column files (token first; the other columns are not used)."}
    )
    split_punctuation: bool = field(
        default=False,
        metadata={
            "help": "Split punctuation off the words of --train_file lines ('bushes.' -> 'bushes .') as CoNLL-2003 is "
            "tokenized: the words `tag` reads from text."
        },
    )
    validation_split_percentage: int = field(
        default=5,
        metadata={"help": "Percentage of the sentences held out to report the masked-token loss and accuracy."},
    )
    max_seq_length: int = field(default=128, metadata={"help": "Sub-tokens kept per sentence."})
    mlm_probability: float = field(default=0.15, metadata={"help": "Share of the words masked in each sentence."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only this many training sentences."})

    def __post_init__(self):
        super().__post_init__()
        check_ranges(self, positive=("max_seq_length", "max_train_samples"))
        if not 0 < self.mlm_probability < 1:
            raise ValueError(f"--mlm_probability must lie between 0 and 1, got {self.mlm_probability}.")
        if not 0 <= self.validation_split_percentage < 100:
            raise ValueError(
                f"--validation_split_percentage must lie in [0, 100), got {self.validation_split_percentage}."
            )


def load_sentences(data_args) -> list[list[str]]:
    """Every sentence of the training files as a list of words; empty lines are skipped."""
    sentences = []
    for path in data_args.train_file or []:
        for line in read_lines(path):
            words = [word for word, _, _ in words_of(line)] if data_args.split_punctuation else line.split()
            if words:
                sentences.append(words)
    for path in data_args.train_conll_file or []:
        sentences.extend(vt_data.load_conll(path)["tokens"])
    if not sentences:
        given = [*(data_args.train_file or []), *(data_args.train_conll_file or [])]
        raise vt_data.DataError(f"No sentences in {given}.")
    return sentences


def build_parser():
    """The command's flags: the model's, the data's and the Trainer's (HfArgumentParser dataclasses)."""
    return run_parser((ModelArguments, DataTrainingArguments, MlmTrainingArguments))


def parse(argv):
    """The command line, checked: (model_args, data_args, training_args, the checkpoint to resume from)."""
    parsed = parse_run_arguments(build_parser(), argv, logger)
    check_token_budget(parsed[1], parsed[2], logger)
    if not (parsed[1].train_file or parsed[1].train_conll_file):
        raise ValueError(
            "Give the text to pretrain on: --train_file (one sentence per line) and/or --train_conll_file."
        )
    return parsed


def build_encoder(model_args, training_args, sentences):
    """The tokenizer (a BPE trained on the sentences unless given, with a mask token) and the masked-LM model."""
    tokenizer = get_tokenizer(model_args, lambda rows: (" ".join(words) for words in rows), sentences)
    if tokenizer.mask_token is None:
        tokenizer.add_special_tokens({"mask_token": MASK_TOKEN})
    model = build_model(model_args, tokenizer, "masked_lm", label_smoothing=training_args.label_smoothing_factor)
    logger.info("Model: %s parameters; %d sentences", f"{model.num_parameters():,}", len(sentences))
    return tokenizer, model


def tokenized_splits(sentences, tokenizer, data_args, training_args) -> dict:
    """The sentences tokenized word by word (as run_ner.py does), with a held-out validation share."""

    def tokenize(batch):
        return tokenizer(
            batch["tokens"],
            is_split_into_words=True,
            truncation=True,
            max_length=data_args.max_seq_length,
            return_token_type_ids=False,
        )

    with training_args.main_process_first(desc="tokenization"):
        dataset = Dataset.from_dict({"tokens": sentences}).map(
            tokenize, batched=True, remove_columns=["tokens"], desc="Tokenizing"
        )
    if not (data_args.validation_split_percentage and training_args.do_eval):
        return {"train": dataset}
    held_out = max(1, len(dataset) * data_args.validation_split_percentage // 100)
    splits = dataset.train_test_split(test_size=held_out, seed=training_args.seed)
    return {"train": splits["train"], "validation": splits["test"]}


def evaluate_with_perplexity(trainer) -> dict:
    scores = trainer.evaluate()
    scores["eval_perplexity"] = math.exp(min(scores["eval_loss"], 50.0))
    trainer.log_metrics("eval", scores)
    trainer.save_metrics("eval", scores)
    return scores


def main(argv=None):
    model_args, data_args, training_args, resume_from = parse(argv)
    sentences = load_sentences(data_args)[: data_args.max_train_samples]
    tokenizer, model = build_encoder(model_args, training_args, sentences)
    splits = tokenized_splits(sentences, tokenizer, data_args, training_args)
    trainer = AtomicTrainer(
        model=model,
        args=training_args,
        train_dataset=splits["train"] if training_args.do_train else None,
        eval_dataset=splits.get("validation") if training_args.do_eval else None,
        processing_class=tokenizer,
        data_collator=WholeWordMaskCollator(
            tokenizer, mlm_probability=data_args.mlm_probability, pad_to_multiple_of=8, seed=training_args.seed
        ),
        compute_metrics=masked_accuracy,
        preprocess_logits_for_metrics=lambda logits, labels: logits.argmax(-1),  # not (tokens x vocabulary) floats
        max_tokens=data_args.max_tokens,
        eval_max_tokens=data_args.eval_max_tokens,
    )
    metrics = {}
    if training_args.do_train:
        metrics.update(train_and_save(trainer, splits["train"], resume_from))
    if "validation" in splits and training_args.do_eval:
        metrics.update(evaluate_with_perplexity(trainer))
    finish_run(trainer, training_args, model, "fill-mask", data_args, len(splits["train"]), metrics, argv)
    return metrics
