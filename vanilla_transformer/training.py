"""What `scripts/run_translation.py` and `scripts/run_ner.py` share: model arguments, building the config and model,
the tokenizer, the paper's optimizer defaults and resuming."""

import ast
import contextlib
import functools
import itertools
import math
import logging
import json
import os
import platform
import shutil
import sys
import time
import weakref
from dataclasses import dataclass, field, fields

import numpy as np
import torch

from transformers import (AutoConfig, AutoModelForMaskedLM, AutoModelForSeq2SeqLM, AutoModelForTokenClassification,
                          DataCollatorForTokenClassification, EvalPrediction, HfArgumentParser, Seq2SeqTrainer,
                          Seq2SeqTrainingArguments, Trainer, TrainerCallback, TrainingArguments, set_seed)
from transformers.trainer_utils import (PREFIX_CHECKPOINT_DIR, SaveStrategy, SchedulerType, get_last_checkpoint,
                                        rotate_checkpoints)

from .configuration_vanilla_transformer import PRESETS, VanillaTransformerConfig
from .tokenization import check_tokenizer_matches_config, load_tokenizer, train_tokenizer

logger = logging.getLogger(__name__)

@dataclass
class ModelArguments:
    model_name_or_path: str | None = field(
        default=None, metadata={"help": "A saved model (directory or Hub id) to continue from."})
    config_name: str | None = field(
        default=None, metadata={"help": f"A preset name {sorted(PRESETS)}, or a config file or directory."})
    config_overrides: str | None = field(
        default=None, metadata={"help": "Comma-separated config fields, e.g. 'd_model=256,encoder_layers=3'."})
    tokenizer_name: str | None = field(
        default=None, metadata={"help": "A saved tokenizer; when absent a BPE is trained on the training split."})
    vocab_size: int | None = field(
        default=None, metadata={"help": "Size of the BPE trained when no tokenizer is given (default 8000)."})
    tokenizer_train_samples: int = field(default=500_000, metadata={
        "help": "At most this many training examples, evenly spaced over the split, train that BPE."})
    attn_implementation: str | None = field(default=None, metadata={
        "help": "'sdpa', 'eager' or 'flex_attention' (block-sparse kernels compiled from the masks; trains on GPUs "
                "only). Default: eager when training in bf16 on a CPU (torch's SDPA backward in bf16 makes a whole "
                "training step there about 1.5x slower), sdpa elsewhere."})
    trust_remote_code: bool = field(default=False, metadata={"help": "Allow code from the model's Hub repository."})
    cache_dir: str | None = field(default=None, metadata={
        "help": "Where to cache Hub downloads and the Arrow files of local data (default: HF_HOME's caches)."})

    def __post_init__(self):
        check_ranges(self, positive=("vocab_size", "tokenizer_train_samples"))


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
                row[length - len(target):] = target
            else:
                row[:len(target)] = target
        batch["auxiliary_targets"] = padded  # (B, T, tasks)
        return batch


def parse_config_overrides(text: str | None) -> dict:
    """'d_model=256,normalize_before=true' -> {"d_model": 256, "normalize_before": True}; unknown keys and
    unparsable values raise ValueError naming them."""
    if not text:
        return {}
    known = {f.name for f in fields(VanillaTransformerConfig)}
    out = {}
    for item in text.split(","):
        if not item.strip():
            continue
        if "=" not in item:
            raise ValueError(f"--config_overrides item {item!r} is not key=value.")
        key, raw = (part.strip() for part in item.split("=", 1))
        if key not in known:
            raise ValueError(f"--config_overrides: unknown config field {key!r}.")
        lowered = raw.lower()
        if lowered in ("true", "false", "none", "null"):
            value = {"true": True, "false": False}.get(lowered)
        else:
            try:
                value = ast.literal_eval(raw)
            except (ValueError, SyntaxError):
                value = raw  # a bare string such as gelu or learned
        default = getattr(VanillaTransformerConfig, key, None)
        if isinstance(default, (int, float)) and not isinstance(default, bool) and not isinstance(value, (int, float)):
            raise ValueError(f"--config_overrides: {key}={raw!r} is not a number.")
        out[key] = value
    return out


def check_ranges(args, positive=(), non_negative=(), fractions=()) -> None:
    """An option out of its range is a ValueError naming the flag and the value, raised while the command line is
    parsed (`__post_init__` of the argument classes), before any data is read."""
    for name in positive:
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name} must be at least 1, got {value}.")
    for name in non_negative:
        if getattr(args, name) < 0:
            raise ValueError(f"--{name} must not be negative, got {getattr(args, name)}.")
    for name in fractions:
        if not 0.0 <= getattr(args, name) <= 1.0:
            raise ValueError(f"--{name} must lie between 0 and 1, got {getattr(args, name)}.")


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

    from . import __version__

    key = Hasher.hash([[f, os.path.getsize(f), os.path.getmtime(f)] for f in files] + [vocab_size, samples, __version__])
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
        raise ValueError("No tokenizer given (--tokenizer_name or --model_name_or_path) and no training split to train "
                         "one on.")
    vocab_size, samples = model_args.vocab_size or default_vocab_size, model_args.tokenizer_train_samples
    if not hasattr(rows, "__len__"):  # a stream: its first examples, the tokenizer trained again by each run
        logger.info("Training a BPE tokenizer of %d tokens on the first %s training examples", vocab_size,
                    f"{samples:,}")
        return train_tokenizer(texts_for_training(rows.take(samples)), vocab_size=vocab_size, show_progress=True)
    cached = tokenizer_cache_path(rows, vocab_size, samples)
    if cached and os.path.isfile(os.path.join(cached, "tokenizer.json")):
        logger.info("Tokenizer: %s (trained by an earlier run on the same data)", cached)
        return load_tokenizer(cached)
    sample = evenly_spaced(rows, samples)
    logger.info("Training a BPE tokenizer of %d tokens on %s of %s training examples", vocab_size, f"{len(sample):,}",
                f"{len(rows):,}")
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
    special = dict(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                   bos_token_id=tokenizer.bos_token_id,
                   decoder_start_token_id=tokenizer.bos_token_id if tokenizer.bos_token_id is not None
                   else tokenizer.pad_token_id)
    name = model_args.config_name or default_preset
    if name in PRESETS:
        return VanillaTransformerConfig.from_preset(name, **{**special, **task_fields, **overrides})
    if not os.path.exists(name):
        raise ValueError(f"--config_name {name!r} is neither a preset {sorted(PRESETS)} nor an existing file or directory.")
    config = VanillaTransformerConfig.from_pretrained(name)
    return VanillaTransformerConfig(**{**config.to_dict(), **special, **task_fields, **overrides})


