"""vanilla-transformer: the Transformer of "Attention Is All You Need" as a first-class Hugging Face model."""

from transformers import (AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSeq2SeqLM,
                          AutoModelForTokenClassification)
from transformers.pipelines import PIPELINE_REGISTRY

from .configuration_vanilla_transformer import PRESETS, TRANSLATION_TASK, VanillaTransformerConfig
from .modeling_vanilla_transformer import (
    VanillaTransformerEncoderModel,
    VanillaTransformerForConditionalGeneration,
    VanillaTransformerForMaskedLM,
    VanillaTransformerForTokenClassification,
    VanillaTransformerModel,
    VanillaTransformerPreTrainedModel,
    VanillaTranslationPipeline,
)
from .ner.ensemble import TokenClassificationEnsemble

__version__ = "0.1.0"

AutoConfig.register(VanillaTransformerConfig.model_type, VanillaTransformerConfig, exist_ok=True)
AutoModel.register(VanillaTransformerConfig, VanillaTransformerModel, exist_ok=True)
AutoModelForSeq2SeqLM.register(VanillaTransformerConfig, VanillaTransformerForConditionalGeneration, exist_ok=True)
AutoModelForTokenClassification.register(VanillaTransformerConfig, VanillaTransformerForTokenClassification, exist_ok=True)
AutoModelForMaskedLM.register(VanillaTransformerConfig, VanillaTransformerForMaskedLM, exist_ok=True)

PIPELINE_REGISTRY.register_pipeline(
    TRANSLATION_TASK, pipeline_class=VanillaTranslationPipeline, pt_model=AutoModelForSeq2SeqLM, type="text"
)

# save_pretrained writes these into config.json's auto_map and copies the code files next to the weights,
# so `trust_remote_code=True` loads a saved model where this package is not installed.
VanillaTransformerConfig.register_for_auto_class()
VanillaTransformerModel.register_for_auto_class("AutoModel")
VanillaTransformerForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")
VanillaTransformerForTokenClassification.register_for_auto_class("AutoModelForTokenClassification")
VanillaTransformerForMaskedLM.register_for_auto_class("AutoModelForMaskedLM")

__all__ = [
    "PRESETS",
    "VanillaTransformerConfig",
    "VanillaTransformerPreTrainedModel",
    "VanillaTransformerModel",
    "VanillaTransformerEncoderModel",
    "VanillaTransformerForConditionalGeneration",
    "VanillaTransformerForTokenClassification",
    "VanillaTransformerForMaskedLM",
    "VanillaTranslationPipeline",
    "TokenClassificationEnsemble",
]
