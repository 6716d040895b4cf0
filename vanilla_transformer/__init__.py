"""vanilla-transformer: the Transformer of "Attention Is All You Need" as a first-class Hugging Face model.

The names below load on first use, and importing the package loads neither torch nor transformers (the command line
starts at once); `registration` makes transformers' Auto classes and `pipeline()` know our models as soon as
transformers loads.
"""

import importlib

from . import registration  # noqa: F401

__version__ = "0.1.0"

# name -> the module that defines it
EXPORTS = {
    "PRESETS": "model.configuration_vanilla_transformer",
    "TRANSLATION_TASK": "model.configuration_vanilla_transformer",
    "VanillaTransformerConfig": "model.configuration_vanilla_transformer",
    "VanillaTransformerPreTrainedModel": "model.modeling_vanilla_transformer",
    "VanillaTransformerModel": "model.modeling_vanilla_transformer",
    "VanillaTransformerEncoderModel": "model.modeling_vanilla_transformer",
    "VanillaTransformerForConditionalGeneration": "model.modeling_vanilla_transformer",
    "VanillaTransformerForTokenClassification": "model.modeling_vanilla_transformer",
    "VanillaTransformerForMaskedLM": "model.modeling_vanilla_transformer",
    "VanillaTranslationPipeline": "model.pipeline_vanilla_transformer",
    "TokenClassificationEnsemble": "ner.ensemble",
}
__all__ = list(EXPORTS)


def __getattr__(name: str):
    """`vanilla_transformer.NAME`: imports the module that defines NAME (PEP 562)."""
    if name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *EXPORTS})
