"""What a saved or exported directory holds and what runs it, for every command: which head (`recognise`), which
export and its files, which engine, which device, how many threads; a missing or wrong directory is an error that
names it."""

import os
from dataclasses import dataclass

from .files import check_output_path, finished_model, read_json
from .loading import check_json_files, is_local_dir, local_or_hub, looks_local, own_tokenizer, require

TAGGER = "VanillaTransformerForTokenClassification"
TRANSLATOR = "VanillaTransformerForConditionalGeneration"
ONNX_META = "onnx_tagger.json"  # what `export-onnx` writes beside model.onnx
DEVICES = ("auto", "cpu", "cuda")
ENGINES = {"translation": ("auto", "pytorch", "ctranslate2"), "tagging": ("auto", "pytorch", "onnxruntime")}
# the files only an export has, by the command that writes it: one of them present means an export
EXPORT_FILES = {"export-ctranslate2": ("model.bin", "shared_vocabulary.json"), "export-onnx": (ONNX_META, "model.onnx")}
# the files of a finished model (`files.finished_model`) that an export itself writes: any other means a model or a run
EXPORT_MODEL_FILES = {"export-ctranslate2": ("model.bin", "config.json"), "export-onnx": ("model.onnx",)}


# ---------------------------------------------------------------------------------------------------- which model


def is_ctranslate2_dir(path) -> bool:
    """A directory written by `export-ctranslate2`."""
    return os.path.isfile(os.path.join(os.fspath(path), "model.bin"))


def is_onnx_dir(path) -> bool:
    """A directory written by `export-onnx`."""
    return os.path.isfile(os.path.join(os.fspath(path), ONNX_META))


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
        raise FileExistsError(f"{output_dir} holds a finished model or checkpoints ({', '.join(held[:4])}), not only "
                              f"an earlier {command} export; --force replaces only those: give another directory.")
    if os.path.isdir(output_dir) and (not os.listdir(output_dir) or any(
            os.path.isfile(os.path.join(output_dir, name)) for name in EXPORT_FILES[command])):
        return output_dir
    raise FileExistsError(f"{output_dir} is not an earlier {command} export (it has none of "
                          f"{', '.join(EXPORT_FILES[command])}); --force replaces only those: give another directory.")


def check_export_files(path, names, command: str) -> None:
    """A `FileNotFoundError` naming the first of `names` missing from the export `path` (copied in part, or damaged)."""
    for name in names:
        if not os.path.isfile(os.path.join(os.fspath(path), name)):
            raise FileNotFoundError(f"{os.path.join(os.fspath(path), name)} is missing: the export is incomplete"
                                    f"{reexport(command)}.")


def export_tokenizer(path, command: str):
    """(the `tokenizers.Tokenizer` of tokenizer.json, tokenizer_config.json's settings) of the export `path` that
    `command` wrote, read without transformers (seconds to import): the tokenizer's own copy, without any padding or
    truncation a saved one carries; the settings name the special tokens and model_max_length. A missing or damaged
    file is an error naming it."""
    from tokenizers import Tokenizer

    path, config = os.fspath(path), os.path.join(os.fspath(path), "tokenizer_config.json")
    check_export_files(path, ("tokenizer.json",), command)
    check_json_files(path, ("tokenizer.json",), reexport(command))
    settings = read_json(config, reexport(command), mapping=True) if os.path.isfile(config) else {}
    return own_tokenizer(Tokenizer.from_file(os.path.join(path, "tokenizer.json"))), settings


def special_token_id(tokenizer, settings: dict, name: str, default: str) -> int | None:
    """The id in `tokenizer` of the special token `name` ("pad_token", "unk_token") that tokenizer_config.json's
    `settings` give (a string or {"content": ...}), else of `default`."""
    token = settings.get(name) or default
    return tokenizer.token_to_id(token["content"] if isinstance(token, dict) else token)


def architectures_of(path) -> list[str]:
    """The architectures a saved model's config names (a local one read without transformers); a local path without
    config.json, or with a damaged one, is an error naming it; an empty path (an unset shell variable) is refused
    before it reaches the Hub as a name."""
    if is_local_dir(path):  # (a path that is no directory, an empty one included, is named as such)
        config = os.path.join(path, "config.json")
        if not os.path.isfile(config):
            raise FileNotFoundError(f"{str(path)!r} is not a saved model directory (no config.json).")
        return read_json(config, mapping=True).get("architectures") or []
    from transformers import PretrainedConfig

    with local_or_hub(path):  # (also what a mistyped local folder written as "name" or "folder/name" ends in)
        return PretrainedConfig.get_config_dict(path)[0].get("architectures") or []


