"""Export a saved translation model to CTranslate2, the inference engine for Transformer models on CPUs.

`VanillaTransformerConverter(model_dir).convert(out_dir, quantization="int8")` writes a CTranslate2 model directory
(`model.bin`, the shared vocabulary, `config.json`) plus the tokenizer files, so `vanilla-transformer translate
out_dir --engine ctranslate2` needs nothing else. The PyTorch model is read, never changed (CTranslate2 quantises
copies of the weights).

The paper's model maps one to one onto CTranslate2's `TransformerSpec`: post-LN or pre-LN layers, embeddings x
sqrt(d_model), sinusoidal (given as the explicit table our model uses: sin and cos interleaved) or learned positions,
tied or separate embeddings, fused q/k/v projections. Options CTranslate2 cannot express are refused with a
`ValueError` naming them.
"""

import math

import numpy as np
import torch

try:
    from ctranslate2.converters.converter import Converter
    from ctranslate2.specs import common_spec, transformer_spec
except ImportError:  # an optional extra: say how to get it when it is used
    Converter = object

from ..files import refuse_overwriting, replaced_atomically
from ..loading import check_finite, require
from ..model.modeling_vanilla_transformer import VanillaTransformerPositionalEmbedding
from ..model_card import copy_card
from ..model_dirs import ModelDir, check_export_target, recognise

CT2_ACTIVATIONS = {
    "relu": "RELU",
    "gelu": "GELU",
    "gelu_new": "GELUTanh",
    "gelu_pytorch_tanh": "GELUTanh",
    "silu": "SWISH",
    "swish": "SWISH",
    "tanh": "Tanh",
    "sigmoid": "Sigmoid",
}


def unsupported_options(config) -> list[str]:
    """The options of `config` that CTranslate2's Transformer cannot run, as `name=value` strings."""
    refused = []
    if config.relative_attention_max_distance:
        refused.append(f"relative_attention_max_distance={config.relative_attention_max_distance}")
    if not config.scale_attention:
        refused.append("scale_attention=False")
    if config.char_cnn_dim:
        refused.append(f"char_cnn_dim={config.char_cnn_dim}")
    if config.activation_function not in CT2_ACTIVATIONS:
        refused.append(f"activation_function={config.activation_function!r}")
    return refused


def array(tensor: torch.Tensor) -> np.ndarray:
    """A float32 copy: CTranslate2 quantises the spec's arrays in place, and `tensor.numpy()` shares the model's
    memory."""
    return tensor.detach().to(torch.float32).cpu().numpy().copy()


class VanillaTransformerConverter(Converter):
    """A `ctranslate2.converters.Converter` for `VanillaTransformerForConditionalGeneration` checkpoints: a saved
    model directory (its path, or its recognised `model_dirs.ModelDir`), or an already loaded model plus its
    tokenizer. `export_ctranslate2` uses it for a saved model and adds the model card and an atomic write.

    Args:
        model_name_or_path: a saved translation model (a path or Hub id) or its `ModelDir`; or None with `model`.
        model: a loaded `VanillaTransformerForConditionalGeneration` instead (converted in eval mode).
        tokenizer: the loaded model's tokenizer (read from the directory where not given).

    Raises:
        ImportError: ctranslate2 is not installed (the `ctranslate2` extra).
        ValueError: both or neither of `model_name_or_path` and `model`.

    Example:
        ```python
        from vanilla_transformer.deploy.ctranslate2 import VanillaTransformerConverter

        VanillaTransformerConverter("outputs/demo").convert("outputs/demo-ct2", quantization="int8")
        ```
    """

    def __init__(self, model_name_or_path=None, model=None, tokenizer=None):
        require("ctranslate2")
        if (model_name_or_path is None) == (model is None):
            raise ValueError("Give either a model directory / Hub id or a loaded model (with its tokenizer).")
        self.model_name_or_path, self.model, self.tokenizer = model_name_or_path, model, tokenizer

    def load(self):
        """The model (eval mode) and tokenizer to convert, loaded from `model_name_or_path` once."""
        from ..model.modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration

        if self.model is None:
            found = self.model_name_or_path
            if not isinstance(found, ModelDir):
                found = self.model_name_or_path = recognise(found, task="translation")
            if found.format != "saved":
                raise ValueError(f"{found.path!r} is an export already: export-ctranslate2 converts a saved model.")
            self.model = found.load(VanillaTransformerForConditionalGeneration)
            self.tokenizer = self.tokenizer or found.tokenizer()
        if self.tokenizer is None:
            raise ValueError("Converting a loaded model needs its tokenizer (tokenizer=...).")
        if not hasattr(self.model, "lm_head"):
            raise ValueError(
                f"{type(self.model).__name__} is not a translation model; only "
                "VanillaTransformerForConditionalGeneration exports to CTranslate2."
            )
        check_finite(self.model.state_dict().items(), self.where)
        return self.model.eval(), self.tokenizer

    @property
    def where(self) -> str:
        """The model as errors name it."""
        found = self.model_name_or_path
        return (found.path if isinstance(found, ModelDir) else found) or "the model"

    def _load(self):  # the hook `Converter.convert` calls
        self.spec = model_spec(*self.load())
        return self.spec

    def convert(self, output_dir, vmap=None, quantization=None, force=False):
        """`Converter.convert`, then the tokenizer and the generation config (how to decode: beams, length penalty)
        saved next to the CTranslate2 model. Weights (or int8 scales) beyond the range of the `quantization`'s type
        are refused naming the tensor (`check_converted`).

        Args:
            output_dir: the directory to write (a new one, or any existing one with `force`: deleted first).
            vmap: a CTranslate2 vocabulary mapping file to include, or None.
            quantization: the stored weight type: None or "float32" (the weights as they are), "int8",
                "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16" or "bfloat16".
            force: replace an existing `output_dir`.

        Returns:
            `output_dir`.

        Raises:
            RuntimeError: `output_dir` exists and `force` is not set (CTranslate2's own check).
            FileNotFoundError: no such model directory.
            ValueError: not a saved translation model, a loaded model without its tokenizer, weights that are not
                finite, options CTranslate2 cannot run (relative positions, unscaled attention, character features,
                an activation it lacks), a tokenizer larger than the vocabulary, or values beyond the range of
                `quantization`'s type.
        """
        output_dir = super().convert(output_dir, vmap=vmap, quantization=quantization, force=force)
        check_converted(self.spec, quantization, self.where)
        model, tokenizer = self.load()
        tokenizer.save_pretrained(output_dir)
        model.generation_config.save_pretrained(output_dir)
        return output_dir


