"""The tokenizer, config and model a training command starts from (a preset, a saved model or a config), and the
tagging collator."""

import logging
import os
import shutil

import numpy as np
import torch
from transformers import (
    AutoConfig,
    AutoModelForMaskedLM,
    AutoModelForSeq2SeqLM,
    AutoModelForTokenClassification,
    DataCollatorForLanguageModeling,
    DataCollatorForTokenClassification,
)

from ..loading import load_model, local_or_hub
from ..model.configuration_vanilla_transformer import PRESETS, VanillaTransformerConfig
from ..tokenization import check_tokenizer_matches_config, load_tokenizer, train_tokenizer
from .arguments import ModelArguments, parse_config_overrides

logger = logging.getLogger(__name__)


class TaggingDataCollator(DataCollatorForTokenClassification):
    """`DataCollatorForTokenClassification` that also pads `auxiliary_targets` (length x tasks per example, see
    `VanillaTransformerForTokenClassification`) with -100 to the batch's padded length."""

    def torch_call(self, features):
        if not features or "auxiliary_targets" not in features[0]:
            return super().torch_call(features)
        features = [dict(f) for f in features]  # do not pop from the dataset's own rows
        targets = [torch.as_tensor(f.pop("auxiliary_targets"), dtype=torch.long) for f in features]
        batch = super().torch_call(features)
        length = batch["input_ids"].shape[1]
        padded = torch.full((len(targets), length, targets[0].shape[-1]), -100, dtype=torch.long)
        for row, target in zip(padded, targets):
            if self.tokenizer.padding_side == "left":
                row[length - len(target) :] = target
            else:
                row[: len(target)] = target
        batch["auxiliary_targets"] = padded  # (B, T, tasks)
        return batch


def evenly_spaced(rows, n: int):
    """At most `n` of `rows` (a Dataset or a list), evenly spaced over it: a sample of every part of a corpus that
    concatenates several sources."""
    if n >= len(rows):
        return rows
    index = np.linspace(0, len(rows) - 1, n).round().astype(np.int64)
    return rows.select(index) if hasattr(rows, "select") else [rows[i] for i in index]


def tokenizer_cache_path(rows, vocab_size: int, samples: int) -> str | None:
    """Where the BPE trained on `rows` is kept: beside the Arrow files of a Dataset read from disk, named by a hash of
    those files (path, size, time: changed data gives another name) and the training settings. None for data in
    memory, whose tokenizer is trained each time."""
    files = [f["filename"] for f in getattr(rows, "cache_files", None) or []]
    if not files:
        return None
    from datasets.fingerprint import Hasher

    from .. import __version__

    key = Hasher.hash(
        [[f, os.path.getsize(f), os.path.getmtime(f)] for f in files] + [vocab_size, samples, __version__]
    )
    return os.path.join(os.path.dirname(files[0]), f"vanilla-transformer-bpe-{key}")


def get_tokenizer(model_args: ModelArguments, texts_for_training, rows, default_vocab_size: int = 8000):
    """The given tokenizer, or a BPE trained on `texts_for_training(sample)`, the sample being at most
    --tokenizer_train_samples of the training `rows`, evenly spaced. A BPE trained on a Dataset read from disk is saved
    beside its files and loaded, not trained again, by the next run on the same data (under several processes: the
    main process trains it first, the others load it)."""
    name = model_args.tokenizer_name or model_args.model_name_or_path
    if name:
        return load_tokenizer(name, cache_dir=model_args.cache_dir, trust_remote_code=model_args.trust_remote_code)
    if rows is None:
        raise ValueError(
            "No tokenizer given (--tokenizer_name or --model_name_or_path) and no training split to train one on."
        )
    vocab_size, samples = model_args.vocab_size or default_vocab_size, model_args.tokenizer_train_samples
    if not hasattr(rows, "__len__"):  # a stream: its first examples, the tokenizer trained again by each run
        logger.info(
            "Training a BPE tokenizer of %d tokens on the first %s training examples", vocab_size, f"{samples:,}"
        )
        return train_tokenizer(texts_for_training(rows.take(samples)), vocab_size=vocab_size, show_progress=True)
    cached = tokenizer_cache_path(rows, vocab_size, samples)
    if cached and os.path.isfile(os.path.join(cached, "tokenizer.json")):
        logger.info("Tokenizer: %s (trained by an earlier run on the same data)", cached)
        return load_tokenizer(cached)
    sample = evenly_spaced(rows, samples)
    logger.info(
        "Training a BPE tokenizer of %d tokens on %s of %s training examples",
        vocab_size,
        f"{len(sample):,}",
        f"{len(rows):,}",
    )
    tokenizer = train_tokenizer(texts_for_training(sample), vocab_size=vocab_size, show_progress=len(sample) > 100_000)
    if not cached:
        return tokenizer
    partial = f"{cached}.partial-{os.getpid()}"
    tokenizer.save_pretrained(partial)
    try:
        os.replace(partial, cached)  # whole or absent, also when several runs train at once
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
    return load_tokenizer(cached)  # loaded as a rerun will load it, so both hash alike for the tokenized-data cache