def build_model(model_args: ModelArguments, tokenizer, task: str, **task_fields):
    """`task` is "seq2seq", "token_classification" or "masked_lm". A saved model is loaded (its tokenizer must agree
    with it); otherwise a new one is built from the config."""
    auto = {"seq2seq": AutoModelForSeq2SeqLM, "token_classification": AutoModelForTokenClassification,
            "masked_lm": AutoModelForMaskedLM}[task]
    if model_args.model_name_or_path:
        config = AutoConfig.from_pretrained(model_args.model_name_or_path, cache_dir=model_args.cache_dir,
                                            trust_remote_code=model_args.trust_remote_code, **task_fields)
        for key, value in parse_config_overrides(model_args.config_overrides).items():
            setattr(config, key, value)  # each field's own checks run here (@strict)
        if hasattr(config, "validate"):
            config.validate()  # and the checks across fields
        model = auto.from_pretrained(model_args.model_name_or_path, config=config, cache_dir=model_args.cache_dir,
                                     trust_remote_code=model_args.trust_remote_code,
                                     attn_implementation=model_args.attn_implementation)
    else:
        config = build_config(model_args, tokenizer, **task_fields)
        model = auto.from_config(config, attn_implementation=model_args.attn_implementation)
        if config.char_cnn_dim:
            model.set_token_characters(tokenizer)
    check_tokenizer_matches_config(tokenizer, model.config)
    return model


def native_bf16(device_type: str = "cpu") -> bool:
    """Whether bf16 matrix products have native kernels here. x86 CPUs without AVX-512 (e.g. AVX2-only laptops)
    compute them in a reference kernel: measured on an AVX2 EPYC, a bf16 matmul ran ~60x slower than fp32 (1.3 vs 77
    GFLOP/s). On x86 the kernels torch dispatches to say it (`ATEN_CPU_CAPABILITY=avx2` limits them); other
    architectures count as native, and `fast_bf16`'s measurement decides."""
    if device_type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device_type != "cpu":
        return True
    if platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86"):
        return torch.backends.cpu.get_cpu_capability().startswith("AVX512")
    return True


BF16_MIN_SPEEDUP = 1.2  # below this, bf16 autocast's casts eat the gain: train in fp32


@functools.cache
def bf16_matmul_speedup() -> float:
    """How many times faster a bf16 matrix product of the small preset's size runs than an fp32 one on this CPU
    (best of 5 each; about 0.05 s). 0 where bf16 has no native kernel."""
    if not native_bf16("cpu"):
        return 0.0
    generator = torch.Generator().manual_seed(0)  # the global seed stays untouched
    a, b = torch.rand(1024, 1024, generator=generator), torch.rand(1024, 256, generator=generator)

    def best_seconds(x, y):
        x @ y  # warm-up: kernel selection, first-touch memory
        times = []
        for _ in range(5):
            start = time.perf_counter()
            x @ y
            times.append(time.perf_counter() - start)
        return min(times)

    return best_seconds(a, b) / best_seconds(a.bfloat16(), b.bfloat16())


def fast_bf16(device_type: str | None = None) -> bool:
    """Whether bf16 autocast pays here: the recipes' and the demo's default for `--bf16`. On a CPU a native bf16
    kernel is not enough, the product must also run at least BF16_MIN_SPEEDUP times faster than fp32: a 2-core Xeon
    with AVX512-BF16 but no AMX ran it at 0.61x fp32 and the Multi30k recipe's steps 1.36x slower in bf16, where a
    2-core AMD EPYC (Zen 5, AVX512-BF16) trained the recipes 1.8-2.3x faster in bf16 (docs/results.md, "bf16 or
    fp32"). `device_type` None: the accelerator the Trainer will pick, else the CPU."""
    device_type = device_type or accelerator_type() or "cpu"
    if device_type != "cpu":
        return native_bf16(device_type)
    return bf16_matmul_speedup() >= BF16_MIN_SPEEDUP


def warn_if_slow_bf16(training_args, logger=None) -> None:
    if not (training_args.bf16 and training_args.device.type == "cpu") or fast_bf16("cpu"):
        return
    if native_bf16("cpu"):
        why = (f"a bf16 matrix product runs {bf16_matmul_speedup():.2f}x as fast as fp32 here, so bf16 autocast "
               "(which adds casts) gains nothing")
    else:
        why = ("this CPU has no native bf16 matrix products (no AVX-512/AMX), so bf16 autocast runs many times slower "
               "than fp32 here")
    (logger or logging.getLogger(__name__)).warning(f"--bf16 true: {why}; pass --bf16 false.")


def trainer_default(name: str, value, arguments=TrainingArguments):
    """The field `name` of the argument class `arguments` (its help text kept) with another default."""
    return field(default=value, metadata=next(f.metadata for f in fields(arguments) if f.name == name))


