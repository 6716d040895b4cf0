"""What a saved or exported directory holds and what runs it, for every command: which head (`recognise`), which
export and its files, which engine, which device, how many threads; a missing or wrong directory is an error that
names it."""

import dataclasses
import os
from dataclasses import dataclass, field

from .files import check_output_path, finished_model, read_json
from .loading import from_pretrained, is_local_dir, local_or_hub, own_tokenizer, require
from .model_card import card_languages

TAGGER = "VanillaTransformerForTokenClassification"
TRANSLATOR = "VanillaTransformerForConditionalGeneration"
ONNX_META = "onnx_tagger.json"  # what `export-onnx` writes beside model.onnx
DEVICES = ("auto", "cpu", "cuda")
ENGINES = {"translation": ("auto", "pytorch", "ctranslate2"), "tagging": ("auto", "pytorch", "onnxruntime")}
# the files of a finished model (`files.finished_model`) that an export itself writes: any other means a model or a run
EXPORT_MODEL_FILES = {"export-ctranslate2": ("model.bin", "config.json"), "export-onnx": ("model.onnx",)}


# ---------------------------------------------------------------------------------------------------- which model
# what each export must hold: the first two only an export has (one of them present means an export)
EXPORT_NEEDS = {
    "ctranslate2": ("model.bin", "shared_vocabulary.json", "config.json", "tokenizer.json"),
    "onnx": (ONNX_META, "model.onnx", "tokenizer.json"),
}
COMMAND_OF = {"ctranslate2": "export-ctranslate2", "onnx": "export-onnx"}
# the JSON files of each format, read (and checked) once when it is recognised: "kept" for its loaders; "object" or
# "any" JSON value checked only, their own reader being the engine's (a tokenizer, CTranslate2's vocabulary)
JSON_FILES = {
    "saved": {
        "config.json": "kept",
        "generation_config.json": "kept",
        "tokenizer_config.json": "kept",
        "special_tokens_map.json": "kept",
        "tokenizer.json": "object",
    },
    "ctranslate2": {
        "config.json": "kept",
        "generation_config.json": "kept",
        "tokenizer_config.json": "kept",
        "shared_vocabulary.json": "any",
        "tokenizer.json": "object",
    },
    "onnx": {ONNX_META: "kept", "tokenizer_config.json": "kept", "tokenizer.json": "object"},
}


def reexport(command: str) -> str:
    """The advice that ends an error about an export's file: write the export again with `command`."""
    return f"; export the model again (vanilla-transformer {command} MODEL OUT --force)"


def check_export_target(output_dir, force: bool, command: str) -> str:
    """Where `command` may write its export: a new path; with `force`, an earlier export of the same command or an empty
    directory (replaced whole). Refused, naming the path: an empty path (an unset shell variable: the current
    directory), an existing one without `force`, and with `force` anything else (--force never deletes a user's
    other files)."""
    output_dir = check_output_path(output_dir, f"{command}'s output directory")
    if not os.path.lexists(output_dir):
        return output_dir
    if not force:
        raise FileExistsError(f"{output_dir} already exists; pass --force to replace it.")
    held = [name for name in finished_model(output_dir) if name not in EXPORT_MODEL_FILES[command]]
    if held:  # an export's file beside a finished model or checkpoints: --force would delete them
        raise FileExistsError(
            f"{output_dir} holds a finished model or checkpoints ({', '.join(held[:4])}), not only "
            f"an earlier {command} export; --force replaces only those: give another directory."
        )
    own = next(needs[:2] for fmt, needs in EXPORT_NEEDS.items() if COMMAND_OF[fmt] == command)
    if os.path.isdir(output_dir) and (
        not os.listdir(output_dir) or any(os.path.isfile(os.path.join(output_dir, name)) for name in own)
    ):
        return output_dir
    raise FileExistsError(
        f"{output_dir} is not an earlier {command} export (it has none of {', '.join(own)}); "
        "--force replaces only those: give another directory."
    )


def special_token_id(tokenizer, settings: dict, name: str, default: str) -> int | None:
    """The id in `tokenizer` of the special token `name` ("pad_token", "unk_token") that tokenizer_config.json's
    `settings` give (a string or {"content": ...}), else of `default`."""
    token = settings.get(name) or default
    return tokenizer.token_to_id(token["content"] if isinstance(token, dict) else token)


