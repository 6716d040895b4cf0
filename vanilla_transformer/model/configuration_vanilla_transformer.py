"""Configuration of the Transformer of "Attention Is All You Need" (Vaswani et al., 2017).

This file imports only transformers: `save_pretrained` copies it next to the weights so that
`AutoConfig.from_pretrained(dir, trust_remote_code=True)` works without our package installed.
"""

from huggingface_hub.dataclasses import strict, validated_field
from transformers import PreTrainedConfig

ACTIVATIONS = ("relu", "gelu", "gelu_new", "silu", "swish", "tanh")
POSITION_EMBEDDING_TYPES = ("sinusoidal", "learned")
AUTO_MAP = {
    "AutoConfig": "configuration_vanilla_transformer.VanillaTransformerConfig",
    "AutoModel": "modeling_vanilla_transformer.VanillaTransformerModel",
    "AutoModelForSeq2SeqLM": "modeling_vanilla_transformer.VanillaTransformerForConditionalGeneration",
    "AutoModelForTokenClassification": "modeling_vanilla_transformer.VanillaTransformerForTokenClassification",
    "AutoModelForMaskedLM": "modeling_vanilla_transformer.VanillaTransformerForMaskedLM",
}
# The translation pipeline's names (the pipeline: pipeline_vanilla_transformer.py, imported by the model file). Our
# package registers TRANSLATION_TASK; a translation model's config.json records it, for remote code, as
# REMOTE_TRANSLATION_TASK. transformers' `pipeline()` looks a task up in the config's custom_pipelines before its
# registry, and a custom pipeline asks for trust_remote_code even where our package is imported: hence two names.
TRANSLATION_TASK = "vanilla-translation"
"""The task name under which `import vanilla_transformer` registers the translation pipeline with transformers'
`pipeline()`: `pipeline(TRANSLATION_TASK, model="outputs/demo")` gives a `VanillaTranslationPipeline`."""
REMOTE_TRANSLATION_TASK = "translation"
TRANSLATION_PIPELINE = {
    "impl": "modeling_vanilla_transformer.VanillaTranslationPipeline",
    "pt": ["AutoModelForSeq2SeqLM"],
    "tf": [],
    "type": "text",
}


# Checks of one field, run by @strict on every assignment (construction, `config.x = ...`, `--config_overrides`);
# @strict also checks each field's annotated type. Checks across fields: `validate_architecture_of_the_paper`.
def positive_int_field(default: int):
    def check(value):
        if value <= 0:
            raise ValueError(f"must be a positive integer, got {value!r}.")

    return validated_field(check, default=default)


def non_negative_int_field(default: int):
    def check(value):
        if value < 0:
            raise ValueError(f"must be a non-negative integer, got {value!r}.")

    return validated_field(check, default=default)


def probability(default: float | None):
    def check(value):
        if value is not None and not 0.0 <= value < 1.0:
            raise ValueError(f"must be a number in [0, 1), got {value!r}.")

    return validated_field(check, default=default)


def one_of(choices: tuple, default: str):
    def check(value):
        if value not in choices:
            raise ValueError(f"must be one of {choices}, got {value!r}.")

    return validated_field(check, default=default)


def label_counts(value):
    if value is not None and (not value or not all(not isinstance(n, bool) and n > 0 for n in value)):
        raise ValueError(f"must be None or a non-empty list of positive integers, got {value!r}.")


def non_negative_number(value):
    if not 0.0 <= value < float("inf"):  # (NaN and infinity too: never saved into config.json)
        raise ValueError(f"must be a finite non-negative number, got {value!r}.")


# Table 3 of the paper: "base" and "big"; "small" fits a laptop; "tiny" is for tests.
PRESETS = {
    "base": dict(
        d_model=512,
        encoder_layers=6,
        decoder_layers=6,
        encoder_attention_heads=8,
        decoder_attention_heads=8,
        encoder_ffn_dim=2048,
        decoder_ffn_dim=2048,
        dropout=0.1,
    ),
    "big": dict(
        d_model=1024,
        encoder_layers=6,
        decoder_layers=6,
        encoder_attention_heads=16,
        decoder_attention_heads=16,
        encoder_ffn_dim=4096,
        decoder_ffn_dim=4096,
        dropout=0.3,
    ),
    "small": dict(
        d_model=256,
        encoder_layers=3,
        decoder_layers=3,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=1024,
        decoder_ffn_dim=1024,
        dropout=0.1,
    ),
    "tiny": dict(
        vocab_size=99,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        dropout=0.1,
        max_position_embeddings=128,
    ),
}
"""The named sizes that `VanillaTransformerConfig.from_preset` and the training commands' `--config_name` start from,
each a dict of config fields: "base" and "big", the paper's Table 3; "small", which fits a laptop; "tiny", for
tests."""