def build_config(model_args: ModelArguments, tokenizer, default_preset: str = "small", **task_fields):
    """Config from `--config_name` (preset, file or directory) + `--config_overrides`; vocabulary and special tokens
    from the tokenizer."""
    overrides = parse_config_overrides(model_args.config_overrides)
    special = dict(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
        decoder_start_token_id=tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.pad_token_id,
    )
    name = model_args.config_name or default_preset
    if name in PRESETS:
        return VanillaTransformerConfig.from_preset(name, **{**special, **task_fields, **overrides})
    if not os.path.exists(name):
        raise ValueError(
            f"--config_name {name!r} is neither a preset {sorted(PRESETS)} nor an existing file or directory."
        )
    config = VanillaTransformerConfig.from_pretrained(name)
    return VanillaTransformerConfig(**{**config.to_dict(), **special, **task_fields, **overrides})


def build_model(model_args: ModelArguments, tokenizer, task: str, **task_fields):
    """`task` is "seq2seq", "token_classification" or "masked_lm". A saved model is loaded (its tokenizer must agree
    with it); otherwise a new one is built from the config."""
    auto = {
        "seq2seq": AutoModelForSeq2SeqLM,
        "token_classification": AutoModelForTokenClassification,
        "masked_lm": AutoModelForMaskedLM,
    }[task]
    if model_args.model_name_or_path:
        with local_or_hub(model_args.model_name_or_path):
            config = AutoConfig.from_pretrained(
                model_args.model_name_or_path,
                cache_dir=model_args.cache_dir,
                trust_remote_code=model_args.trust_remote_code,
                **task_fields,
            )
        for key, value in parse_config_overrides(model_args.config_overrides).items():
            setattr(config, key, value)  # each field's own checks run here (@strict)
        if hasattr(config, "validate"):
            config.validate()  # and the checks across fields
        model = load_model(
            auto,
            model_args.model_name_or_path,
            config=config,
            cache_dir=model_args.cache_dir,
            trust_remote_code=model_args.trust_remote_code,
            attn_implementation=model_args.attn_implementation,
        )
    else:
        config = build_config(model_args, tokenizer, **task_fields)
        model = auto.from_config(config, attn_implementation=model_args.attn_implementation)
        if config.char_cnn_dim:
            model.set_token_characters(tokenizer)
    check_tokenizer_matches_config(tokenizer, model.config)
    return model


class WholeWordMaskCollator(DataCollatorForLanguageModeling):
    """Masks whole words of a "▁"-marked vocabulary: a word is a piece that starts with "▁" and the pieces after it
    up to the next such piece or special token. Of the chosen words' pieces 80% become `<mask>`, 10% a random token
    and 10% stay (BERT's recipe). Whole words, because the character features pool over a word: a word masked in part
    would still show its other pieces' spelling."""

    def __post_init__(self):
        super().__post_init__()
        tokens = self.tokenizer.convert_ids_to_tokens(list(range(len(self.tokenizer))))
        self.special = torch.zeros(len(tokens), dtype=torch.bool)
        self.special[self.tokenizer.all_special_ids] = True
        self.word_start = torch.tensor([t.startswith("▁") for t in tokens]) | self.special

    def torch_mask_tokens(self, inputs, special_tokens_mask=None, offset_mapping=None):
        labels = inputs.clone()
        special = self.special[inputs]  # (B, T)
        positions = torch.arange(inputs.shape[1]).expand_as(inputs)
        start = torch.where(self.word_start[inputs], positions, 0).cummax(1).values  # (B, T) where each word starts
        chosen = torch.rand(inputs.shape, generator=self.generator) < self.mlm_probability
        masked = chosen.gather(1, start) & ~special
        labels[~masked] = -100
        action = torch.rand(inputs.shape, generator=self.generator)
        inputs[masked & (action < 0.8)] = self.tokenizer.mask_token_id
        random_tokens = masked & (action >= 0.8) & (action < 0.9)
        inputs[random_tokens] = torch.randint(len(self.tokenizer), inputs.shape, generator=self.generator)[
            random_tokens
        ]
        return inputs, labels