def is_tagger_dir(path) -> bool:
    """Whether `path` holds a saved tagger (its config names the architecture) or its ONNX export."""
    if looks_local(path) and os.path.isdir(path) and is_onnx_dir(path):
        return True
    try:
        return TAGGER in architectures_of(path)
    except FileNotFoundError:
        return False


def check_tagger_dir(path) -> None:
    """A clear error for a directory (or Hub id) that holds no saved tagger, naming what it holds."""
    architectures = architectures_of(path)
    if TAGGER not in architectures:
        raise ValueError(f"{str(path)!r} holds a {', '.join(architectures) or 'model of no known kind'}, not a tagger "
                         f"({TAGGER}): train one with `vanilla-transformer train-ner`.")


def check_translation_model_dir(path) -> None:
    """A clear error for a missing directory or one that holds something other than a translation model."""
    if is_local_dir(path):
        if is_ctranslate2_dir(path):
            return
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise FileNotFoundError(f"{str(path)!r} has no config.json: not a saved model (save_pretrained) nor an "
                                    "exported CTranslate2 model (model.bin).")
    architectures = architectures_of(path)
    if architectures and TRANSLATOR not in architectures:
        raise ValueError(f"{str(path)!r} holds a {', '.join(architectures)}, not a translation model ({TRANSLATOR}).")


@dataclass(frozen=True)
class ModelDir:
    """A saved or exported model directory, recognised once (`recognise`): its `task` ("translation" or "tagging")
    and the `engine` that runs it, resolved from the one asked for."""

    path: str
    task: str
    engine: str


def recognise(path, engine: str = "auto") -> ModelDir:
    """What `path` holds and what runs it; a missing directory, another kind of model or an engine that cannot run it
    is an error naming it. `engine` is a translation engine's (`--engine`); a tagger runs on its directory's."""
    path = os.fspath(path)
    if is_tagger_dir(path):
        return ModelDir(path, "tagging", resolve_engine(path, "auto", "tagging"))
    check_translation_model_dir(path)
    return ModelDir(path, "translation", resolve_engine(path, engine))


def recognise_tagger(path, engine: str = "auto") -> ModelDir:
    """A tagger's directory (saved, or written by `export-onnx`) and the engine (`--engine`) that runs it; a missing
    directory, another kind of model, an incomplete export or an engine that cannot run it is an error naming it."""
    path = os.fspath(path)
    engine = resolve_engine(path, engine, "tagging")
    if engine == "pytorch":
        check_tagger_dir(path)
    return ModelDir(path, "tagging", engine)


# ---------------------------------------------------------------------------------------------------- which engine


def resolve_engine(model_dir, engine: str, task: str = "translation") -> str:
    """The engine that runs `model_dir` for `task`: "auto" -> the export's engine (CTranslate2 for `export-ctranslate2`,
    ONNX Runtime for `export-onnx`), else PyTorch. An export asked to run in PyTorch, or a saved model in ONNX Runtime,
    is an error saying what to do instead (CTranslate2 converts a saved model on the fly)."""
    if engine not in ENGINES[task]:
        raise ValueError(f"engine must be one of {ENGINES[task]}, got {engine!r}.")
    local = looks_local(model_dir) and os.path.isdir(model_dir)
    command = "export-ctranslate2" if task == "translation" else "export-onnx"
    if local and any(os.path.isfile(os.path.join(model_dir, name)) for name in EXPORT_FILES[command]):
        check_export_files(model_dir, EXPORT_FILES[command], command)  # part of an export: the missing file named
    if task == "translation":
        exported, export_engine, kind = local and is_ctranslate2_dir(model_dir), "ctranslate2", "a CTranslate2 export"
    else:
        exported, export_engine, kind = local and is_onnx_dir(model_dir), "onnxruntime", "an ONNX export"
    if engine == "auto":
        return export_engine if exported else "pytorch"
    if exported and engine == "pytorch":
        raise ValueError(f"{str(model_dir)!r} is {kind}: use --engine {export_engine}.")
    if engine == "onnxruntime" and not exported:
        raise ValueError(f"{str(model_dir)!r} is not an ONNX export: run `vanilla-transformer export-onnx` on it "
                         "first, or use --engine pytorch.")
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
    """"auto" -> "cuda" where the engine sees a CUDA GPU, else "cpu"; "cuda" without one is a clear error. ONNX
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