@strict
class VanillaTransformerConfig(PreTrainedConfig):
    r"""Configuration of [`VanillaTransformerModel`] and its heads. Defaults are the paper's base model.

    Every field is checked when it is set (at construction, by `config.x = ...` and by `--config_overrides`), and the
    fields together after construction (`validate_architecture_of_the_paper`). `from_preset` gives the paper's sizes.

    Args:
        vocab_size: size of the joint source/target vocabulary (section 5.1: shared BPE of about 37000 tokens);
            a positive integer, default `37000`.
        d_model: width of every sub-layer output and of the embeddings (section 3.1); default `512`, divisible by
            each stack's number of heads, and even with sinusoidal positions.
        encoder_layers / decoder_layers: N, the number of identical layers in each stack (section 3.1); default `6`.
        encoder_attention_heads / decoder_attention_heads: h, the number of heads (section 3.2.2); default `8`.
        encoder_ffn_dim / decoder_ffn_dim: d_ff, the inner width of the feed-forward network (section 3.3); default
            `2048`.
        activation_function: non-linearity of the feed-forward network (the paper: ReLU, equation 2): "relu" (the
            default), "gelu", "gelu_new", "silu", "swish" or "tanh".
        dropout: P_drop on each sub-layer output and on the embedding sums (section 5.4); default `0.1`. Every
            dropout and `label_smoothing` is a probability in [0, 1).
        attention_dropout: dropout on attention probabilities (not in the paper; 0, the default, keeps it faithful).
        activation_dropout: dropout inside the feed-forward network (not in the paper); default `0`.
        token_dropout: probability of zeroing a token's whole embedding vector in training ("word dropout", not in
            the paper; 0, the default, keeps it faithful): the model learns to use the context of words it does not
            know.
        max_position_embeddings: size of the learned position table; sinusoidal positions extend beyond it; default
            `1024`.
        position_embedding_type: "sinusoidal" (the default; section 3.5) or "learned" (the paper's Table 3, row E).
        relative_attention_max_distance: k > 0 adds a learned per-head bias for each signed distance clipped to
            [-k, k] to every self-attention (Shaw et al., 2018; not in the paper; 0, the default, keeps it faithful).
        scale_attention: divide the attention scores by sqrt(d_k) (equation 1; the default True); False = unscaled,
            sharper attention (TENER, Yan et al., 2019, for tagging; not in the paper).
        char_cnn_dim: k > 0 adds character-level word features (a CNN of k filters over each word's characters) to the
            encoder's token embeddings (Ma & Hovy, 2016; not in the paper; 0, the default, keeps it faithful). The
            model then needs its tokenizer's spelling: `model.set_token_characters(tokenizer)` once (saved with the
            weights).
        normalize_before: False (the default) = post-LN, `LayerNorm(x + Sublayer(x))` as in the paper; True = pre-LN.
        scale_embedding: multiply embeddings by sqrt(d_model) (section 3.4); default True.
        tie_word_embeddings: one embedding matrix shared by encoder, decoder and the output projection (3.4); default
            True.
        init_std: standard deviation of the classifier head's initialisation; a finite non-negative number, default
            `0.02`.
        label_smoothing: epsilon_ls of the training loss (section 5.4 uses 0.1); 0 (the default) = plain
            cross-entropy.
        classifier_dropout: dropout before the token-classification head; None (the default) uses `dropout`.
        use_crf: a linear-chain CRF on the token-classification head (not in the paper; False, the default, keeps it
            faithful).
        auxiliary_num_labels: tag-set sizes of auxiliary tagging tasks learned beside the main one by the
            token-classification head, one linear layer each (multi-task learning, e.g. CoNLL-2003's POS and chunk
            columns; not in the paper; None, the default, keeps it faithful): a non-empty list of positive integers.
            Training-only: predictions use the main head alone.
        auxiliary_loss_weight: weight of each auxiliary task's loss in the training loss; a finite non-negative
            number, default `0.5`.
        pad_token_id / bos_token_id / eos_token_id / decoder_start_token_id: the special tokens' ids (defaults `0`,
            `1`, `2`, `1`), each None or inside the vocabulary.
        **kwargs: the fields of transformers' `PreTrainedConfig` (`id2label`, `label2id`, ...).

    Raises:
        huggingface_hub.errors.StrictDataclassFieldValidationError: a field of the wrong type or out of its range,
            naming the field and its value.
        huggingface_hub.errors.StrictDataclassClassValidationError: fields that do not fit together (a `d_model` not
            divisible by the heads, odd with sinusoidal positions, a special token id outside the vocabulary).

    Example:
        A config makes a new model of random weights; `from_pretrained` loads a saved one with its config:

        ```python
        from transformers import AutoTokenizer

        from vanilla_transformer.model.configuration_vanilla_transformer import VanillaTransformerConfig
        from vanilla_transformer.model.modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration

        config = VanillaTransformerConfig.from_preset("small", vocab_size=8000)
        config.d_model, config.encoder_layers  # (256, 3)
        model = VanillaTransformerForConditionalGeneration(config)  # new, randomly initialised

        model = VanillaTransformerForConditionalGeneration.from_pretrained("outputs/demo")
        tokenizer = AutoTokenizer.from_pretrained("outputs/demo")
        inputs = tokenizer(["ein kleines haus"], return_tensors="pt", return_token_type_ids=False)
        tokenizer.batch_decode(model.generate(**inputs, num_beams=4), skip_special_tokens=True)
        ```
    """

    model_type = "vanilla_transformer"
    keys_to_ignore_at_inference = ["cache", "past_key_values"]
    attribute_map = {
        "hidden_size": "d_model",
        "num_attention_heads": "encoder_attention_heads",
        "num_hidden_layers": "encoder_layers",
    }

    vocab_size: int = positive_int_field(37000)
    d_model: int = positive_int_field(512)
    encoder_layers: int = positive_int_field(6)
    decoder_layers: int = positive_int_field(6)
    encoder_attention_heads: int = positive_int_field(8)
    decoder_attention_heads: int = positive_int_field(8)
    encoder_ffn_dim: int = positive_int_field(2048)
    decoder_ffn_dim: int = positive_int_field(2048)
    activation_function: str = one_of(ACTIVATIONS, "relu")
    dropout: float | int = probability(0.1)
    attention_dropout: float | int = probability(0.0)
    activation_dropout: float | int = probability(0.0)
    token_dropout: float | int = probability(0.0)
    max_position_embeddings: int = positive_int_field(1024)
    position_embedding_type: str = one_of(POSITION_EMBEDDING_TYPES, "sinusoidal")
    relative_attention_max_distance: int = non_negative_int_field(0)
    scale_attention: bool = True
    char_cnn_dim: int = non_negative_int_field(0)
    normalize_before: bool = False
    scale_embedding: bool = True
    tie_word_embeddings: bool = True
    init_std: float | int = validated_field(non_negative_number, default=0.02)
    label_smoothing: float | int = probability(0.0)
    classifier_dropout: float | int | None = probability(None)
    use_crf: bool = False
    auxiliary_num_labels: list[int] | None = validated_field(label_counts, default=None)
    auxiliary_loss_weight: float | int = validated_field(non_negative_number, default=0.5)
    use_cache: bool = True
    is_encoder_decoder: bool = True
    pad_token_id: int | None = 0
    bos_token_id: int | None = 1
    eos_token_id: int | None = 2
    decoder_start_token_id: int | None = 1

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        if self.id2label is not None and not self.label2id:
            self.label2id = {label: i for i, label in self.id2label.items()}
        # Every saved model names all our Auto classes, so `trust_remote_code=True` loads any head from any checkpoint.
        self.auto_map = {**AUTO_MAP, **(getattr(self, "auto_map", None) or {})}
        # Older saved models name their remote-code pipeline TRANSLATION_TASK, the task our package registers;
        # transformers' `pipeline()` would take that entry first and ask for trust_remote_code.
        pipelines = getattr(self, "custom_pipelines", None) or {}
        if TRANSLATION_TASK in pipelines:
            self.custom_pipelines = {REMOTE_TRANSLATION_TASK: pipelines[TRANSLATION_TASK]}

    def to_dict(self) -> dict:
        """The config as saved. Once a model has named itself in `architectures` (as `save_pretrained` does),
        `custom_pipelines` follows it: the translation pipeline for a translation model, so that
        `pipeline(model=saved_dir, trust_remote_code=True)` needs no task name, and none for a tagger or a masked
        language model (also one made from a translation checkpoint)."""
        output = super().to_dict()
        if self.architectures:
            translation = "VanillaTransformerForConditionalGeneration" in self.architectures
            output["custom_pipelines"] = {REMOTE_TRANSLATION_TASK: TRANSLATION_PIPELINE} if translation else {}
        return output

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "VanillaTransformerConfig":
        """A named configuration of `PRESETS` with `overrides` applied on top.

        Args:
            name: "base" or "big" (the paper's Table 3), "small" (fits a laptop) or "tiny" (for tests).
            **overrides: any fields, replacing the preset's and the defaults (`vocab_size=8000`, `dropout=0.3`).

        Returns:
            The `VanillaTransformerConfig`.

        Raises:
            ValueError: an unknown preset name.

        Example:
            ```python
            config = VanillaTransformerConfig.from_preset("base", vocab_size=8000)
            ```
        """
        if name not in PRESETS:
            raise ValueError(f"Unknown preset {name!r}; choose one of {sorted(PRESETS)}.")
        return cls(**{**PRESETS[name], **overrides})

    def validate_architecture_of_the_paper(self):
        """Checks across fields, run by @strict after construction and by `config.validate()` (after
        `--config_overrides`, and before saving): raise `ValueError` naming the fields and their values."""
        for name in ("encoder_attention_heads", "decoder_attention_heads"):
            if self.d_model % getattr(self, name):
                raise ValueError(f"d_model={self.d_model} is not divisible by {name}={getattr(self, name)}.")
        if self.position_embedding_type == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"sinusoidal positions need an even d_model, got d_model={self.d_model}.")
        for name in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < self.vocab_size:
                raise ValueError(f"{name}={value!r} is outside the vocabulary [0, {self.vocab_size}).")


__all__ = ["VanillaTransformerConfig", "PRESETS"]