# The argument classes live here, not in the scripts: Trainer pickles them into every checkpoint, so they must be
# importable by name also when a command runs as `python -m vanilla_transformer.run_translation`.
@dataclass
class PaperTrainingArguments(TrainingArguments):  # the types are TrainingArguments' own (HfArgumentParser reads them)
    """TrainingArguments with the paper's optimizer (section 5.3: Adam with beta2 0.98, eps 1e-9, linear warm-up then
    inverse square root decay), label smoothing 0.1 (section 5.4) and quiet, CPU-friendly defaults. Every flag still
    overrides them. `logging_nan_inf_filter` is off: filtering reads every step's loss back from the device, which
    stalls a GPU (the logged loss shows a NaN as NaN instead)."""

    output_dir: str | None = trainer_default("output_dir", "outputs/run")
    learning_rate: float = trainer_default("learning_rate", 1e-3)
    adam_beta2: float = trainer_default("adam_beta2", 0.98)
    adam_epsilon: float = trainer_default("adam_epsilon", 1e-9)
    lr_scheduler_type: SchedulerType | str = trainer_default("lr_scheduler_type", "inverse_sqrt")
    warmup_steps: float = trainer_default("warmup_steps", 400)
    label_smoothing_factor: float = trainer_default("label_smoothing_factor", 0.1)
    per_device_train_batch_size: int = trainer_default("per_device_train_batch_size", 64)
    per_device_eval_batch_size: int = trainer_default("per_device_eval_batch_size", 128)
    num_train_epochs: float = trainer_default("num_train_epochs", 10.0)
    logging_steps: float = trainer_default("logging_steps", 50)
    save_strategy: SaveStrategy | str = trainer_default("save_strategy", "epoch")
    save_total_limit: int | None = trainer_default("save_total_limit", 2)
    report_to: None | str | list[str] = trainer_default("report_to", "none")
    logging_nan_inf_filter: bool = trainer_default("logging_nan_inf_filter", False)


@dataclass
class TranslationTrainingArguments(PaperTrainingArguments, Seq2SeqTrainingArguments):
    """`train-translation`: the paper's defaults, and evaluation by generating translations (BLEU)."""

    predict_with_generate: bool = trainer_default("predict_with_generate", True, Seq2SeqTrainingArguments)


@dataclass
class NerTrainingArguments(PaperTrainingArguments):
    """`train-ner`: the paper's optimizer, no label smoothing, batches of 32 sentences."""

    label_smoothing_factor: float = trainer_default("label_smoothing_factor", 0.0)
    per_device_train_batch_size: int = trainer_default("per_device_train_batch_size", 32)


@dataclass
class MlmTrainingArguments(PaperTrainingArguments):
    """`pretrain-encoder`: the paper's optimizer, no label smoothing."""

    label_smoothing_factor: float = trainer_default("label_smoothing_factor", 0.0)


def accelerator_type() -> str | None:
    """"cuda" or "mps" when this process can use one, else None (decided when a command starts, not at import)."""
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return None


def with_device_default(args: list[str]) -> list[str]:
    """`--use_cpu true` first when no accelerator exists and the command line does not say: without an accelerator,
    accelerate only forms a multi-process (gloo) group under torchrun when told it runs on CPUs (otherwise every
    process silently trains alone), and it lets --bf16 run on a CPU. With a GPU the Trainer takes it."""
    if accelerator_type() or any(a.split("=")[0] in ("--use_cpu", "--no_use_cpu") for a in args):
        return args
    return ["--use_cpu", "true", *args]


def move_label_smoothing_into_model(model, training_args) -> None:
    """Trainer's own label smoother computes a per-batch mean that ignores `num_items_in_batch` (wrong under gradient
    accumulation and DDP); the model's loss does it right, so the factor moves into the model config."""
    model.config.label_smoothing = training_args.label_smoothing_factor
    training_args.label_smoothing_factor = 0.0


def last_checkpoint(training_args):
    """The checkpoint to resume from: `--resume_from_checkpoint` (a path, or 'true' for the latest in output_dir)."""
    resume = training_args.resume_from_checkpoint
    if resume is None or str(resume).lower() == "false":
        return None
    if str(resume).lower() == "true":
        found = get_last_checkpoint(training_args.output_dir) if os.path.isdir(training_args.output_dir) else None
        if found is None:
            raise ValueError(f"--resume_from_checkpoint true: no checkpoint-* directory in {training_args.output_dir}.")
        resume = found
    if not os.path.isdir(resume):
        raise ValueError(f"--resume_from_checkpoint {resume!r} is not a directory.")
    check_checkpoint_files(resume)
    return resume


def check_checkpoint_files(checkpoint: str) -> None:
    """A damaged checkpoint file (trainer state, weights) is an error naming it, before training starts."""
    state = os.path.join(checkpoint, "trainer_state.json")
    try:
        with open(state, encoding="utf-8") as f:
            json.load(f)
    except FileNotFoundError:
        raise ValueError(f"{state} is missing: {checkpoint} is not a whole checkpoint.") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"{state} is truncated or corrupted ({error}).") from None
    weights = os.path.join(checkpoint, "model.safetensors")
    if os.path.isfile(weights):
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(weights, framework="pt"):  # checks the header and that the file holds every tensor
                pass
        except (SafetensorError, OSError, ValueError) as error:
            raise ValueError(f"{weights} is truncated or corrupted ({error}).") from None


def write_card_and_push(trainer, training_args, model, task: str, dataset_name: str, train_samples, languages=None,
                        labels=None, wall_seconds=None, argv=None) -> None:
    """End of a run (main process): record what the run knows, render README.md next to the model, and with
    `--push_to_hub` upload the directory (`--hub_model_id`, default: the output directory's name)."""
    if not trainer.is_world_process_zero():
        return
    from .model_card import invoked_command, push_model_dir, render_card, write_card_info

    write_card_info(training_args.output_dir, task, dataset_name, train_samples, invoked_command(argv), training_args,
                    languages=languages, labels=labels, wall_seconds=wall_seconds,
                    label_smoothing=model.config.label_smoothing)
    repo_id = training_args.hub_model_id or os.path.basename(os.path.abspath(training_args.output_dir))
    render_card(training_args.output_dir, repo_id)
    if training_args.push_to_hub:
        push_model_dir(training_args.output_dir, repo_id, token=training_args.hub_token,
                       private=bool(training_args.hub_private_repo))


