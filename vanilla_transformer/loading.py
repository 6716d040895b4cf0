"""Loading a saved model in our commands: a damaged weights file is an error that names it."""

import os

from safetensors import SafetensorError


def load_model(cls, path, **kwargs):
    """`cls.from_pretrained(path, **kwargs)` (`cls`: one of our model classes or an `AutoModel*`); a truncated or
    corrupted `model.safetensors` raises `OSError` naming the file instead of safetensors' bare message."""
    try:
        return cls.from_pretrained(path, **kwargs)
    except SafetensorError as error:
        raise OSError(f"{os.path.join(str(path), 'model.safetensors')} is truncated or corrupted ({error}).") from None


def no_progress_bars() -> None:
    """No progress bars from here on, transformers' ("Loading weights") and the Hub's: `--quiet`, and servers, whose
    logs are read as lines."""
    from transformers.utils import logging

    logging.disable_progress_bar()
