"""Loading a saved directory, for every command: its model and tokenizer, ensemble members, optional dependencies; a
damaged or missing file is an error that names it. What a directory holds and what runs it: `model_dirs`."""

import copy
import os
import sys
from contextlib import contextmanager

from safetensors import SafetensorError

from .files import read_json


def looks_local(name_or_path) -> bool:
    """A path rather than a Hub id ("name" or "owner/name"): it exists, it is written as a path, or it is no valid Hub
    id at all (empty, a space, a trailing space or slash, ...: only a path can be meant)."""
    from huggingface_hub.utils import validate_repo_id

    text = os.fspath(name_or_path)
    if (
        os.path.exists(text)
        or text.startswith((".", "/", "~"))
        or text.count("/") > 1
        or (os.path.sep != "/" and os.path.sep in text)
    ):
        return True
    try:
        validate_repo_id(text)
    except ValueError:  # (huggingface_hub's HFValidationError)
        return True
    return False


def is_local_dir(name_or_path) -> bool:
    """Whether `name_or_path` is a local directory (False: a Hub id). A path (`looks_local`) that names no directory
    is a `FileNotFoundError` saying so, "no such directory: PATH", never a malformed Hub id: missing, a file, empty."""
    text = os.fspath(name_or_path)
    if not looks_local(text):
        return False
    if os.path.isdir(text):
        return True
    if os.path.exists(text):
        raise FileNotFoundError(f"no such directory: {text!r} is a file, where a model directory belongs.")
    raise FileNotFoundError(f"no such directory: {text!r}" + (" (an empty path)" if not text.strip() else "") + ".")


@contextmanager
def local_or_hub(name_or_path):
    """The one rule for loading a model (or its tokenizer, config) by a name or path: a path that names no directory
    is a `FileNotFoundError` saying so (`is_local_dir`); an `OSError` loading a name that is no local directory (a
    mistyped "folder/name" reads as a Hub id; offline, no such repository) is one saying it is neither."""
    if is_local_dir(name_or_path):
        yield
        return
    try:
        yield
    except OSError as error:
        if str(error).startswith("no such directory"):  # (named by an inner loader already)
            raise
        reason = " ".join(str(error).split())
        raise FileNotFoundError(
            f"no such directory: {str(name_or_path)!r}, and no model of that name could be read "
            f"from the Hub ({reason[:300]})"
        ) from None


def check_finite(named_tensors, where) -> None:
    """No NaN or infinity is ever saved into a model: a `ValueError` naming the first tensor of `named_tensors`
    ((name, tensor) pairs) that holds one, and `where` it is (the file, model or step)."""
    import torch

    for name, tensor in named_tensors:
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            bad = int((~torch.isfinite(tensor)).sum())
            raise ValueError(
                f"{where}: the tensor {name} holds {bad} non-finite value(s) (NaN or infinity); a model "
                "with such weights is refused."
            )


def load_weights(path) -> dict:
    """The tensors of a `model.safetensors` file (`path`), name -> tensor; a truncated or corrupted one is an `OSError`
    naming it, as `load_model` names it."""
    from safetensors.torch import load_file

    try:
        return load_file(path)
    except SafetensorError as error:
        raise OSError(f"{path} is truncated or corrupted ({error}).") from None


def log_history(path) -> list[dict]:
    """The `log_history` of a run's or checkpoint's trainer_state.json (`path`): what the trainer logged, one JSON
    object per step with its "step"; a file holding anything else is an `OSError` naming it."""
    history = read_json(path, mapping=True).get("log_history", [])
    if not isinstance(history, list) or not all(
        isinstance(entry, dict) and type(entry.get("step")) in (int, float) for entry in history
    ):
        raise OSError(f'{path} is damaged: its log_history is not a list of logged steps (JSON objects with a "step").')
    return history


def check_json_files(directory, names, advice: str = "", mapping: bool = True) -> None:
    """`read_json`'s error for the first of `names` in `directory` that exists but is not valid JSON (with `mapping`,
    not a JSON object)."""
    for name in names:
        if os.path.isfile(os.path.join(directory, name)):
            read_json(os.path.join(directory, name), advice, mapping)


def own_tokenizer(tokenizer, max_length: int | None = None):
    """A copy of a `tokenizers.Tokenizer` (a transformers tokenizer's `backend_tokenizer`) for one user alone, without
    padding and truncating at `max_length` (None: never): a transformers tokenizer call sets padding and truncation
    on the one it wraps, so a shared one pads or cuts another caller's text (seen under load in `serve`)."""
    own = copy.deepcopy(tokenizer)
    own.no_padding()
    if max_length:
        own.enable_truncation(max_length)
    else:
        own.no_truncation()
    return own


def load_model(cls, path, **kwargs):
    """`cls.from_pretrained(path, **kwargs)` (`cls`: one of our model classes or an `AutoModel*`) for a path not
    recognised as a `model_dirs.ModelDir` (a training run's starting point): its configs checked first (transformers
    would trace or ignore damaged ones), then `from_pretrained`."""
    if is_local_dir(path):
        check_json_files(path, ("config.json", "generation_config.json"))
    return from_pretrained(cls, path, **kwargs)


def from_pretrained(cls, path, **kwargs):
    """`cls.from_pretrained(path, **kwargs)`; a truncated or corrupted `model.safetensors`, or one with tensors of other
    shapes than config.json's, raises `OSError` naming the file instead of safetensors' bare message or transformers'
    trace."""
    weights = os.path.join(str(path), "model.safetensors")
    try:
        with local_or_hub(path):
            return cls.from_pretrained(path, **kwargs)
    except SafetensorError as error:
        raise OSError(f"{weights} is truncated or corrupted ({error}).") from None
    except RuntimeError as error:
        if "ignore_mismatched_sizes" not in str(error):  # transformers' refusal of tensors of other shapes
            raise
        raise OSError(
            f"{weights} holds tensors whose shapes do not match {os.path.join(str(path), 'config.json')} "
            "(transformers' report above names them): the files are of different models."
        ) from None


def no_progress_bars() -> None:
    """No progress bars from here on, the Hub's and transformers' ("Loading weights"; it takes the Hub's setting when
    it loads): `--quiet`, and servers, whose logs are read as lines. Imports neither where they are not loaded yet."""
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # huggingface_hub's own switch, read when it loads
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging

        logging.disable_progress_bar()


def require(module: str, extra: str | None = None):
    """Import an optional dependency, or an `ImportError` naming the extra that installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"{module} is not installed: pip install 'vanilla-transformer[{extra or module}]'") from None