class AtomicCheckpoints(TrainerCallback):
    """Checkpoints appear atomically: each is written into `OUTPUT_DIR/.staging/checkpoint-N` and renamed to
    `OUTPUT_DIR/checkpoint-N` only when complete, so a process killed while saving leaves every visible checkpoint
    loadable and `--resume_from_checkpoint true` picks a whole one. The Trainer writes a checkpoint into
    `args.output_dir`: this callback points that at the staging folder from the moment a save is decided (the end of a
    step or an epoch, or an evaluation under `--save_strategy best`) until `on_save`, where the folder is renamed and
    the output directory restored. (With `--push_to_hub` the Trainer uploads checkpoints in the background from their
    folder, so they are written in place: the trainer does not add this callback.)"""

    def __init__(self, accelerator):
        self.accelerator = accelerator
        self.run_dir = None  # the real output directory while args.output_dir points at the staging folder

    def stage(self, args) -> None:
        if self.run_dir is not None:
            return
        self.run_dir = args.output_dir
        staging = os.path.join(self.run_dir, ".staging")
        if args.should_save and os.path.isdir(staging):
            shutil.rmtree(staging)  # left over by a killed save
        self.accelerator.wait_for_everyone()
        args.output_dir = staging

    def unstage(self, args) -> None:
        if self.run_dir is not None:
            args.output_dir, self.run_dir = self.run_dir, None

    def on_step_end(self, args, state, control, **kwargs):
        if control.should_save:
            self.stage(args)

    on_epoch_end = on_step_end

    def on_evaluate(self, args, state, control, **kwargs):
        if args.save_strategy == "best":  # the Trainer decides to save after this callback, when the metric improved
            self.stage(args)

    def on_step_begin(self, args, state, control, **kwargs):
        self.unstage(args)  # staged for a save that did not happen (no new best)

    on_train_end = on_step_begin

    def on_save(self, args, state, control, **kwargs):
        staging, run_dir = args.output_dir, self.run_dir
        self.unstage(args)
        if run_dir is None:
            return
        self.accelerator.wait_for_everyone()  # every process has written its part (RNG states)
        if args.should_save:
            name = f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
            final = os.path.join(run_dir, name)
            if os.path.isdir(final):
                shutil.rmtree(final)
            os.replace(os.path.join(staging, name), final)  # the atomic step
            if state.best_model_checkpoint:
                state.best_model_checkpoint = state.best_model_checkpoint.replace(staging, run_dir)
            rotate_checkpoints(output_dir=run_dir, save_total_limit=args.save_total_limit,
                               best_model_checkpoint=state.best_model_checkpoint, use_mtime=False)
        self.accelerator.wait_for_everyone()