@dataclass(frozen=True)
class ModelDir:
    """A saved or exported model, recognised once (`recognise`) and then passed to every loader, engine, exporter and
    command instead of its path: its `task` ("translation", "tagging", or "other": an encoder of `pretrain-encoder`),
    the `engine` that runs it (resolved from the one asked for), its `format` ("saved": `save_pretrained`'s files or a
    Hub id; "ctranslate2" or "onnx": an export), the `architectures` its config names, the `languages` of its model
    card, the `files` a local directory holds (none for a Hub id) and the `contents` of its JSON files, each read
    once."""

    path: str
    task: str
    engine: str
    format: str = "saved"
    architectures: tuple = ()
    languages: tuple | None = None
    files: frozenset = frozenset()
    contents: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def local(self) -> bool:
        return bool(self.files)

    @property
    def advice(self) -> str:
        """What ends an error about one of its files: an export's, to write it again."""
        return reexport(COMMAND_OF[self.format]) if self.format in COMMAND_OF else ""

    def json(self, name: str) -> dict:
        """The contents of its JSON file `name`, as read when it was recognised ({} where it has none)."""
        return self.contents.get(name) or {}

    def load(self, cls, **kwargs):
        """`cls.from_pretrained` on it, its errors named (`loading.from_pretrained`)."""
        return from_pretrained(cls, self.path, **kwargs)

    def tokenizer(self, **kwargs):
        """Its transformers tokenizer (`AutoTokenizer`), its files checked already."""
        from transformers import AutoTokenizer

        with local_or_hub(self.path):
            return AutoTokenizer.from_pretrained(self.path, **kwargs)

    def export_tokenizer(self):
        """(the `tokenizers.Tokenizer` of an export's tokenizer.json, tokenizer_config.json's settings), read without
        transformers (seconds to import): the tokenizer's own copy, without any padding or truncation a saved one
        carries; the settings name the special tokens and model_max_length."""
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(os.path.join(self.path, "tokenizer.json"))
        return own_tokenizer(tokenizer), self.json("tokenizer_config.json")

    def holding(self, task: str) -> "ModelDir":
        """Itself, if it holds a model for `task`; else an error naming what it holds."""
        if task == self.task:
            return self
        held = {"ctranslate2": "a CTranslate2 export of a translation model", "onnx": "an ONNX export of a tagger"}.get(
            self.format
        )
        held = held or f"a {', '.join(self.architectures) or 'model of no known kind'}"
        if task == "tagging":
            raise ValueError(
                f"{self.path!r} holds {held}, not a tagger ({TAGGER}): train one with `vanilla-transformer train-ner`."
            )
        raise ValueError(f"{self.path!r} holds {held}, not a translation model ({TRANSLATOR}).")


def recognise(path, engine: str = "auto", task: str | None = None) -> ModelDir:
    """What `path` (a directory or a Hub id) holds and what runs it, read once: its format, config, model card and
    JSON files (each checked: a damaged one is named). A missing directory, an incomplete export, a model of another
    `task` than the one asked for, or an `engine` that cannot run it is an error naming it. `engine` is for its task
    (a tagger found where no task was asked for runs on its own directory's engine: "auto").

    Args:
        path: a directory written by `save_pretrained`, `export-ctranslate2` or `export-onnx`, or a Hub id.
        engine: "auto", or the engine asked for ("pytorch", "ctranslate2", "onnxruntime").
        task: "translation" or "tagging" to require it; None for whatever it holds.

    Returns:
        The `ModelDir`, to give every loader, engine and exporter instead of the path.

    Raises:
        FileNotFoundError: no such directory (an empty path included), no config.json, or an incomplete export.
        OSError: a damaged JSON file, named.
        ValueError: a model of another task, or an engine that cannot run it.

    Example:
        ```python
        from transformers import AutoModelForSeq2SeqLM

        from vanilla_transformer.model_dirs import recognise

        found = recognise("outputs/demo")  # ModelDir(path='outputs/demo', task='translation', engine='pytorch', ...)
        model, tokenizer = found.load(AutoModelForSeq2SeqLM), found.tokenizer()
        ```
    """
    path = os.fspath(path)
    if is_local_dir(path):  # (a path that is no directory, an empty one included, is named as such)
        files = frozenset(os.listdir(path))
        fmt = export_format(path, files)
        contents = read_contents(path, fmt, files)
        architectures = tuple(contents.get("config.json", {}).get("architectures") or ()) if fmt == "saved" else ()
    else:
        from transformers import PretrainedConfig

        with local_or_hub(path):  # (also what a mistyped local folder written as "name" or "folder/name" ends in)
            config = PretrainedConfig.get_config_dict(path)[0]
        files, fmt, contents = frozenset(), "saved", {"config.json": config}
        architectures = tuple(config.get("architectures") or ())
    found_task = {"ctranslate2": "translation", "onnx": "tagging"}.get(fmt) or (
        "tagging"
        if TAGGER in architectures
        else "translation"
        if TRANSLATOR in architectures or not architectures
        else "other"
    )
    found = ModelDir(path, found_task, "auto", fmt, architectures, card_languages(path), files, contents)
    if task is not None:
        found.holding(task)
    elif found_task != "translation":
        engine = "auto"
    if found_task == "other":
        return dataclasses.replace(found, engine="pytorch")
    return dataclasses.replace(found, engine=resolve_engine(found, engine))


