import pytest
from huggingface_hub.errors import StrictDataclassError
from transformers import AutoConfig

from vanilla_transformer import PRESETS, VanillaTransformerConfig


def test_defaults_are_the_papers_base_model():
    c = VanillaTransformerConfig()
    assert (c.d_model, c.encoder_layers, c.decoder_layers, c.encoder_attention_heads, c.encoder_ffn_dim) == (
        512,
        6,
        6,
        8,
        2048,
    )
    assert (c.dropout, c.activation_function, c.position_embedding_type) == (0.1, "relu", "sinusoidal")
    assert c.normalize_before is False and c.scale_embedding is True and c.tie_word_embeddings is True
    # generic names through attribute_map
    assert (c.hidden_size, c.num_attention_heads, c.num_hidden_layers) == (512, 8, 6)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_take_overrides_and_validate_them(name):
    """An override replaces the preset's value and goes through the same validation as any field."""
    c = VanillaTransformerConfig.from_preset(name, dropout=0.2)
    assert c.dropout == 0.2 and c.d_model % c.encoder_attention_heads == 0
    with pytest.raises(StrictDataclassError, match=r"d_model=\d+ is not divisible"):
        VanillaTransformerConfig.from_preset(name, d_model=c.encoder_attention_heads * 8 + 1)


@pytest.mark.parametrize("name, millions", [("base", 65), ("big", 213)])
def test_presets_have_the_papers_parameter_counts(name, millions):
    """Table 3 of the paper: 65M parameters (base) and 213M (big) with its 37000-token shared vocabulary."""
    import torch

    from vanilla_transformer import VanillaTransformerForConditionalGeneration

    with torch.device("meta"):  # shapes only
        model = VanillaTransformerForConditionalGeneration(VanillaTransformerConfig.from_preset(name))
    assert model.num_parameters() / 1e6 == pytest.approx(millions, rel=0.03)


def test_unknown_preset():
    with pytest.raises(ValueError, match="'huge'"):
        VanillaTransformerConfig.from_preset("huge")


@pytest.mark.parametrize(
    "overrides, field",
    [
        (dict(d_model=30), "d_model=30"),
        (dict(decoder_attention_heads=3), "decoder_attention_heads=3"),
        (dict(encoder_layers=0), "encoder_layers"),
        (dict(vocab_size=-5), "vocab_size"),
        (dict(encoder_ffn_dim=2.5), "encoder_ffn_dim"),
        (dict(dropout=1.0), "dropout"),
        (dict(attention_dropout=-0.1), "attention_dropout"),
        (dict(token_dropout=1.0), "token_dropout"),
        (dict(relative_attention_max_distance=-1), "relative_attention_max_distance"),
        (dict(relative_attention_max_distance=2.5), "relative_attention_max_distance"),
        (dict(scale_attention="no"), "scale_attention"),
        (dict(char_cnn_dim=-1), "char_cnn_dim"),
        (dict(char_cnn_dim=True), "char_cnn_dim"),
        (dict(label_smoothing=1.5), "label_smoothing"),
        (dict(auxiliary_num_labels=[4, 0]), "auxiliary_num_labels"),
        (dict(auxiliary_num_labels=[]), "auxiliary_num_labels"),
        (dict(auxiliary_loss_weight=-1.0), "auxiliary_loss_weight"),
        (dict(activation_function="sigmoid2"), "sigmoid2"),
        (dict(position_embedding_type="rotary"), "rotary"),
        (dict(pad_token_id=99), "pad_token_id=99"),
        (dict(eos_token_id=-1), "eos_token_id=-1"),
        (dict(decoder_start_token_id=1000), "decoder_start_token_id=1000"),
    ],
)
def test_invalid_values_name_the_field(overrides, field):
    with pytest.raises(StrictDataclassError, match=field.replace("(", r"\(")):
        VanillaTransformerConfig.from_preset("tiny", **overrides)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("dropout", 1.5, r"(?s)'dropout'.*must be a number in \[0, 1\), got 1.5"),
        ("d_model", "x", r"'d_model' expected int, got str"),
        ("encoder_layers", 0, r"(?s)'encoder_layers'.*must be a positive integer, got 0"),
        ("activation_function", "sigmoid2", r"(?s)'activation_function'.*must be one of"),
        ("use_crf", "yes", r"'use_crf' expected bool"),
    ],
)
def test_bad_values_are_rejected_when_set(field, value, message):
    """@strict checks a field on every assignment, not only when the config is built (a loaded model's config edited
    by hand or by --config_overrides); the config keeps its good value."""
    config = VanillaTransformerConfig.from_preset("tiny")
    before = getattr(config, field)
    with pytest.raises(StrictDataclassError, match=message):
        setattr(config, field, value)
    assert getattr(config, field) == before


def test_checks_across_fields_run_on_validate():
    """Fields set one by one can disagree only until `validate()` (which saving and --config_overrides run)."""
    config = VanillaTransformerConfig.from_preset("tiny")
    config.d_model = 30  # 4 heads
    with pytest.raises(StrictDataclassError, match="d_model=30 is not divisible by encoder_attention_heads=4"):
        config.validate()


def test_integers_are_accepted_where_numbers_are():
    config = VanillaTransformerConfig.from_preset("tiny", dropout=0, label_smoothing=0, auxiliary_loss_weight=1)
    assert config.dropout == 0 and config.auxiliary_loss_weight == 1


def test_round_trip_and_auto_config(tmp_path):
    c = VanillaTransformerConfig.from_preset("tiny", normalize_before=True, position_embedding_type="learned")
    c.save_pretrained(tmp_path)
    loaded = AutoConfig.from_pretrained(tmp_path)
    assert isinstance(loaded, VanillaTransformerConfig)
    assert loaded.to_diff_dict() == c.to_diff_dict()
    assert set(loaded.auto_map) == {
        "AutoConfig",
        "AutoModel",
        "AutoModelForSeq2SeqLM",
        "AutoModelForTokenClassification",
        "AutoModelForMaskedLM",
    }


def test_labels():
    c = VanillaTransformerConfig.from_preset("tiny", id2label={0: "O", 1: "B-PER", 2: "I-PER"})
    assert c.num_labels == 3 and c.label2id["B-PER"] == 1