class AtomicCheckpointMixin:
    """A Trainer whose checkpoints appear atomically (AtomicCheckpoints)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.args.push_to_hub:
            self.add_callback(AtomicCheckpoints(self.accelerator))


class InOrderEvaluationMixin:
    """Evaluation and prediction keep the dataset's order. (transformers 5 applies `--train_sampling_strategy
    group_by_length` to evaluation too; the metrics survive the shuffle, but the predictions files would pair each
    prediction with another sentence's source.) The strategy is a training choice: while an evaluation or test
    loader is built, it reads as the default, which evaluates in order."""

    def get_eval_dataloader(self, eval_dataset=None):
        with training_order_off(self.args):
            return super().get_eval_dataloader(eval_dataset)

    def get_test_dataloader(self, test_dataset):
        with training_order_off(self.args):
            return super().get_test_dataloader(test_dataset)


@contextlib.contextmanager
def training_order_off(args):
    strategy = args.train_sampling_strategy
    args.train_sampling_strategy = "random"
    try:
        yield
    finally:
        args.train_sampling_strategy = strategy


@dataclass
class TokenBudgetArguments:
    """Batches by a token budget instead of a number of examples (fairseq's --max-tokens), for every training
    command: the argument classes of the data derive from it."""

    max_tokens: int | None = field(default=None, metadata={
        "help": "Training batches by a token budget instead of --per_device_train_batch_size: at most this many padded "
                "input tokens, and as many label tokens, per batch and process (fairseq's --max-tokens); examples "
                "of similar length together, batch order shuffled every epoch."})
    eval_max_tokens: int | None = field(default=None, metadata={
        "help": "Evaluation and prediction batches by a token budget instead of --per_device_eval_batch_size: at most "
                "this many padded input tokens, and as many label tokens, per batch and process."})
    packing: bool = field(default=False, metadata={
        "help": "With --max_tokens (train-translation): every training batch has one shape, --max_tokens / "
                "--packing_length rows of --packing_length tokens, each row holding several pairs (sources in the "
                "encoder's rows, targets in the decoder's); each pair attends only to itself and its positions "
                "start at 0. Little padding, and one shape for --torch_compile."})
    packing_length: int | None = field(default=None, metadata={
        "help": "The length of a packed row (--packing). Default: d_model / 2, at most 256 (longer rows: less "
                "padding, more attention between the pairs of a row), or the longest training example (input or "
                "label tokens) rounded up to a multiple of 8 when longer, at most --max_tokens."})

    def __post_init__(self):
        check_ranges(self, positive=("max_tokens", "eval_max_tokens", "packing_length"))


def check_token_budget(data_args, training_args, logger=None, packs: bool = False) -> None:
    """The combinations of flags that --max_tokens (and --packing) rule out, or warn about; `packs`: the command
    can pack."""
    if data_args.max_tokens and str(training_args.train_sampling_strategy) == "group_by_length":
        raise ValueError("--max_tokens batches examples of similar length itself: drop --train_sampling_strategy "
                         "group_by_length.")
    if data_args.packing and not packs:
        raise ValueError("--packing is offered by train-translation only (a tagger's CRF would chain the tags of "
                         "the sentences packed into a row); drop --packing.")
    if data_args.packing and not data_args.max_tokens:
        raise ValueError("--packing fills rows up to a token budget: give --max_tokens too (rows per batch = "
                         "--max_tokens / --packing_length).")
    if data_args.packing_length and not data_args.packing:
        raise ValueError("--packing_length sets the length of packed rows: give --packing true too.")
    if data_args.packing and data_args.packing_length and data_args.packing_length > data_args.max_tokens:
        raise ValueError(f"--packing_length {data_args.packing_length} is above --max_tokens {data_args.max_tokens}: "
                         "a batch holds at least one row.")
    if data_args.max_tokens and training_args.torch_compile and not data_args.packing:
        (logger or logging.getLogger(__name__)).warning(
            "--torch_compile with --max_tokens: batch shapes change from step to step, which the compiler meets with "
            "dynamic shapes; measured, that ran far slower than eager on an H200 and gave nothing on a CPU "
            "(docs/gpu.md). Add --packing true (one shape for every batch), or leave --torch_compile off.")


def padded_lengths(source_lengths, target_lengths, max_tokens: int, pad_to_multiple_of: int = 1,
                   flag: str = "--max_tokens", split: str = "training"):
    """Input and label lengths rounded up to the collator's multiple; an example longer than the budget is a
    ValueError naming the flag, the example and its length."""
    source = -(-np.asarray(source_lengths, dtype=np.int64) // pad_to_multiple_of) * pad_to_multiple_of
    target = -(-np.asarray(target_lengths, dtype=np.int64) // pad_to_multiple_of) * pad_to_multiple_of
    too_long = np.flatnonzero(np.maximum(source, target) > max_tokens)
    if too_long.size:
        i = int(too_long[0])
        raise ValueError(f"{flag} {max_tokens} is below {split} example {i}'s length ({source[i]} input, "
                         f"{target[i]} label tokens after padding); {too_long.size} example(s) that long. Raise "
                         f"{flag} or lower the maximum lengths (--max_source_length / --max_target_length, "
                         "--max_seq_length).")
    return source, target


class TokenBudgetBatchSampler:
    """Batches of whole examples holding at most `max_tokens` padded tokens on each side: batch size x longest source
    <= max_tokens, and the same for the targets (fairseq's --max-tokens), lengths counted after padding to a multiple
    of `pad_to_multiple_of`. Examples are sorted by length (ties in a seeded random order) and cut into batches once,
    so the batches, and their number, are the same every epoch; each epoch visits them in a new order drawn from
    (seed, epoch) (`set_epoch`, which the Trainer calls). Under several processes accelerate deals the batches out in
    turn, every process the same number."""

    def __init__(self, source_lengths, target_lengths, max_tokens: int, seed: int = 0, shuffle: bool = True,
                 pad_to_multiple_of: int = 1):
        source, target = padded_lengths(source_lengths, target_lengths, max_tokens, pad_to_multiple_of)
        ties = np.random.default_rng([seed, 2**31]).random(len(source))
        self.order = np.lexsort((ties, target, source))  # by source length, then target length
        source, target = source[self.order], target[self.order]
        starts, window = [0], np.arange(1, max_tokens + 1)  # a batch holds at most max_tokens examples
        while starts[-1] < len(source):  # batch after batch: as many examples as fit, in this order
            first, end = starts[-1], starts[-1] + max_tokens
            widest = np.maximum(source[first:end], np.maximum.accumulate(target[first:end]))  # sources ascend
            fits = window[:len(widest)] * widest <= max_tokens  # (n examples) x (longest so far), which only grows
            starts.append(first + (int(np.argmin(fits)) if not fits.all() else len(fits)))
        self.starts = np.asarray(starts, dtype=np.int64)  # numpy, not lists: small also for 10M pairs
        self.seed, self.shuffle, self.epoch = seed, shuffle, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.starts) - 1

    def batch(self, i: int) -> list[int]:
        return self.order[self.starts[i]:self.starts[i + 1]].tolist()

    def __iter__(self):
        order = (np.random.default_rng([self.seed, self.epoch]).permutation(len(self)) if self.shuffle
                 else range(len(self)))
        for i in order:
            yield self.batch(i)


def pack_rows(source_lengths, target_lengths, length: int, seed: int = 0, open_rows: int = 1024):
    """Examples packed into rows of `length` tokens on each side (first fit, longest pairs first, ties in a seeded
    random order): (members, starts), row r holding the examples members[starts[r]:starts[r + 1]]. At most
    `open_rows` rows take examples at a time (the fullest is closed when another opens), so packing stays linear in
    the corpus. An example longer than `length` on either side is a ValueError naming it."""
    source, target = padded_lengths(source_lengths, target_lengths, length, flag="--packing_length")
    ties = np.random.default_rng([seed, 2**30]).random(len(source))
    order = np.lexsort((ties, -(source + target)))  # longest pairs first
    free = np.zeros((open_rows, 2), dtype=np.int64)  # tokens still free in each open row: source, target
    slot_row = np.full(open_rows, -1, dtype=np.int64)  # the row each open slot holds, -1: none
    row_of = np.empty(len(source), dtype=np.int64)
    rows = 0
    for i in order:
        fits = np.flatnonzero((free[:, 0] >= source[i]) & (free[:, 1] >= target[i]))
        if fits.size:
            slot = fits[0]
        else:  # a new row, in an empty slot or the fullest open row's
            slot = int(np.argmin(free.sum(axis=1))) if (slot_row >= 0).all() else int(np.argmin(slot_row))
            slot_row[slot], free[slot] = rows, length
            rows += 1
        row_of[i] = slot_row[slot]
        free[slot] -= (source[i], target[i])
    members = np.argsort(row_of, kind="stable")
    starts = np.searchsorted(row_of[members], np.arange(rows + 1))
    return members, starts


def default_packing_length(longest: int, max_tokens: int, d_model: int) -> int:
    """Rows of d_model / 2 tokens, at most 256, at least the longest example (rounded up to a multiple of 8), at most
    the token budget. Longer rows leave less padding at their ends but spend more on attention between the pairs of a
    row (all of it masked): per token and layer about 4 x length x d_model multiply-adds against 12 x d_model^2 in
    the projections. Measured (docs/training.md): 3% padding on Multi30k at 128 tokens; on WMT-like lengths 14.6% at
    128, 5.7% at 256 and 4.1% at 512, where the big shape trained 4% slower than at 256."""
    return max(-(-int(longest) // 8) * 8, min(max_tokens, d_model // 2, 256))


class PackedBatchSampler:
    """Training batches of `rows` packed rows of `length` tokens (`pack_rows`), the same shape every step: the rows
    are packed once and dealt, in a seeded random order, into batches (the last one topped up with empty rows by
    the collator); each epoch visits the batches in a new order drawn from (seed, epoch), every example once. Yields
    (row in the batch, example) keys for `RowsOf`."""

    def __init__(self, source_lengths, target_lengths, length: int, rows: int, seed: int = 0, shuffle: bool = True):
        self.members, self.starts = pack_rows(source_lengths, target_lengths, length, seed)
        self.length, self.rows = length, rows
        self.row_order = np.random.default_rng([seed, 2**29]).permutation(len(self.starts) - 1)
        self.seed, self.shuffle, self.epoch = seed, shuffle, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return -(-(len(self.starts) - 1) // self.rows)

    def batch(self, i: int) -> list[tuple[int, int]]:
        keys = []
        for slot, row in enumerate(self.row_order[i * self.rows:(i + 1) * self.rows]):
            keys += [(slot, int(e)) for e in self.members[self.starts[row]:self.starts[row + 1]]]
        return keys

    def __iter__(self):
        order = (np.random.default_rng([self.seed, self.epoch]).permutation(len(self)) if self.shuffle
                 else range(len(self)))
        for i in order:
            yield self.batch(i)


class RowsOf(torch.utils.data.Dataset):
    """A dataset read by (row, index) keys (`PackedBatchSampler`): example `index`, with the packed row it goes to."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitems__(self, keys):
        examples = self.dataset.__getitems__([index for _, index in keys])
        return [dict(example, row=row) for (row, _), example in zip(keys, examples)]

    def __getitem__(self, key):
        return self.__getitems__([key])[0]


@dataclass
class PackedSeq2SeqCollator:
    """Pairs -> packed rows of one shape (`rows` x `length` each side): `input_ids` holds the sources of a row one
    after another, `labels` their targets; `decoder_input_ids` each target shifted right behind its own start token;
    `attention_mask` / `decoder_attention_mask` number the pairs of a row 1, 2, ... (0: padding), which the model
    reads as segments (each pair attends to itself, positions restart). Examples carry their `row` (`RowsOf`)."""

    pad_token_id: int
    decoder_start_token_id: int
    rows: int
    length: int

    def __call__(self, features):
        shape = (self.rows, self.length)
        pad, empty = torch.full(shape, self.pad_token_id), torch.zeros(shape, dtype=torch.long)
        batch = {"input_ids": pad, "decoder_input_ids": pad.clone(), "labels": torch.full(shape, -100),
                 "attention_mask": empty, "decoder_attention_mask": empty.clone()}
        used = [[0, 0, 0] for _ in range(self.rows)]  # per row: pairs, source tokens, target tokens
        for feature in features:
            row = feature["row"]
            source, target = feature["input_ids"], feature["labels"]
            pair, s, t = used[row][0] + 1, used[row][1], used[row][2]
            if s + len(source) > self.length or t + len(target) > self.length:
                raise ValueError(f"A pair of {len(source)} source and {len(target)} target tokens overflows packed row "
                                 f"{row} (length {self.length}).")
            batch["input_ids"][row, s:s + len(source)] = torch.as_tensor(source)
            batch["attention_mask"][row, s:s + len(source)] = pair
            batch["labels"][row, t:t + len(target)] = torch.as_tensor(target)
            batch["decoder_input_ids"][row, t] = self.decoder_start_token_id
            batch["decoder_input_ids"][row, t + 1:t + len(target)] = torch.as_tensor(target[:-1])
            batch["decoder_attention_mask"][row, t:t + len(target)] = pair
            used[row] = [pair, s + len(source), t + len(target)]
        return batch


class TokenBudgetStream(torch.utils.data.IterableDataset):
    """Token-budget batches (collated) from a stream of tokenized examples (`--streaming`), repeated without end (the
    Trainer stops at --max_steps). The stream is read `buffer` examples at a time; each buffer is cut into batches as
    `TokenBudgetBatchSampler` cuts a whole corpus, in an order drawn from the seed and the buffer's number. Every
    process (and DataLoader worker) reads the whole stream and keeps every n-th batch, n the number of readers,
    leaving out the few batches a buffer has past a multiple of n: all readers take the same number of batches.
    Resuming reads the stream again from its start, skipping the batches already trained."""

    def __init__(self, examples, max_tokens: int, collate_fn, seed: int = 0, buffer: int = 100_000,
                 pad_to_multiple_of: int = 1, rank: int = 0, processes: int = 1, packing_length: int | None = None):
        self.examples, self.max_tokens, self.collate_fn, self.seed = examples, max_tokens, collate_fn, seed
        self.buffer, self.pad_to_multiple_of, self.rank, self.processes = buffer, pad_to_multiple_of, rank, processes
        self.packing_length = packing_length  # packed rows of this length (PackedBatchSampler) instead

    def batches(self, chunk):
        lengths = [len(e["input_ids"]) for e in chunk], [len(e.get("labels", e["input_ids"])) for e in chunk]
        if self.packing_length:
            return PackedBatchSampler(*lengths, self.packing_length, self.max_tokens // self.packing_length,
                                      seed=self.seed)
        return TokenBudgetBatchSampler(*lengths, self.max_tokens, seed=self.seed,
                                       pad_to_multiple_of=self.pad_to_multiple_of)

    def buffers(self):
        """Lists of `buffer` examples (the last one shorter), the stream read again and again."""
        while True:
            stream, empty = iter(self.examples), True
            for chunk in iter(lambda: list(itertools.islice(stream, self.buffer)), []):
                empty = False
                yield chunk
            if empty:
                raise ValueError("The training stream holds no examples.")

    def __iter__(self):
        worker = torch.utils.data.get_worker_info()
        workers, worker_id = (worker.num_workers, worker.id) if worker else (1, 0)
        readers, reader = self.processes * workers, self.rank * workers + worker_id
        for number, chunk in enumerate(self.buffers()):
            batches = self.batches(chunk)
            batches.set_epoch(number)
            kept = len(batches) // readers * readers
            for i, keys in enumerate(batches):
                if i < kept and i % readers == reader:
                    yield self.collate_fn([chunk[key] if isinstance(key, int) else dict(chunk[key[1]], row=key[0])
                                           for key in keys])


class EvaluationBatches:
    """Evaluation batches by a token budget, in the dataset's order (sort it by length first for little padding).
    They come in rounds of `processes` batches of one size, dealt one to each process: the processes' outputs
    gather into one tensor per step, in the dataset's order. The last round is topped up with repeats of its last
    example; `real_examples` says how many of the gathered outputs to keep."""

    def __init__(self, source_lengths, target_lengths, max_tokens: int, processes: int = 1,
                 pad_to_multiple_of: int = 1):
        source, target = padded_lengths(source_lengths, target_lengths, max_tokens, pad_to_multiple_of,
                                        "--eval_max_tokens", "evaluation")
        widest, n = np.maximum(source, target), len(source)
        self.real_examples, self.batches, first = n, [], 0
        while first < n:
            longest = np.maximum.accumulate(widest[first:first + max_tokens * processes])
            sizes = np.arange(1, -(-len(longest) // processes) + 1)  # examples per process
            fits = sizes * longest[np.minimum(sizes * processes, len(longest)) - 1] <= max_tokens
            size = int(np.argmin(fits)) if not fits.all() else len(fits)  # the round's longest x size fits
            size = min(size, -(-(n - first) // processes))
            take = min(size * processes, n - first)
            rows = list(range(first, first + take)) + [first + take - 1] * (size * processes - take)
            self.batches += [rows[p * size:(p + 1) * size] for p in range(processes)]
            first += take

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        return iter(self.batches)


def sequence_lengths(dataset, column: str):
    """The length of every row's `column` (a list column of a `datasets.Dataset`), read through Arrow."""
    import pyarrow.compute as pc

    return np.asarray(pc.list_value_length(dataset.with_format("arrow")[:][column]))


class TokenBudgetMixin:
    """Batches by a token budget instead of a number of examples: `max_tokens` for training
    (TokenBudgetBatchSampler), `eval_max_tokens` for evaluation and prediction (EvaluationBatches); the dataset's
    `input_ids` and `labels` (else `input_ids` again) give the lengths. None: the Trainer's own batches."""

    def __init__(self, *args, max_tokens: int | None = None, eval_max_tokens: int | None = None,
                 packing: bool = False, packing_length: int | None = None, **kwargs):
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
        from torch.utils.data import DataLoader

        return self.accelerator.prepare(DataLoader(
            dataset, batch_sampler=batch_sampler, collate_fn=collate_fn or self.data_collator,
            num_workers=self.args.dataloader_num_workers, pin_memory=self.args.dataloader_pin_memory))

    def packed_collator(self, length: int):
        config = self.model.config
        return PackedSeq2SeqCollator(config.pad_token_id, config.decoder_start_token_id, self.max_tokens // length,
                                     length)

    def get_train_dataloader(self):
        if not self.max_tokens:
            return super().get_train_dataloader()
        if not hasattr(self.train_dataset, "__len__"):  # a stream: its own batches on each process (not dispatched)
            from torch.utils.data import DataLoader

            length = self.packing_length if self.packing else None  # (the command sets it for a stream)
            stream = TokenBudgetStream(self.train_dataset, self.max_tokens,
                                       self.packed_collator(length) if length else self.data_collator,
                                       seed=self.args.seed, pad_to_multiple_of=self.pad_to_multiple_of(),
                                       rank=self.args.process_index, processes=self.args.world_size,
                                       packing_length=length)
            return DataLoader(stream, batch_size=None, num_workers=self.args.dataloader_num_workers,
                              pin_memory=self.args.dataloader_pin_memory)
        if self.packing:
            source, target = self.lengths(self.train_dataset)
            length = self.packing_length or default_packing_length(max(source.max(), target.max()), self.max_tokens,
                                                                   self.model.config.d_model)
            sampler = PackedBatchSampler(source, target, length, self.max_tokens // length, seed=self.args.seed)
            self.add_callback(EpochOfSampler(sampler))
            return self.loader(RowsOf(self.train_dataset), sampler, self.packed_collator(length))
        sampler = TokenBudgetBatchSampler(*self.lengths(self.train_dataset), self.max_tokens, seed=self.args.seed,
                                          pad_to_multiple_of=self.pad_to_multiple_of())
        self.add_callback(EpochOfSampler(sampler))
        return self.loader(self.train_dataset, sampler)

    def evaluation_loader(self, dataset):
        batches = EvaluationBatches(*self.lengths(dataset), self.eval_max_tokens, processes=self.args.world_size,
                                    pad_to_multiple_of=self.pad_to_multiple_of())
        self.evaluated_examples = batches.real_examples
        return self.loader(dataset, batches)

    def get_eval_dataloader(self, eval_dataset=None):
        if not self.eval_max_tokens:
            return super().get_eval_dataloader(eval_dataset)
        if eval_dataset is None or isinstance(eval_dataset, str):  # the eval dataset, or one of a dict of them
            eval_dataset = self.eval_dataset if eval_dataset is None else self.eval_dataset[eval_dataset]
        return self.evaluation_loader(eval_dataset)

    def get_test_dataloader(self, test_dataset):
        if not self.eval_max_tokens:
            return super().get_test_dataloader(test_dataset)
        return self.evaluation_loader(test_dataset)

    def on_real_examples(self, compute_metrics):
        """`compute_metrics` on the evaluated examples only, without the repeats that top up the last round of
        evaluation batches under several processes."""
        def cut(x):
            return tuple(cut(y) for y in x) if isinstance(x, tuple) else x[:self.evaluated_examples]

        def metrics(eval_preds):
            return compute_metrics(EvalPrediction(predictions=cut(eval_preds.predictions),
                                                  label_ids=cut(eval_preds.label_ids)))
        return metrics


class EpochOfSampler(TrainerCallback):
    """Gives a batch sampler the epoch about to run. The Trainer reaches a batch sampler's `set_epoch` itself, except
    under several processes on a run resumed in the middle of an epoch (where accelerate wraps it twice); then the
    epoch's batch order would be another epoch's."""

    def __init__(self, sampler):
        self.sampler = sampler

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.sampler.set_epoch(math.floor(state.epoch + 1e-6))  # whole epochs done (state.epoch is a float sum)


class AtomicTrainer(TokenBudgetMixin, InOrderEvaluationMixin, AtomicCheckpointMixin, Trainer):
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
            self.tokens_trained = (self.tokens_trained + (inputs["attention_mask"] != 0).sum()
                                   + (inputs["labels"] >= 0).sum())
            self.token_slots += inputs["attention_mask"].numel() + inputs["labels"].numel()
        return super().training_step(model, inputs, num_items_in_batch)

    def tokens_trained_all_processes(self) -> tuple[int, int]:
        """(real tokens, token slots) trained on by all processes."""
        if not torch.is_tensor(self.tokens_trained):
            return 0, 0
        counts = torch.stack([self.tokens_trained, self.tokens_trained.new_tensor(self.token_slots)])
        real, slots = self.accelerator.reduce(counts, reduction="sum").tolist()
        return int(real), int(slots)


class AtomicSeq2SeqTrainer(TokenCountMixin, TokenBudgetMixin, InOrderEvaluationMixin, AtomicCheckpointMixin,
                           Seq2SeqTrainer):
    pass


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
    limits = {"train": data_args.max_train_samples, "validation": data_args.max_eval_samples,
              "test": data_args.max_predict_samples}
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
    for split, prefix, enabled in (("validation", "eval", training_args.do_eval),
                                   ("test", "predict", training_args.do_predict)):
        if not enabled or split not in tokenized:
            continue
        predictions, label_ids, metrics = predict_split(trainer, tokenized[split], prefix, compute_metrics)
        if after is not None:
            after(split, prefix, predictions, label_ids, metrics)
        trainer.log_metrics(prefix, metrics)
        trainer.save_metrics(prefix, metrics)
        all_metrics.update(metrics)
    return all_metrics


def finish_run(trainer, training_args, model, task: str, data_args, train_samples, metrics: dict, argv=None,
               **card) -> None:
    """The end of every training command: after training, the model card (and the upload with --push_to_hub); then
    the run's metrics printed."""
    if training_args.do_train:
        write_card_and_push(trainer, training_args, model, task, dataset_label(data_args), train_samples,
                            wall_seconds=metrics.get("train_wall_seconds"), argv=argv, **card)
    if trainer.is_world_process_zero():
        print("\nMetrics:", {k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()})
    close_process_group(trainer)


def close_process_group(trainer) -> None:
    """Under torchrun, closes the process group once the run is done. Left to the interpreter's exit, a CPU (Gloo)
    worker thread still releasing the tensors of the last collective can abort the process after a good run
    ("terminate called without an active exception"). Closing it while the data-parallel wrapper still holds it would
    instead stop its threads from a destructor that keeps the interpreter's lock those threads wait for (a hang), so the
    wrapper goes first; where something else still holds the wrapper, the group is left to the exit as before."""
    if not torch.distributed.is_initialized():
        return
    wrapper = weakref.ref(trainer.model_wrapped)
    trainer.model_wrapped = trainer.model
    trainer.accelerator.free_memory()  # its references to the wrapper, then a garbage collection
    if wrapper() is None:
        torch.distributed.destroy_process_group()


def dataset_label(data_args) -> str:
    """A name for the training data in the model card: the Hub dataset, or the training files' folders."""
    if getattr(data_args, "dataset_name", None):
        return data_args.dataset_name
    paths = []
    for name in ("train_file", "train_conll_file"):  # one path, or a list of them (run_mlm.py)
        value = getattr(data_args, name, None) or []
        paths += [value] if isinstance(value, str) else value
    folders = dict.fromkeys(os.path.basename(os.path.dirname(os.path.abspath(path))) for path in paths)
    return " + ".join(folders) or "demo"


def parse_run_arguments(dataclass_types, argv=None, logger=None, defaults_for=None):
    """The run scripts' prologue: parse (a single `.json` argument is read as a file of arguments), log to stdout
    (warnings only on processes other than the first), run train + eval + predict when none is asked for, seed,
    and find the checkpoint to resume from. `defaults_for(args)` may return arguments placed before the user's, so
    the user's win. Returns (model_args, data_args, training_args, resume_from)."""
    parser = HfArgumentParser(dataclass_types)
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 1 and args[0].endswith(".json"):
        with open(args[0], encoding="utf-8") as f:
            values = json.load(f)
        if accelerator_type() is None:
            values.setdefault("use_cpu", True)
        model_args, data_args, training_args = parser.parse_dict(values)
    else:
        args = with_device_default((defaults_for(args) if defaults_for else []) + args)
        model_args, data_args, training_args = parser.parse_args_into_dataclasses(args=args)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO,
                        handlers=[logging.StreamHandler(sys.stdout)])
    if logger is not None and training_args.process_index != 0:
        logger.setLevel(logging.WARNING)
    if not (training_args.do_train or training_args.do_eval or training_args.do_predict):
        training_args.do_train = training_args.do_eval = training_args.do_predict = True
    sharding = training_args.fsdp or os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true"
    if sharding and training_args.device.type == "cpu":  # accelerate would train unsharded, saying nothing
        raise ValueError("--fsdp shards the model only on GPUs: accelerate runs FSDP on accelerators and trains an "
                         "unsharded copy per process on CPUs. Drop --fsdp (or the accelerate config's FSDP section) "
                         "to train data-parallel on CPUs (torchrun), or run on GPUs.")
    warn_if_slow_bf16(training_args, logger)
    (logger or logging.getLogger(__name__)).info(
        "Device: %s x %d process(es), %s", training_args.device, training_args.world_size,
        "bf16 autocast" if training_args.bf16 else "fp16 autocast" if training_args.fp16 else "fp32")
    if (model_args.attn_implementation == "flex_attention" and training_args.device.type == "cpu"
            and training_args.do_train):
        raise ValueError("--attn_implementation flex_attention trains on GPUs only (torch has no flex attention "
                         "backward on CPUs); train with sdpa or eager, and evaluate or serve with flex_attention.")
    if model_args.attn_implementation is None:
        cpu_bf16 = training_args.bf16 and training_args.device.type == "cpu" and training_args.do_train
        model_args.attn_implementation = "eager" if cpu_bf16 else "sdpa"
    (logger or logging.getLogger(__name__)).info("Attention: %s", model_args.attn_implementation)
    set_seed(training_args.seed)
    resume_from = last_checkpoint(training_args)
    if resume_from is not None:
        (logger or logging.getLogger(__name__)).info("Resuming training from checkpoint %s", resume_from)
    return model_args, data_args, training_args, resume_from
