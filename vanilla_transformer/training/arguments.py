"""The training commands' arguments: the model's (`ModelArguments`), the paper's training defaults
(`PaperTrainingArguments` and one subclass per command), token budgets, and the run prologue that parses them."""

import ast
import logging
import math
import os
import sys
from dataclasses import dataclass, field, fields, replace

from transformers import HfArgumentParser, Seq2SeqTrainingArguments, TrainingArguments, set_seed
from transformers.trainer_utils import SaveStrategy, SchedulerType

from ..files import read_json
from ..model.configuration_vanilla_transformer import PRESETS, VanillaTransformerConfig
from . import precision
from .checkpoints import check_output_dir, last_checkpoint

logger = logging.getLogger(__name__)


@dataclass
class ModelArguments:
    model_name_or_path: str | None = field(
        default=None, metadata={"help": "A saved model (directory or Hub id) to continue from."}
    )
    config_name: str | None = field(
        default=None, metadata={"help": f"A preset name {sorted(PRESETS)}, or a config file or directory."}
    )
    config_overrides: str | None = field(
        default=None, metadata={"help": "Comma-separated config fields, e.g. 'd_model=256,encoder_layers=3'."}
    )
    tokenizer_name: str | None = field(
        default=None, metadata={"help": "A saved tokenizer; when absent a BPE is trained on the training split."}
    )
    vocab_size: int | None = field(
        default=None, metadata={"help": "Size of the BPE trained when no tokenizer is given (default 8000)."}
    )
    tokenizer_train_samples: int = field(
        default=500_000,
        metadata={"help": "At most this many training examples, evenly spaced over the split, train that BPE."},
    )
    attn_implementation: str | None = field(
        default=None,
        metadata={
            "help": "'sdpa', 'eager' or 'flex_attention' (block-sparse kernels compiled from the masks; trains on GPUs "
            "only). Default: eager when training in bf16 on a CPU (torch's SDPA backward in bf16 is slow "
            "there: docs/design.md), sdpa elsewhere."
        },
    )
    trust_remote_code: bool = field(default=False, metadata={"help": "Allow code from the model's Hub repository."})
    cache_dir: str | None = field(
        default=None,
        metadata={
            "help": "Where to cache Hub downloads and the Arrow files of local data (default: HF_HOME's caches)."
        },
    )

    def __post_init__(self):
        check_ranges(self, positive=("vocab_size", "tokenizer_train_samples"))


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
        if isinstance(value, float) and not math.isfinite(value):  # (1e999 reads as infinity)
            raise ValueError(f"--config_overrides: {key}={raw!r} is not a finite number.")
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


def trainer_default(name: str, value, arguments=TrainingArguments):
    """The field `name` of the argument class `arguments` (its help text kept) with another default."""
    return field(default=value, metadata=next(f.metadata for f in fields(arguments) if f.name == name))


# The argument classes live here, not in the scripts: Trainer pickles them into every checkpoint, so they must be
# importable by name also when a command runs as `python -m vanilla_transformer.commands.train_translation`.
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
    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "Train into an --output_dir that holds a finished model or checkpoints, replacing them (the old "
            "checkpoint-* directories are deleted first, so the directory holds one run). Without it such a "
            "directory is refused unless --resume_from_checkpoint continues the run there."
        },
    )


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