def check_converted(spec, quantization, where) -> None:
    """No infinity or NaN in the converted model: the spec's values as `quantization` stored them (float16 overflows
    past 65504, an int8 scale past its type's range), a `ValueError` naming the first tensor that holds one."""
    for name, value in spec.variables(ordered=True):
        if getattr(value, "dtype", None) not in ("float16", "bfloat16", "float32"):
            continue  # (an alias, a string, an integer tensor)
        values = value.to("float32").numpy()
        if not np.isfinite(values).all():
            raise ValueError(
                f"{where}: the tensor {name} holds values beyond the range of "
                f"{quantization or 'float32'} once converted (infinity or NaN); export it with another "
                "--quantization (float32, int8)."
            )


def model_spec(model, tokenizer):
    """The `ctranslate2.specs.TransformerSpec` of a translation model and its tokenizer."""
    config = model.config
    refused = unsupported_options(config)
    if refused:
        raise ValueError(
            f"CTranslate2 cannot run this model's options: {', '.join(refused)}. Serve it with the "
            "PyTorch engine (--engine pytorch) instead."
        )
    activation = getattr(common_spec.Activation, CT2_ACTIVATIONS[config.activation_function])
    common = dict(pre_norm=config.normalize_before, activation=activation)
    encoder = transformer_spec.TransformerEncoderSpec(config.encoder_layers, config.encoder_attention_heads, **common)
    decoder = transformer_spec.TransformerDecoderSpec(config.decoder_layers, config.decoder_attention_heads, **common)
    with torch.no_grad():
        set_stack(encoder, model.model.encoder, config)
        set_stack(decoder, model.model.decoder, config)
        decoder.projection.weight = array(model.lm_head.weight)
    spec = transformer_spec.TransformerSpec(encoder, decoder)
    tokens = vocabulary(tokenizer, config.vocab_size)
    spec.register_source_vocabulary(tokens)
    spec.register_target_vocabulary(tokens)
    names = tokenizer.convert_ids_to_tokens([config.decoder_start_token_id, config.eos_token_id])
    spec.config.decoder_start_token, spec.config.eos_token = names
    spec.config.bos_token = tokenizer.bos_token or names[0]
    spec.config.unk_token = tokenizer.unk_token or "<unk>"
    # the rows of the position tables: the translator keeps inputs and outputs within them
    spec.config.add_attribute("max_positions", len(position_table(model.model.encoder.embed.embed_positions, config)))
    return spec


def vocabulary(tokenizer, vocab_size: int) -> list[str]:
    """The tokens by id, filled up to the model's `vocab_size` with tokens no text produces."""
    tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    if len(tokens) > vocab_size:
        raise ValueError(f"The tokenizer has {len(tokens)} tokens but the model's vocab_size is {vocab_size}.")
    return tokens + [f"<unused{i}>" for i in range(vocab_size - len(tokens))]


# Sinusoidal positions are exported for every length the commands admit: inputs of up to 1024 tokens (translate's
# cap where the tokenizer sets none) and outputs of up to 1024 (serve's max_new_tokens limit), the start token included.
SINUSOIDAL_POSITIONS = 1025


