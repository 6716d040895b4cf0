"""Loading a saved directory, for every command: its model and tokenizer, ensemble members, optional dependencies; a
damaged or missing file is an error that names it. What a directory holds and what runs it: `model_dirs`."""

import copy
import os
import sys

from safetensors import SafetensorError

from .files import read_json


def looks_local(name_or_path) -> bool:
    """A path rather than a Hub id ("name" or "owner/name"): it exists, or it is written as a path."""
    text = os.fspath(name_or_path)
    return (os.path.exists(text) or text.startswith((".", "/", "~")) or text.count("/") > 1
            or (os.path.sep != "/" and os.path.sep in text))


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
    """`cls.from_pretrained(path, **kwargs)` (`cls`: one of our model classes or an `AutoModel*`); a truncated or
    corrupted `model.safetensors`, or one with tensors of other shapes than config.json's, and a config that is not a
    JSON object raise `OSError` naming the file instead of safetensors' bare message or transformers' trace."""
    weights = os.path.join(str(path), "model.safetensors")
    if looks_local(path) and os.path.isdir(path):  # damaged configs named (transformers would trace or ignore them)
        check_json_files(path, ("config.json", "generation_config.json"))
    try:
        return cls.from_pretrained(path, **kwargs)
    except SafetensorError as error:
        raise OSError(f"{weights} is truncated or corrupted ({error}).") from None
    except RuntimeError as error:
        if "ignore_mismatched_sizes" not in str(error):  # transformers' refusal of tensors of other shapes
            raise
        raise OSError(f"{weights} holds tensors whose shapes do not match {os.path.join(str(path), 'config.json')} "
                      "(transformers' report above names them): the files are of different models.") from None


def ensemble_members(model, tokenizer, paths, cls, what: str, **kwargs) -> list:
    """`model` (whose tokenizer is `tokenizer`) and the `cls` models saved at `paths`, on `model`'s device: the
    members of an ensemble (`what` names them in errors), which must share the tokenizer. `kwargs` go to
    `from_pretrained` of the tokenizers and models."""
    from transformers import AutoTokenizer

    members = [model]
    for path in paths:
        tokenizer_kwargs = {k: v for k, v in kwargs.items() if k in ("cache_dir", "trust_remote_code")}
        if AutoTokenizer.from_pretrained(path, **tokenizer_kwargs).get_vocab() != tokenizer.get_vocab():
            raise ValueError(f"The tokenizer of {str(path)!r} differs from that of the first {what}; ensemble members "
                             "must share one tokenizer.")
        members.append(load_model(cls, path, **kwargs).to(model.device))
    return members


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