@dataclass
class TokenBudgetArguments:
    """Batches by a token budget instead of a number of examples (fairseq's --max-tokens), for every training
    command: the argument classes of the data derive from it."""

    max_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Training batches by a token budget instead of --per_device_train_batch_size: at most this many "
            "padded input tokens, and as many label tokens, per batch and process (fairseq's --max-tokens); examples "
            "of similar length together, batch order shuffled every epoch."
        },
    )
    eval_max_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Evaluation and prediction batches by a token budget instead of --per_device_eval_batch_size: at "
            "most this many padded input tokens, and as many label tokens, per batch and process."
        },
    )
    packing: bool = field(
        default=False,
        metadata={
            "help": "With --max_tokens (train-translation): every training batch has one shape, --max_tokens / "
            "--packing_length rows of --packing_length tokens, each row holding several pairs (sources in the "
            "encoder's rows, targets in the decoder's); each pair attends only to itself and its positions "
            "start at 0. Little padding, and one shape for --torch_compile."
        },
    )
    packing_length: int | None = field(
        default=None,
        metadata={
            "help": "The length of a packed row (--packing). Default: d_model / 2, at most 256 (longer rows: less "
            "padding, more attention between the pairs of a row), or the longest training example (input or "
            "label tokens) rounded up to a multiple of 8 when longer, at most --max_tokens."
        },
    )

    def __post_init__(self):
        check_ranges(self, positive=("max_tokens", "eval_max_tokens", "packing_length"))


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


# transformers' example flags (run_translation.py, run_ner.py) these commands do not take, each with what to do instead
EXAMPLE_FLAGS = {
    "source_prefix": "it is T5's task prefix; a model trained for one language pair needs none",
    "val_max_target_length": "use --generation_max_length (the longest translation evaluation generates)",
    "pad_to_max_length": "batches are padded to their longest example; for batches of one shape use --packing true",
    "overwrite_cache": "the Arrow caches of local files are rebuilt by themselves when a file changes",
    "ignore_pad_token_for_loss": "padding is always left out of the loss (labels -100)",
    "forced_bos_token": "it is for multilingual models (mBART); a model of one pair starts from decoder_start_token_id",
    "text_column_name": "the words are read from the `tokens` column (CoNLL files: the first column)",
    "label_column_name": "the tags are read from the `ner_tags` column (CoNLL files: the last column)",
    "task_name": "train-ner tags named entities only",
    "return_entity_level_metrics": "the scores of each entity type are always reported (eval_PER_f1, ...)",
}


def refuse_example_flags(args: list[str]) -> None:
    """A flag of transformers' examples that these commands do not take is a ValueError naming what to use instead
    (HfArgumentParser alone would only call it unknown)."""
    for arg in args:
        name = arg.removeprefix("--").split("=")[0]
        if arg.startswith("--") and name in EXAMPLE_FLAGS:
            raise ValueError(f"--{name} (a flag of transformers' examples) is not taken here: {EXAMPLE_FLAGS[name]}.")


def refuse_unknown(words: list[str]) -> None:
    """A ValueError naming the flags the parser does not know (each spelled in full: no abbreviation is taken), and
    never a value: a mistyped `--hub_tokn X` must not print the token."""
    if words:
        flags = sorted({word.split("=")[0] for word in words if word.startswith("--")})
        named = ", ".join(flags) if flags else f"{len(words)} value(s) with no flag before them"
        raise ValueError(f"unrecognized arguments: {named} (give each flag's full name; see --help).")


STAGES = ("do_train", "do_eval", "do_predict")
FLAG_TRUE, FLAG_FALSE = ("true", "yes", "t", "y", "1"), ("false", "no", "f", "n", "0")  # HfArgumentParser's booleans


def stages_given(args: list[str]) -> dict:
    """The --do_train / --do_eval / --do_predict values a command line sets (a bare flag is true)."""
    given = {}
    for i, arg in enumerate(args):
        name, _, value = arg.removeprefix("--").partition("=")
        if arg.startswith("--") and name in STAGES:
            following = args[i + 1].lower() if i + 1 < len(args) else ""
            value = value.lower() or (following if following in FLAG_TRUE + FLAG_FALSE else "true")
            given[name] = value in FLAG_TRUE
    return given


def default_stages(given: dict) -> dict:
    """With no stage set to true, every stage not set to false runs: no --do_* flag trains, evaluates and predicts;
    `--do_predict false` trains and evaluates."""
    return {} if any(given.values()) else {name: True for name in STAGES if name not in given}