def position_table(positions, config) -> torch.Tensor:
    """The position vectors CTranslate2 adds (section 3.5), a table of fixed rows: a learned table as trained;
    sinusoids for max(`max_position_embeddings`, SINUSOIDAL_POSITIONS) positions (ours are computed for any)."""
    if positions.kind == "learned":
        return positions.weight
    rows = max(config.max_position_embeddings, SINUSOIDAL_POSITIONS)
    return VanillaTransformerPositionalEmbedding.sinusoidal_table(rows, config.d_model)


def set_stack(spec, stack, config):
    """Embeddings (section 3.4), positions (section 3.5) and the layers of the encoder or decoder."""
    spec.scale_embeddings = math.sqrt(config.d_model) if config.scale_embedding else 1.0
    embeddings = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    embeddings.weight = array(stack.embed_tokens.weight)
    spec.position_encodings.encodings = array(position_table(stack.embed.embed_positions, config))
    if stack.layer_norm is not None:  # pre-LN's final LayerNorm
        set_layer_norm(spec.layer_norm, stack.layer_norm)
    for layer_spec, layer in zip(spec.layer, stack.layers):
        set_attention(layer_spec.self_attention, layer.self_attn, fused_qkv=True)
        set_layer_norm(layer_spec.self_attention.layer_norm, layer.self_attn_layer_norm)
        if hasattr(layer, "encoder_attn"):
            set_attention(layer_spec.attention, layer.encoder_attn, fused_qkv=False)
            set_layer_norm(layer_spec.attention.layer_norm, layer.encoder_attn_layer_norm)
        set_linear(layer_spec.ffn.linear_0, layer.ffn.fc1)
        set_linear(layer_spec.ffn.linear_1, layer.ffn.fc2)
        set_layer_norm(layer_spec.ffn.layer_norm, layer.ffn_layer_norm)


def set_attention(spec, attention, fused_qkv: bool):
    """Self-attention as one q/k/v projection; encoder-decoder attention as q plus one k/v projection."""
    groups = (
        [(attention.q_proj, attention.k_proj, attention.v_proj)]
        if fused_qkv
        else [(attention.q_proj,), (attention.k_proj, attention.v_proj)]
    )
    for linear_spec, projections in zip(spec.linear, groups):
        linear_spec.weight = np.concatenate([array(p.weight) for p in projections])
        linear_spec.bias = np.concatenate([array(p.bias) for p in projections])
    set_linear(spec.linear[-1], attention.out_proj)


def set_linear(spec, linear):
    spec.weight = array(linear.weight)
    if linear.bias is not None:
        spec.bias = array(linear.bias)


def set_layer_norm(spec, norm):
    spec.gamma, spec.beta = array(norm.weight), array(norm.bias)


def export_ctranslate2(model, output_dir, quantization: str | None = None, force: bool = False) -> str:
    """Convert a saved translation model to a CTranslate2 directory: what `vanilla-transformer export-ctranslate2` runs.

    The directory holds `model.bin`, the shared vocabulary, CTranslate2's `config.json`, the tokenizer, the generation
    config and the model card, and is written whole, then renamed into place (never half a directory). The
    `translate` and `serve` commands and `make_translator` run it with the CTranslate2 engine.

    Args:
        model: a saved translation model (a path or Hub id) or its `model_dirs.ModelDir`.
        output_dir: the directory to write.
        quantization: the stored weight type, as `VanillaTransformerConverter.convert`'s (None: float32).
        force: replace `output_dir` if it is an earlier CTranslate2 export or an empty directory (never anything else).

    Returns:
        `output_dir`.

    Raises:
        ImportError: ctranslate2 is not installed (the `ctranslate2` extra).
        FileNotFoundError: no such model directory.
        FileExistsError: `output_dir` exists and `force` is not set, or holds something other than an earlier export.
        OSError: a damaged JSON file of the model, named.
        ValueError: an empty `output_dir` or one that is or holds the model, not a saved translation model (an
            export, a tagger), or a model CTranslate2 cannot hold (as `VanillaTransformerConverter.convert`'s).

    Example:
        ```python
        from vanilla_transformer.deploy.ctranslate2 import export_ctranslate2
        from vanilla_transformer.deploy.translators import make_translator

        export_ctranslate2("outputs/demo", "outputs/demo-ct2", quantization="int8", force=True)
        make_translator("outputs/demo-ct2")(["ein kleines haus"])
        ```
    """
    output_dir = check_export_target(output_dir, force, "export-ctranslate2")
    found = model if isinstance(model, ModelDir) else recognise(model, task="translation")
    refuse_overwriting([], [found.path], replaced=[output_dir])  # (--force replaces the directory whole)
    with replaced_atomically(output_dir) as staging:  # a finished export or none: never half a directory
        VanillaTransformerConverter(found).convert(staging, quantization=quantization)
        copy_card(found.path, staging)
    return output_dir