def export_format(path: str, files: frozenset) -> str:
    """ "ctranslate2" or "onnx" for a directory holding one of an export's own files (then all it needs: a missing
    one is named), else "saved" (a config.json needed)."""
    for fmt, needs in EXPORT_NEEDS.items():
        if any(name in files for name in needs[:2]):
            missing = [name for name in needs if name not in files]
            if missing:
                raise FileNotFoundError(
                    f"{os.path.join(path, missing[0])} is missing: the export is incomplete{reexport(COMMAND_OF[fmt])}."
                )
            return fmt
    if "config.json" not in files:
        raise FileNotFoundError(
            f"{path!r} has no config.json: not a saved model (save_pretrained) nor an export "
            "(export-ctranslate2's model.bin, export-onnx's model.onnx)."
        )
    return "saved"


def read_contents(path: str, fmt: str, files: frozenset) -> dict:
    """The JSON files of a `fmt` directory, each read once: name -> contents for those its loaders read; every one
    that is not valid JSON (or, where kept, not a JSON object) is an error naming it."""
    advice = reexport(COMMAND_OF[fmt]) if fmt in COMMAND_OF else ""
    contents = {}
    for name, rule in JSON_FILES[fmt].items():
        if name in files:
            values = read_json(os.path.join(path, name), advice, mapping=rule != "any")
            if rule == "kept":
                contents[name] = values
    return contents


# ---------------------------------------------------------------------------------------------------- ensembles


def ensemble_members(model, tokenizer, paths, cls, what: str, task: str | None = None, **kwargs) -> list:
    """`model` (whose tokenizer is `tokenizer`) and the `cls` models saved at `paths`, on `model`'s device: the
    members of an ensemble (`what` names them in errors), which must hold models for `task` where given and agree
    (`check_members_agree`). `kwargs` go to `from_pretrained` of the tokenizers and models."""
    members = [model]
    tokenizer_kwargs = {k: v for k, v in kwargs.items() if k in ("cache_dir", "trust_remote_code")}
    for path in paths:
        found = recognise(path, task=task)  # a missing directory named as one, not as a malformed Hub id
        if found.format != "saved":
            raise ValueError(f"{found.path!r} is an export: the {what} of an ensemble are saved models.")
        member = found.load(cls, **kwargs).to(model.device)
        check_members_agree(model, tokenizer, member, found.tokenizer(**tokenizer_kwargs), found, what)
        members.append(member)
    return members


def check_members_agree(first, first_tokenizer, member, tokenizer, found: ModelDir, what: str) -> None:
    """Models combined must agree, else a `ValueError` naming what differs: the architecture (config.architectures),
    the direction (the source and target languages of the model cards, where both have them) and the vocabulary (the
    tokenizers whole, their normalisation and special tokens included, and the model's vocab_size)."""
    first_path, path = str(getattr(first, "name_or_path", "") or "the first"), found.path
    pairs = [
        (
            "architecture",
            first.config.architectures or [type(first).__name__],
            member.config.architectures or [type(member).__name__],
        ),
        ("vocab_size", first.config.vocab_size, member.config.vocab_size),
        ("tokenizer vocabulary", first_tokenizer.get_vocab(), tokenizer.get_vocab()),
        ("tokenizer", tokenizer_definition(first_tokenizer), tokenizer_definition(tokenizer)),
    ]
    for name, expected, given in pairs:
        if expected != given:
            shown = f"{given!r} differs from {expected!r}"
            if isinstance(expected, dict) and isinstance(given, dict):  # the parts that differ, not the whole
                shown = (
                    "its "
                    + ", ".join(
                        sorted(k for k in expected.keys() | given.keys() if expected.get(k) != given.get(k))[:5]
                    )
                    + " differ"
                )
            raise ValueError(
                f"The {name} of {path!r} ({shown}) does not match {first_path!r}'s: the {what} of an "
                "ensemble must share one tokenizer and architecture."
            )
    if os.path.isdir(first_path) and found.local:
        expected, languages = card_languages(first_path), found.languages
        if expected and languages and expected != languages:
            raise ValueError(
                f"{path!r} translates {languages[0]}->{languages[1]} but {first_path!r} translates "
                f"{expected[0]}->{expected[1]} (their model cards' languages): the {what} of an ensemble "
                "must share one direction."
            )