def check_run(model_args, training_args) -> None:
    """What the parsed arguments cannot do together on this device, said before anything loads."""
    sharding = training_args.fsdp or os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true"
    if sharding and training_args.device.type == "cpu":  # accelerate would train unsharded, saying nothing
        raise ValueError(
            "--fsdp shards the model only on GPUs: accelerate runs FSDP on accelerators and trains an "
            "unsharded copy per process on CPUs. Drop --fsdp (or the accelerate config's FSDP section) "
            "to train data-parallel on CPUs (torchrun), or run on GPUs."
        )
    if (
        model_args.attn_implementation == "flex_attention"
        and training_args.device.type == "cpu"
        and training_args.do_train
    ):
        raise ValueError(
            "--attn_implementation flex_attention trains on GPUs only (torch has no flex attention "
            "backward on CPUs); train with sdpa or eager, and evaluate or serve with flex_attention."
        )


def default_attention(training_args) -> str:
    """eager when training in bf16 on a CPU (torch's SDPA backward in bf16 is slower there), else sdpa."""
    cpu_bf16 = training_args.bf16 and training_args.device.type == "cpu" and training_args.do_train
    return "eager" if cpu_bf16 else "sdpa"


def run_parser(dataclass_types) -> HfArgumentParser:
    """A training command's parser (its `build_parser`): the flags of its (model, data, training) dataclasses, each
    spelled in full (`--hub_tok X` would set --hub_token unseen)."""
    return HfArgumentParser(dataclass_types, allow_abbrev=False)


def parse_run_arguments(parser, argv=None, logger=None, defaults_for=None):
    """The run scripts' prologue: parse with `parser` (a command's `build_parser()`, or its dataclass types; a single
    `.json` argument is read as a file of arguments), log to stdout (warnings only on processes other than the
    first), run train + eval + predict when none is asked for, seed, and find the checkpoint to resume from.
    `defaults_for(args)` may return arguments placed before the user's, so the user's win. Returns (model_args,
    data_args, training_args, resume_from)."""
    parser = parser if isinstance(parser, HfArgumentParser) else run_parser(parser)
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 1 and args[0].endswith(".json"):
        values = read_json(args[0], mapping=True)
        refuse_example_flags([f"--{name}" for name in values])  # (a file of arguments is refused the same flags)
        if precision.accelerator_type() is None:
            values.setdefault("use_cpu", True)
        values.update(default_stages({name: values[name] for name in STAGES if name in values}))
        model_args, data_args, training_args = parser.parse_dict(values)
    else:
        refuse_example_flags(args)
        args += [f"--{name}" for name in default_stages(stages_given(args))]
        args = precision.with_device_default((defaults_for(args) if defaults_for else []) + args)
        *parsed, unknown = parser.parse_args_into_dataclasses(args=args, return_remaining_strings=True)
        refuse_unknown(unknown)
        model_args, data_args, training_args = parsed
    log = logger or logging.getLogger(__name__)
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        level=logging.INFO,
        handlers=[logging.StreamHandler(sys.stdout)],
    )
    if logger is not None and training_args.process_index != 0:
        logger.setLevel(logging.WARNING)
    check_run(model_args, training_args)
    precision.warn_if_slow_bf16(training_args, logger)
    log.info(
        "Device: %s x %d process(es), %s",
        training_args.device,
        training_args.world_size,
        "bf16 autocast" if training_args.bf16 else "fp16 autocast" if training_args.fp16 else "fp32",
    )
    if model_args.attn_implementation is None:
        model_args = replace(model_args, attn_implementation=default_attention(training_args))
    log.info("Attention: %s", model_args.attn_implementation)
    set_seed(training_args.seed)
    resume_from = last_checkpoint(training_args)
    check_output_dir(training_args, resume_from, model_args, data_args)
    if resume_from is not None:
        log.info("Resuming training from checkpoint %s", resume_from)
    return model_args, data_args, training_args, resume_from