def tokenizer_definition(tokenizer) -> dict | None:
    """A transformers tokenizer's whole definition (its `tokenizers` JSON: vocabulary, merges, normalisation, special
    tokens), where it has one."""
    import json

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    definition = json.loads(backend.to_str())
    for setting in ("truncation", "padding"):  # how a call cuts and pads, not what the tokens are
        definition.pop(setting, None)
    return definition


# ---------------------------------------------------------------------------------------------------- which engine


def resolve_engine(found: ModelDir, engine: str) -> str:
    """The engine that runs `found` for its task: "auto" -> the export's engine (CTranslate2 for `export-ctranslate2`,
    ONNX Runtime for `export-onnx`), else PyTorch. An export asked to run in PyTorch, or a saved model in ONNX Runtime,
    is an error saying what to do instead (CTranslate2 converts a saved model on the fly)."""
    if engine not in ENGINES[found.task]:
        raise ValueError(f"engine must be one of {ENGINES[found.task]}, got {engine!r}.")
    export_engine = {"ctranslate2": "ctranslate2", "onnx": "onnxruntime"}.get(found.format)
    if engine == "auto":
        return export_engine or "pytorch"
    if export_engine and engine == "pytorch":
        kind = "a CTranslate2 export" if found.format == "ctranslate2" else "an ONNX export"
        raise ValueError(f"{found.path!r} is {kind}: use --engine {export_engine}.")
    if engine == "onnxruntime" and found.format != "onnx":
        raise ValueError(
            f"{found.path!r} is not an ONNX export: run `vanilla-transformer export-onnx` on it "
            "first, or use --engine pytorch."
        )
    return engine


def default_threads() -> int:
    """The CPU threads a command runs on when not told (`--threads 0`), counted as torch counts its own but without
    importing it: the physical cores this process may run on, at most MKL_NUM_THREADS or else OMP_NUM_THREADS."""
    try:
        cpus = os.sched_getaffinity(0)
        cores = set()
        for cpu in cpus:
            topology = f"/sys/devices/system/cpu/cpu{cpu}/topology"
            with open(f"{topology}/physical_package_id") as package, open(f"{topology}/core_id") as core:
                cores.add((package.read().strip(), core.read().strip()))
        count = len(cores)
    except AttributeError:  # macOS, Windows: no affinity or topology to read
        count = os.cpu_count() or 1
    except OSError:  # no topology (some containers): every CPU
        count = len(cpus)
    for name in ("MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        if os.environ.get(name, "").strip().isdigit() and int(os.environ[name]) > 0:
            return min(count, int(os.environ[name]))
    return count


def resolve_device(device: str, engine: str = "pytorch") -> str:
    """ "auto" -> "cuda" where the engine sees a CUDA GPU, else "cpu"; "cuda" without one is a clear error. ONNX
    Runtime exports run on the CPU."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}.")
    if device == "cpu":
        return device
    if engine == "onnxruntime":
        if device == "cuda":
            raise ValueError("--device cuda: the ONNX export runs on the CPU; use --engine pytorch on a GPU.")
        return "cpu"
    if engine == "ctranslate2":
        found = require("ctranslate2").get_cuda_device_count() > 0
        where = "CTranslate2 sees no CUDA GPU (its wheels need CUDA 12's cuBLAS)"
    else:
        import torch

        found = torch.cuda.is_available()
        where = "PyTorch sees no CUDA GPU (a CPU build of torch, or no driver)"
    if device == "cuda" and not found:
        raise ValueError(f"--device cuda: {where}.")
    return "cuda" if found else "cpu"
