"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017) as a Hugging Face model.

Section numbers in docstrings refer to the paper. Besides torch and transformers, this file imports (relatively) its
configuration, the CPU kernels and losses, the named-entity parts (character features, CRF, the tagging head's losses)
and the translation pipeline: `save_pretrained` copies them beside the weights, so `trust_remote_code=True` loads them
where our package is not installed.
"""

import math
import re

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import skip_init
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.conversion_mapping import register_checkpoint_conversion_mapping
from transformers.core_model_loading import WeightRenaming
from transformers.generation import GenerationMixin
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPastAndCrossAttentions,
    MaskedLMOutput,
    Seq2SeqLMOutput,
    Seq2SeqModelOutput,
    TokenClassifierOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, PreTrainedModel
from transformers.processing_utils import Unpack
from transformers.utils import TransformersKwargs, can_return_tuple
from transformers.utils.deprecation import deprecate_kwarg
from transformers.utils.generic import merge_with_config_defaults
from transformers.utils.output_capturing import OutputRecorder, capture_outputs

from .configuration_vanilla_transformer import VanillaTransformerConfig
from .kernels_vanilla_transformer import apply_dropout, may_read_values, token_loss
from .ner_vanilla_transformer import (
    VanillaTransformerCharacterFeatures,
    VanillaTransformerClassifier,
    VanillaTransformerCRF,
    auxiliary_loss,
    iob2_penalties,
    tagging_loss_and_scores,
)

MODEL_KWARGS = set(TransformersKwargs.__annotations__)  # what a forward passes on to its modules


# ----------------------------------------------------------------------------------------------------------------------
# Input checks: bad input gets a clear error here, not a trace from deep inside torch.


def check_token_ids(name: str, ids: torch.Tensor, vocab_size: int) -> None:
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(ids).__name__}.")
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids, got dtype {ids.dtype}.")
    if ids.dim() != 2:
        raise ValueError(f"{name} must have shape (batch, length), got {tuple(ids.shape)}.")
    if ids.shape[0] == 0 or ids.shape[1] == 0:
        raise ValueError(f"{name} is empty: shape {tuple(ids.shape)}.")
    if not may_read_values(ids):  # (training on a GPU: the tokenizer's ids are checked against the config before)
        return
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or hi >= vocab_size:
        bad = lo if lo < 0 else hi
        raise ValueError(f"{name} contains token id {bad}, outside the vocabulary [0, {vocab_size}).")


def check_model_kwargs(model: nn.Module, kwargs: dict) -> None:
    """The keyword arguments a forward passes on must be transformers' own (`TransformersKwargs`): a misspelt argument
    (`label=`) would otherwise be dropped without an error, and a cache under another name would leave every decoding
    step without its past."""
    for name, value in kwargs.items():
        if isinstance(value, Cache):
            raise TypeError(f"Got a {type(value).__name__} as `{name}`; the model reads its cache as `cache`.")
        if name not in MODEL_KWARGS:
            raise TypeError(f"{type(model).__name__}.forward() got an unexpected keyword argument {name!r}.")


def check_mask(name: str, mask: torch.Tensor | None, shape: tuple) -> None:
    if mask is not None and tuple(mask.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(mask.shape)} but the inputs have shape {tuple(shape)}.")


def shift_tokens_right(labels: torch.Tensor, pad_token_id: int, decoder_start_token_id: int) -> torch.Tensor:
    """Teacher forcing: the decoder sees `<start> y_1 ... y_{n-1}` and predicts `y_1 ... y_n` (section 3.1)."""
    shifted = labels.new_full(labels.shape, pad_token_id)
    shifted[:, 1:] = labels[:, :-1]
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill_(shifted == -100, pad_token_id)


# ----------------------------------------------------------------------------------------------------------------------
# Embeddings (sections 3.4 and 3.5)


class VanillaTransformerPositionalEmbedding(nn.Module):
    """Positions added to the token embeddings (section 3.5).

    "sinusoidal": PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...), interleaved as in the paper,
    computed for the positions asked (nothing stored, no parameters: any length works, and a compiled or exported graph
    computes them itself). "learned": a trained table of `max_position_embeddings` rows.
    """

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__()
        self.kind = config.position_embedding_type
        self.d_model = config.d_model
        self.max_positions = config.max_position_embeddings
        if self.kind == "learned":
            self.weight = nn.Parameter(torch.empty(config.max_position_embeddings, config.d_model))

    @staticmethod
    def sinusoids(positions: torch.Tensor, d_model: int) -> torch.Tensor:
        inv_freq = torch.exp(
            torch.arange(0, d_model, 2, dtype=torch.float32, device=positions.device) * (-math.log(10000.0) / d_model)
        )
        angles = positions.float().unsqueeze(-1) * inv_freq  # (..., D/2)
        return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # (..., D): sin, cos interleaved

    @classmethod
    def sinusoidal_table(cls, n_positions: int, d_model: int, device=None) -> torch.Tensor:
        return cls.sinusoids(torch.arange(n_positions, device=device), d_model)  # (P, D)

    def forward(self, position_ids: torch.Tensor, end: int | torch.Tensor | None = None) -> torch.Tensor:
        """position_ids (batch or 1, length) -> (batch or 1, length, d_model); `end`: one past the last position (the
        length when None)."""
        if self.kind == "sinusoidal":
            if position_ids.shape[0] == 1:
                return self.sinusoids(position_ids, self.d_model)
            # positions per row (`position_ids_of` a 2-D mask: each below `end`): the table up to `end`, gathered,
            # rather than a sine and a cosine for every (row, position, dimension) - the same numbers
            size = position_ids.shape[-1] if end is None else end
            return F.embedding(position_ids, self.sinusoidal_table(size, self.d_model, position_ids.device))
        end = position_ids.shape[-1] if end is None else end
        if isinstance(end, int) and end > self.max_positions:  # (a static cache's length is a tensor: no check)
            raise ValueError(
                f"Sequence of {end} positions exceeds max_position_embeddings={self.max_positions} of the learned "
                "position table; truncate the input or use position_embedding_type='sinusoidal'."
            )
        return self.weight[position_ids]


def position_ids_of(
    attention_mask: torch.Tensor | None, length: int, past_length: int | torch.Tensor = 0, device=None
) -> torch.Tensor:
    """The position of every token (batch or 1, length): 0, 1, ... from each sequence's first token.

    A 2-D `attention_mask` may hold segment numbers instead of ones (1, 1, 1, 2, 2, 0 = two sequences packed into one
    row, then padding): positions restart where the number changes, so every packed sequence is placed as if alone
    (deviation: the paper has one sequence per row). With a cache, positions continue from `past_length`.
    """
    if attention_mask is None or attention_mask.dim() != 2 or attention_mask.shape[-1] != length:
        return (torch.arange(length, device=device) + past_length).unsqueeze(0)  # (1, T)
    index = torch.arange(length, device=attention_mask.device).expand_as(attention_mask)
    starts = (attention_mask != attention_mask.roll(1, dims=1)) | (index == 0)  # (B, T): a sequence starts here
    ordinal = starts.long().cumsum(1)  # (B, T): 1 for the first sequence of a row, 2 for the next, ...
    first = index.new_zeros(attention_mask.shape[0], length + 1).scatter(  # (B, T + 1): sequence k -> its start
        1, torch.where(starts, ordinal, 0), torch.where(starts, index, 0)
    )
    return index - first.gather(1, ordinal)  # (B, T) (scatter and gather rather than cummax: ONNX has both)


def running_segments(attention_mask: torch.Tensor) -> torch.Tensor:
    """The decoder's reading of a 2-D mask (batch, keys): each token's sequence number, where a 0 (a token masked out
    inside or after a sequence) takes the number of the last token before it that is not masked. A query's position and
    the keys it sees then depend only on the tokens before it, as they do when decoding step by step with a cache:
    cached decoding equals one pass over the whole sequence under any 0/1 mask."""
    nonzero = attention_mask != 0
    count = nonzero.long().cumsum(1)  # (B, S): tokens not masked so far
    numbers = count.new_zeros(attention_mask.shape[0], attention_mask.shape[1] + 1).scatter(  # (any mask dtype)
        1, torch.where(nonzero, count, 0), torch.where(nonzero, attention_mask.long(), 0)
    )  # (B, S + 1): k-th unmasked's
    return numbers.gather(1, count)  # (B, S)


class VanillaTransformerTiedCopy(nn.Embedding):
    """A stack's token table where the model ties it to its `shared` matrix: replaced by it after initialisation, so
    created without drawing random numbers (`skip_init`) and left alone by `_init_weights` (seeds keep results)."""


class VanillaTransformerEmbedding(nn.Module):
    """Token embedding x sqrt(d_model) (section 3.4) + positions (section 3.5) -> dropout (section 5.4).

    With `config.tie_word_embeddings` the model ties `embed_tokens` to its `shared` matrix (section 3.4).
    Deviation, off by default: `token_dropout` zeroes whole token vectors (before the positions are added) in training.
    """

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__()
        shape = (config.vocab_size, config.d_model, config.pad_token_id)
        tied = config.tie_word_embeddings
        self.embed_tokens = skip_init(VanillaTransformerTiedCopy, *shape) if tied else nn.Embedding(*shape)
        self.embed_positions = VanillaTransformerPositionalEmbedding(config)
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.dropout = config.dropout
        self.token_dropout = config.token_dropout

    def forward(
        self, input_ids=None, inputs_embeds=None, position_ids=None, end=None, word_features=None
    ) -> torch.Tensor:
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        if position_ids is None:
            position_ids, end = position_ids_of(None, inputs_embeds.shape[1], device=inputs_embeds.device), None
        if self.training and self.token_dropout > 0:
            keep = torch.rand(inputs_embeds.shape[:-1], device=inputs_embeds.device) >= self.token_dropout  # (B, T)
            inputs_embeds = inputs_embeds * keep.unsqueeze(-1).to(inputs_embeds.dtype)
        hidden = inputs_embeds * self.embed_scale + self.embed_positions(position_ids, end).to(inputs_embeds.dtype)
        if word_features is not None:  # character features (deviation, see VanillaTransformerCharacterFeatures)
            hidden = hidden + word_features.to(hidden.dtype)
        return apply_dropout(hidden, self.dropout, self.training)


# ----------------------------------------------------------------------------------------------------------------------
# Attention (section 3.2)


def numbers_sequences(attention_mask: torch.Tensor | None) -> bool:
    """Whether a 2-D mask may number packed sequences (1, 1, 1, 2, 2, 0; `position_ids_of`) rather than mark padding
    with 0/1, so that attention needs `mask_arguments`' per-pair rule: never for a bool mask, nor under `torch.export`
    (an exported graph reads a 2-D mask as 0/1 padding: packed rows are a training input, and masking_utils' `vmap`
    over a rule does not trace with dynamic shapes); else by its values where they can be read, and always compiled."""
    if attention_mask is None or attention_mask.dtype == torch.bool or torch.compiler.is_exporting():
        return False
    return not may_read_values(attention_mask) or bool((attention_mask > 1).any())


def mask_arguments(
    attention_mask: torch.Tensor | None, key_segments: torch.Tensor | None, query_segments: torch.Tensor | None = None
) -> dict:
    """What transformers' `masking_utils` builds each backend's mask from, for a 2-D `attention_mask` (batch, keys):
    the mask itself where it marks padding alone (masking_utils builds its own padding mask: faster, no `vmap`), else,
    where it numbers packed sequences (`numbers_sequences`), a rule (its `and_mask_function`): a key of segment 0
    (padding) is never seen, and a query of `query_segments` sees only its own segment's keys."""
    if key_segments is None or not numbers_sequences(attention_mask):
        return {"attention_mask": attention_mask, "and_mask_function": None}

    def allowed(batch, head, query, key):  # (a padding query, segment 0, sees every key that is not padding)
        key_segment = key_segments[batch, key]
        if query_segments is None:
            return key_segment != 0
        query_segment = query_segments[batch, query]
        return (key_segment != 0) & ((query_segment == key_segment) | (query_segment == 0))

    return {"attention_mask": None, "and_mask_function": allowed}


# torch's compiled flex-attention kernel for CPUs returns wrong values (or NaN) for some heads narrower than this, at
# some lengths (torch 2.13 and 2.14: heads of 8 or 16 dimensions, lengths of 8 modulo 16)
FLEX_ON_CPU_MIN_HEAD_DIM = 32


def check_backend(implementation: str, query: torch.Tensor) -> None:
    """Refuses a backend that would give wrong values for these queries (B, H, T, Dh): flex attention on a CPU with
    heads narrower than `FLEX_ON_CPU_MIN_HEAD_DIM`."""
    head_dim = query.shape[-1]
    if implementation == "flex_attention" and query.device.type == "cpu" and head_dim < FLEX_ON_CPU_MIN_HEAD_DIM:
        raise ValueError(
            f"flex_attention on a CPU needs heads of at least {FLEX_ON_CPU_MIN_HEAD_DIM} dimensions "
            f"(d_model / attention heads); this model's have {head_dim}, for which torch's CPU kernel "
            f"returns wrong values: use attn_implementation 'sdpa' or 'eager'."
        )


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    position_bias: torch.Tensor | None = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V (equation 1), written out; returns the output (B, T, H, Dh)
    and the weights. `attention_mask` is additive (masked scores at the dtype's minimum: a fully masked row stays
    finite); `position_bias` (B, H, T, S), the relative-position scores, is added too. The other backends take the same
    arguments from transformers' `ALL_ATTENTION_FUNCTIONS`: "sdpa" and "flex_attention" (inference only on CPUs)."""
    if query.dtype == torch.float16:  # scores beyond fp16's range (65504) would overflow to inf: take them in fp32
        query, key = query.float(), key.float()
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling  # (B, H, T, S)
    if position_bias is not None:
        scores = scores + position_bias
    if attention_mask is not None and attention_mask.dtype == torch.bool:  # a caller's own 4-D mask: True = seen
        attention_mask = torch.where(attention_mask, 0.0, torch.finfo(scores.dtype).min)
    if attention_mask is not None:
        scores = scores + attention_mask
    weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(value.dtype)
    out = torch.matmul(apply_dropout(weights, dropout, module.training), value)  # (B, H, T, Dh)
    return out.transpose(1, 2).contiguous(), weights  # (B, T, H, Dh)


class VanillaTransformerAttention(nn.Module):
    """Multi-head attention (section 3.2.2): h parallel heads of size d_model / h, concatenated and projected.

    Used three ways (section 3.2.3): encoder self-attention, masked decoder self-attention (keys/values appended to the
    cache one step at a time), and encoder-decoder attention (keys/values computed once from the encoder output).
    Deviation, off by default: `config.scale_attention=False` drops the 1 / sqrt(d_k) (TENER's sharper attention).
    """

    def __init__(
        self,
        config: VanillaTransformerConfig,
        layer_idx: int,
        num_heads: int,
        is_causal: bool = False,
        is_cross_attention: bool = False,
    ):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.num_heads = num_heads
        self.head_dim = config.d_model // num_heads
        self.scaling = self.head_dim**-0.5 if config.scale_attention else 1.0
        self.dropout = config.attention_dropout
        self.is_causal = is_causal  # read by transformers' SDPA function when the mask is None (its causal kernels)
        self.is_cross_attention = is_cross_attention
        self.q_proj = nn.Linear(config.d_model, config.d_model)
        self.k_proj = nn.Linear(config.d_model, config.d_model)
        self.v_proj = nn.Linear(config.d_model, config.d_model)
        self.out_proj = nn.Linear(config.d_model, config.d_model)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(*x.shape[:-1], self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, T, Dh)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        key_value_states: torch.Tensor | None = None,
        cache: EncoderDecoderCache | None = None,
        position_bias: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        query = self._heads(self.q_proj(hidden_states))
        layer_cache = None
        if cache is not None:
            layer_cache = cache.cross_attention_cache if self.is_cross_attention else cache.self_attention_cache
        if self.is_cross_attention and cache is not None and cache.is_updated.get(self.layer_idx):
            key, value = layer_cache.layers[self.layer_idx].keys, layer_cache.layers[self.layer_idx].values
        else:
            source = key_value_states if self.is_cross_attention else hidden_states
            key, value = self._heads(self.k_proj(source)), self._heads(self.v_proj(source))
            if layer_cache is not None:
                key, value = layer_cache.update(key, value, self.layer_idx)
                if self.is_cross_attention:
                    cache.is_updated[self.layer_idx] = True
        check_backend(self.config._attn_implementation, query)
        attention = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, eager_attention_forward)
        out, weights = attention(
            self,
            query,
            key,
            value,
            attention_mask,
            scaling=self.scaling,
            dropout=self.dropout if self.training else 0.0,
            position_bias=position_bias,
            **kwargs,
        )
        out = out.reshape(*hidden_states.shape[:-1], -1)  # (B, T, D)
        return self.out_proj(out), weights


class VanillaTransformerRelativePositionBias(nn.Module):
    """Deviation, off by default (`relative_attention_max_distance=0`): a learned scalar per head and clipped signed
    distance j - i in [-k, k], added to the self-attention scores of every layer of a stack (relative positions as in
    Shaw et al., 2018, shared across layers as in T5; direction-aware, which TENER found to matter for tagging). It
    gives the model the locality bias that small datasets such as CoNLL-2003 lack; it starts at zero (the paper).
    Passed to the attention as its `position_bias` (each backend adds it to the scores: flex in its score_mod)."""

    def __init__(self, config: VanillaTransformerConfig, num_heads: int):
        super().__init__()
        self.max_distance = config.relative_attention_max_distance
        self.weight = nn.Parameter(torch.zeros(2 * self.max_distance + 1, num_heads))

    def forward(self, hidden_states: torch.Tensor, key_length: int, past_length: int | torch.Tensor = 0):
        """(batch, heads, queries, keys) in hidden_states' dtype: query i at position past_length + i, key j at j."""
        query_pos = (torch.arange(hidden_states.shape[1], device=hidden_states.device) + past_length)[:, None]  # (T, 1)
        key_pos = torch.arange(key_length, device=hidden_states.device)[None, :]  # (1, S)
        distance = (key_pos - query_pos).clamp(-self.max_distance, self.max_distance) + self.max_distance  # (T, S)
        bias = self.weight[distance].permute(2, 0, 1).to(hidden_states.dtype)  # (H, T, S)
        return bias.expand(hidden_states.shape[0], -1, -1, -1)  # (B, H, T, S), a view


# ----------------------------------------------------------------------------------------------------------------------
# Layers (section 3.1) and the feed-forward network (section 3.3)


class VanillaTransformerFeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2 (equation 2), applied to each position separately."""

    def __init__(self, config: VanillaTransformerConfig, ffn_dim: int):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, config.d_model)
        self.activation_fn = ACT2FN[config.activation_function]
        self.activation_dropout = config.activation_dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.activation_fn(self.fc1(x))
        x = apply_dropout(x, self.activation_dropout, self.training)
        return self.fc2(x)


# Files name each layer norm after its sub-layer (`self_attn_sublayer.layer_norm`), as checkpoint files always have:
# transformers renames them on loading and back on saving, so a file written by any release loads in any other.
SAVED_LAYER_NORMS = (r"\.(self_attn|encoder_attn|ffn)_sublayer\.layer_norm\.", r".\1_layer_norm.")  # (file, module)
register_checkpoint_conversion_mapping(
    VanillaTransformerConfig.model_type, [WeightRenaming(*SAVED_LAYER_NORMS)], overwrite=True
)


class VanillaTransformerLayer(GradientCheckpointingLayer):
    """A residual connection around each sub-layer, with layer normalisation (section 3.1) and dropout (section 5.4).

    Post-LN (the paper's "Add & Norm"): x = LayerNorm(x + Dropout(Sublayer(x))). Pre-LN (`normalize_before=True`, a
    deliberate deviation that trains deep stacks without warm-up): x = x + Dropout(Sublayer(LayerNorm(x))).
    """

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__()
        self.normalize_before = config.normalize_before
        self.dropout = config.dropout
        self.register_load_state_dict_pre_hook(self.rename_file_names)

    @staticmethod
    def rename_file_names(module, state_dict: dict, prefix: str, *args) -> None:
        """The renaming above, for a plain `load_state_dict` of a file's weights (Trainer resuming a run)."""
        for key in [key for key in state_dict if key.startswith(prefix) and re.search(SAVED_LAYER_NORMS[0], key)]:
            state_dict[re.sub(*SAVED_LAYER_NORMS, key)] = state_dict.pop(key)

    def norm_input(self, layer_norm: nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x) if self.normalize_before else x  # pre-LN: the sub-layer sees normalised input

    def add_and_norm(self, layer_norm: nn.LayerNorm, residual: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        x = residual + apply_dropout(out, self.dropout, self.training)
        return x if self.normalize_before else layer_norm(x)  # post-LN: the sum is normalised


class VanillaTransformerEncoderLayer(VanillaTransformerLayer):
    """Encoder layer (section 3.1): self-attention, then the feed-forward network, each a residual sub-layer."""

    def __init__(self, config: VanillaTransformerConfig, layer_idx: int):
        super().__init__(config)
        self.self_attn = VanillaTransformerAttention(config, layer_idx, config.encoder_attention_heads)
        self.self_attn_layer_norm = nn.LayerNorm(config.d_model)
        self.ffn = VanillaTransformerFeedForward(config, config.encoder_ffn_dim)
        self.ffn_layer_norm = nn.LayerNorm(config.d_model)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_bias: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> torch.Tensor:
        out, _ = self.self_attn(
            self.norm_input(self.self_attn_layer_norm, hidden_states),
            attention_mask=attention_mask,
            position_bias=position_bias,
            **kwargs,
        )
        hidden_states = self.add_and_norm(self.self_attn_layer_norm, hidden_states, out)
        out = self.ffn(self.norm_input(self.ffn_layer_norm, hidden_states))
        return self.add_and_norm(self.ffn_layer_norm, hidden_states, out)


class VanillaTransformerDecoderLayer(VanillaTransformerLayer):
    """Decoder layer (section 3.1): masked self-attention, encoder-decoder attention, feed-forward network."""

    def __init__(self, config: VanillaTransformerConfig, layer_idx: int):
        super().__init__(config)
        heads = config.decoder_attention_heads
        self.self_attn = VanillaTransformerAttention(config, layer_idx, heads, is_causal=True)
        self.self_attn_layer_norm = nn.LayerNorm(config.d_model)
        self.encoder_attn = VanillaTransformerAttention(config, layer_idx, heads, is_cross_attention=True)
        self.encoder_attn_layer_norm = nn.LayerNorm(config.d_model)
        self.ffn = VanillaTransformerFeedForward(config, config.decoder_ffn_dim)
        self.ffn_layer_norm = nn.LayerNorm(config.d_model)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_bias: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        cache: EncoderDecoderCache | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> torch.Tensor:
        out, _ = self.self_attn(
            self.norm_input(self.self_attn_layer_norm, hidden_states),
            attention_mask=attention_mask,
            position_bias=position_bias,
            cache=cache,
            **kwargs,
        )
        hidden_states = self.add_and_norm(self.self_attn_layer_norm, hidden_states, out)
        out, _ = self.encoder_attn(
            self.norm_input(self.encoder_attn_layer_norm, hidden_states),
            attention_mask=encoder_attention_mask,
            key_value_states=encoder_hidden_states,
            cache=cache,
            **kwargs,
        )
        hidden_states = self.add_and_norm(self.encoder_attn_layer_norm, hidden_states, out)
        out = self.ffn(self.norm_input(self.ffn_layer_norm, hidden_states))
        return self.add_and_norm(self.ffn_layer_norm, hidden_states, out)


# ----------------------------------------------------------------------------------------------------------------------
# Stacks


class VanillaTransformerPreTrainedModel(PreTrainedModel):
    """The base of every model here: `from_pretrained`, `save_pretrained`, weight initialisation, for one `config`."""

    config_class = VanillaTransformerConfig
    config: VanillaTransformerConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _supports_flash_attn = False
    _supports_flex_attn = True
    _no_split_modules = ["VanillaTransformerEncoderLayer", "VanillaTransformerDecoderLayer"]
    _can_compile_fullgraph = True  # tested: a training step and a cached decoding step trace without graph breaks

    @torch.no_grad()
    def _init_weights(self, module):
        """Xavier-uniform projections as in the reference implementations, embeddings ~ N(0, d_model^-0.5) so that
        after the x sqrt(d_model) scaling (section 3.4) token vectors have unit-variance components; the padding row
        is zero. Never N(0, 1) embeddings with tied weights: the logits explode and fp32 denormals slow every step."""
        if isinstance(module, (nn.Linear, nn.Conv1d)):
            if isinstance(module, VanillaTransformerClassifier):
                init.normal_(module.weight, mean=0.0, std=self.config.init_std)
            else:
                init.xavier_uniform_(module.weight)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, VanillaTransformerTiedCopy):
            return
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=self.config.d_model**-0.5)
            if module.padding_idx is not None and not getattr(module.weight, "_is_hf_initialized", False):
                init.zeros_(module.weight[module.padding_idx])
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        elif isinstance(module, VanillaTransformerCRF):
            for param in module.parameters():
                init.zeros_(param)
            for buffer, value in zip(
                (module.start_penalty, module.transition_penalty),
                iob2_penalties(self.config.id2label, self.config.num_labels),
            ):
                init.copy_(buffer, value)
        elif isinstance(module, VanillaTransformerRelativePositionBias):
            init.zeros_(module.weight)
        elif isinstance(module, VanillaTransformerCharacterFeatures):
            init.zeros_(module.token_chars)  # empty until set_token_characters (never memory left over)
        elif isinstance(module, VanillaTransformerPositionalEmbedding) and module.kind == "learned":
            init.normal_(module.weight, mean=0.0, std=self.config.d_model**-0.5)
        else:  # any other module: transformers' own defaults (the modules above draw as they did, seeds keep results)
            super()._init_weights(module)

    def set_token_characters(self, tokenizer) -> None:
        """Give the character features (`config.char_cnn_dim > 0`) the spelling of every token of `tokenizer`."""
        module = next((m for m in self.modules() if isinstance(m, VanillaTransformerCharacterFeatures)), None)
        if module is None:
            raise ValueError(f"This model has no character features (char_cnn_dim={self.config.char_cnn_dim}).")
        tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        if tokenizer.unk_token_id is not None:  # an unknown piece may sit inside a word: one unknown character
            tokens[tokenizer.unk_token_id] = "\ufffd"
        module.set_token_characters(tokens, set(tokenizer.all_special_ids) - {tokenizer.unk_token_id})


class VanillaTransformerStack(VanillaTransformerPreTrainedModel):
    """Embeddings, then N identical layers (section 3.1); pre-LN adds a final LayerNorm after the last layer.

    A PreTrainedModel, as Marian's encoder and decoder are, so that transformers records the hidden states and
    attentions its `_can_record_outputs` names (hooks on the layers, installed the first time they are asked for).
    It calls no `post_init`: the model holding it initialises every weight once, in module order.
    """

    def __init__(self, config: VanillaTransformerConfig, layer_cls, num_layers: int):
        super().__init__(config)
        self.embed = VanillaTransformerEmbedding(config)
        self.layers = nn.ModuleList([layer_cls(config, i) for i in range(num_layers)])
        self.layer_norm = nn.LayerNorm(config.d_model) if config.normalize_before else None
        self.relative_bias = (
            VanillaTransformerRelativePositionBias(config, self.layers[0].self_attn.num_heads)
            if config.relative_attention_max_distance
            else None
        )

    @property
    def embed_tokens(self) -> nn.Embedding:
        return self.embed.embed_tokens


class VanillaTransformerEncoder(VanillaTransformerStack):
    """The encoder (section 3.1): N layers of self-attention + feed-forward."""

    _can_record_outputs = {"hidden_states": VanillaTransformerEncoderLayer, "attentions": VanillaTransformerAttention}

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config, VanillaTransformerEncoderLayer, config.encoder_layers)
        self.char_features = VanillaTransformerCharacterFeatures(config) if config.char_cnn_dim else None

    @merge_with_config_defaults
    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutput:
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of input_ids or inputs_embeds to the encoder.")
        if input_ids is not None:
            check_token_ids("input_ids", input_ids, self.config.vocab_size)
        shape = input_ids.shape if input_ids is not None else inputs_embeds.shape[:2]
        check_mask("attention_mask", attention_mask, shape)
        word_features = None
        if self.char_features is not None:
            if input_ids is None:
                raise ValueError(
                    "char_cnn_dim > 0: the character features are computed from input_ids; pass "
                    "input_ids instead of inputs_embeds."
                )
            word_features = self.char_features(input_ids)
        length = shape[1]
        device = (input_ids if input_ids is not None else inputs_embeds).device
        positions = position_ids_of(attention_mask, length, device=device)
        hidden = self.embed(input_ids, inputs_embeds, positions, length, word_features=word_features)
        # (attention_mask checked above: (batch, length))
        mask = create_bidirectional_mask(
            self.config, hidden, **mask_arguments(attention_mask, attention_mask, attention_mask)
        )
        bias = self.relative_bias(hidden, length) if self.relative_bias is not None else None
        for layer in self.layers:
            hidden = layer(hidden, mask, bias, **kwargs)  # tensors positional (reentrant gradient checkpointing)
        if self.layer_norm is not None:
            hidden = self.layer_norm(hidden)
        return BaseModelOutput(last_hidden_state=hidden)


class VanillaTransformerDecoder(VanillaTransformerStack):
    """The decoder (section 3.1): N layers of masked self-, cross- and feed-forward sub-layers.

    With a cache, positions continue from the cache length, self-attention keys/values grow by the new steps and the
    cross-attention keys/values are computed from the encoder output once.
    """

    _can_record_outputs = {
        "hidden_states": VanillaTransformerDecoderLayer,
        "attentions": OutputRecorder(VanillaTransformerAttention, index=1, layer_name="self_attn"),
        "cross_attentions": OutputRecorder(VanillaTransformerAttention, index=1, layer_name="encoder_attn"),
    }

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config, VanillaTransformerDecoderLayer, config.decoder_layers)

    @merge_with_config_defaults
    @capture_outputs
    @deprecate_kwarg("past_key_values", version="5.40.0", new_name="cache")
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        cache: EncoderDecoderCache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of decoder_input_ids or decoder_inputs_embeds to the decoder.")
        check_model_kwargs(self, kwargs)
        if cache is not None and not isinstance(cache, EncoderDecoderCache):
            raise TypeError(
                f"cache must be an EncoderDecoderCache (self-attention + cross-attention), got {type(cache).__name__}."
            )
        if encoder_hidden_states is None:
            raise ValueError("The decoder needs encoder_hidden_states (pass input_ids or encoder_outputs).")
        if use_cache and cache is None:
            cache = EncoderDecoderCache(DynamicCache(config=self.config), DynamicCache(config=self.config))
        self_cache = cache.self_attention_cache if cache is not None else None
        past_length = self_cache.get_seq_length() if cache is not None else 0  # a tensor for a static cache
        # the caller's ids on the first step only: later steps feed the model's own, and a static cache's length is a
        # tensor whose value the host would have to wait for
        if input_ids is not None and isinstance(past_length, int) and past_length == 0:
            check_token_ids("decoder_input_ids", input_ids, self.config.vocab_size)
        batch, length = (input_ids if input_ids is not None else inputs_embeds).shape[:2]
        device = (input_ids if input_ids is not None else inputs_embeds).device
        check_mask("attention_mask", encoder_attention_mask, encoder_hidden_states.shape[:2])
        segments = None  # a 2-D mask read as sequence numbers (packed rows, or 0/1: `running_segments`), (B, past + T)
        positions = position_ids_of(None, length, past_length, device)
        if torch.is_tensor(attention_mask) and attention_mask.dim() == 2:  # (4-D or a BlockMask: `generate`'s own)
            if isinstance(past_length, int) and past_length and attention_mask.shape[-1] == length:
                attention_mask = torch.cat([attention_mask.new_ones(batch, past_length), attention_mask], dim=-1)
            check_mask("decoder_attention_mask", attention_mask, (batch, past_length + length))
            segments = running_segments(attention_mask)
            positions = position_ids_of(segments, segments.shape[-1], device=device)[:, -length:]
        hidden = self.embed(input_ids, inputs_embeds, positions, past_length + length)
        self_mask = create_causal_mask(
            self.config, hidden, cache=self_cache, **mask_arguments(attention_mask, segments, segments)
        )
        query_segments = segments[:, -length:] if segments is not None else None
        cross_mask = create_bidirectional_mask(
            self.config,
            hidden,
            encoder_hidden_states=encoder_hidden_states,
            **mask_arguments(encoder_attention_mask, encoder_attention_mask, query_segments),
        )
        key_length = self_cache.get_mask_sizes(length, 0)[0] if self_cache is not None else length
        bias = self.relative_bias(hidden, key_length, past_length) if self.relative_bias is not None else None
        for layer in self.layers:  # tensors positional (reentrant gradient checkpointing)
            hidden = layer(hidden, self_mask, bias, encoder_hidden_states, cross_mask, cache=cache, **kwargs)
        if self.layer_norm is not None:
            hidden = self.layer_norm(hidden)
        return BaseModelOutputWithPastAndCrossAttentions(last_hidden_state=hidden, cache=cache if use_cache else None)


# ----------------------------------------------------------------------------------------------------------------------
# Models


class VanillaTransformerModel(VanillaTransformerPreTrainedModel):
    """Encoder + decoder: the decoder's last hidden states (batch, target length, d_model), a `Seq2SeqModelOutput`."""

    _tied_weights_keys = {
        "encoder.embed.embed_tokens.weight": "shared.weight",
        "decoder.embed.embed_tokens.weight": "shared.weight",
    }

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        if config.tie_word_embeddings:  # section 3.4: one matrix for both embeddings and the output projection
            self.shared = nn.Embedding(config.vocab_size, config.d_model, config.pad_token_id)
        self.encoder = VanillaTransformerEncoder(config)
        self.decoder = VanillaTransformerDecoder(config)
        self.post_init()

    def get_input_embeddings(self):
        return self.encoder.embed.embed_tokens

    def set_input_embeddings(self, value):
        if self.config.tie_word_embeddings:
            self.shared = value
            self.decoder.embed.embed_tokens = value
        self.encoder.embed.embed_tokens = value

    @can_return_tuple
    @deprecate_kwarg("past_key_values", version="5.40.0", new_name="cache")
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: tuple | BaseModelOutput | None = None,
        cache: EncoderDecoderCache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> Seq2SeqModelOutput:
        check_model_kwargs(self, kwargs)
        if decoder_input_ids is None and decoder_inputs_embeds is None:
            raise ValueError("The seq2seq model needs decoder_input_ids (or decoder_inputs_embeds, or labels).")
        if encoder_outputs is None:
            encoder_outputs = self.encoder(
                input_ids=input_ids,
                attention_mask=attention_mask,
                inputs_embeds=inputs_embeds,
                return_dict=True,
                **kwargs,
            )
        elif not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(*encoder_outputs)
        decoder_batch = (decoder_input_ids if decoder_input_ids is not None else decoder_inputs_embeds).shape[0]
        if decoder_batch != encoder_outputs.last_hidden_state.shape[0]:
            raise ValueError(
                f"The decoder inputs have batch size {decoder_batch} but the encoder inputs have "
                f"{encoder_outputs.last_hidden_state.shape[0]}."
            )
        decoder_outputs = self.decoder(
            input_ids=decoder_input_ids,
            attention_mask=decoder_attention_mask,
            inputs_embeds=decoder_inputs_embeds,
            encoder_hidden_states=encoder_outputs.last_hidden_state,
            encoder_attention_mask=attention_mask,
            cache=cache,
            use_cache=use_cache,
            return_dict=True,
            **kwargs,
        )
        return Seq2SeqModelOutput(
            last_hidden_state=decoder_outputs.last_hidden_state,
            cache=decoder_outputs.cache,
            decoder_hidden_states=decoder_outputs.hidden_states,
            decoder_attentions=decoder_outputs.attentions,
            cross_attentions=decoder_outputs.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
        )


class BeamSearchCache(EncoderDecoderCache):
    """A decoder cache for beam search. Each sentence's beams share its encoder output, so the cross-attention keys and
    values are already in beam order and only the self-attention cache is reordered (EncoderDecoderCache reorders
    both: a copy of every encoder key and value at every step, about a tenth of the time of a CPU beam search)."""

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self.self_attention_cache.reorder_cache(beam_idx)


def beam_search_cache(model, **generate_kwargs) -> dict:
    """What `generate` adds to its keyword arguments to give beam search a BeamSearchCache. Empty when `kwargs` (or the
    generation config they pass, else the model's) ask for no beams, no cache, a cache of another kind, or pass a
    cache."""
    config = generate_kwargs.get("generation_config") or model.generation_config

    def setting(name):
        return generate_kwargs.get(name, getattr(config, name))

    if (
        (setting("num_beams") or 1) <= 1
        or setting("use_cache") is False
        or setting("cache_implementation")
        or generate_kwargs.get("cache") is not None
        or generate_kwargs.get("past_key_values") is not None
    ):
        return {}
    decoder = model.config.get_text_config(decoder=True)  # what generate's own cache is built from
    return {"cache": BeamSearchCache(DynamicCache(config=decoder), DynamicCache(config=decoder))}


class VanillaTransformerForConditionalGeneration(VanillaTransformerPreTrainedModel, GenerationMixin):
    """Encoder-decoder + output projection to the vocabulary (section 3.4), for translation and `generate()`: load one
    with `from_pretrained("outputs/demo")`. A config of an encoder-only model (no decoder) raises `ValueError`."""

    _tied_weights_keys = {"lm_head.weight": "model.shared.weight"}

    def __init__(self, config: VanillaTransformerConfig):
        encoder_only = {"VanillaTransformerForTokenClassification", "VanillaTransformerForMaskedLM"}
        if config.architectures and set(config.architectures) <= encoder_only:  # its decoder would be random
            raise ValueError(
                f"This config is of a {', '.join(config.architectures)}, which has no decoder: load it "
                "with AutoModelForTokenClassification (or AutoModelForMaskedLM), not as a translation "
                "model."
            )
        super().__init__(config)
        self.model = VanillaTransformerModel(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.post_init()

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, new_embeddings):
        self.lm_head = new_embeddings

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor):
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    def generate(self, *args, **kwargs):
        """`GenerationMixin.generate`, its beam search over a `BeamSearchCache` (unless the call chooses the cache)."""
        return super().generate(*args, **kwargs, **beam_search_cache(self, **kwargs))

    @can_return_tuple
    @deprecate_kwarg("past_key_values", version="5.40.0", new_name="cache")
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: tuple | BaseModelOutput | None = None,
        cache: EncoderDecoderCache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        num_items_in_batch: torch.Tensor | int | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> Seq2SeqLMOutput:
        """`labels` (batch, target length), -100 = ignored, are shifted right into `decoder_input_ids` when those are
        not given. `num_items_in_batch` (from Trainer) turns the mean loss into token sum / num_items_in_batch. Returns
        a `Seq2SeqLMOutput`: `logits` (batch, target length, vocab), `loss` (given `labels`), `cache` (decoding)."""
        check_model_kwargs(self, kwargs)
        if labels is not None:
            check_token_ids("labels", labels.masked_fill(labels == -100, 0), self.config.vocab_size)
            use_cache = False
            if decoder_input_ids is None and decoder_inputs_embeds is None:
                decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            cache=cache,
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            return_dict=True,
            **kwargs,
        )
        logits = self.lm_head(outputs.last_hidden_state)  # (B, T, V)
        loss = None
        if labels is not None:
            loss = token_loss(logits, labels, num_items_in_batch, self.config.label_smoothing)
        return Seq2SeqLMOutput(
            loss=loss,
            logits=logits,
            cache=outputs.cache,
            decoder_hidden_states=outputs.decoder_hidden_states,
            decoder_attentions=outputs.decoder_attentions,
            cross_attentions=outputs.cross_attentions,
            encoder_last_hidden_state=outputs.encoder_last_hidden_state,
            encoder_hidden_states=outputs.encoder_hidden_states,
            encoder_attentions=outputs.encoder_attentions,
        )


# ----------------------------------------------------------------------------------------------------------------------
# Named-entity recognition: the encoder alone, with a tagging head (and optionally a CRF)


class VanillaTransformerEncoderModel(VanillaTransformerPreTrainedModel):
    """The encoder alone, with the same parameter names as inside `VanillaTransformerModel` (`shared`, `encoder.*`),
    so a translation checkpoint's encoder loads into it and its decoder weights are simply not used."""

    _tied_weights_keys = {"encoder.embed.embed_tokens.weight": "shared.weight"}

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        if config.tie_word_embeddings:
            self.shared = nn.Embedding(config.vocab_size, config.d_model, config.pad_token_id)
        self.encoder = VanillaTransformerEncoder(config)
        self.post_init()

    def get_input_embeddings(self):
        return self.encoder.embed.embed_tokens

    def set_input_embeddings(self, value):
        if self.config.tie_word_embeddings:
            self.shared = value
        self.encoder.embed.embed_tokens = value

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutput:
        check_model_kwargs(self, kwargs)
        return self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds, return_dict=True, **kwargs
        )


class VanillaTransformerForTokenClassification(VanillaTransformerPreTrainedModel):
    """The encoder + dropout + a linear layer over `num_labels` tags per token (named-entity recognition); with
    `config.use_crf`, a CRF on top: trained by its sequence likelihood; in eval mode `logits` are its max-marginals
    (their argmax is the Viterbi path), in training mode the per-token emission scores.

    No decoder weights are allocated. Loading a `VanillaTransformerForConditionalGeneration` checkpoint keeps its
    encoder (fine-tune a translation model's encoder for tagging); its decoder weights are expected to be unused."""

    _keys_to_ignore_on_load_unexpected = [r"^model\.decoder\.", r"^lm_head\."]

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = VanillaTransformerEncoderModel(config)
        self.dropout = config.classifier_dropout if config.classifier_dropout is not None else config.dropout
        self.classifier = VanillaTransformerClassifier(config.d_model, config.num_labels)
        self.crf = VanillaTransformerCRF(config) if config.use_crf else None
        # Multi-task learning (not in the paper): auxiliary taggers trained beside the main one, unused in prediction.
        self.auxiliary_classifiers = nn.ModuleList(
            VanillaTransformerClassifier(config.d_model, n) for n in (config.auxiliary_num_labels or ())
        )
        self.post_init()

    def get_input_embeddings(self):
        return self.model.get_input_embeddings()

    def set_input_embeddings(self, value):
        self.model.set_input_embeddings(value)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        num_items_in_batch: torch.Tensor | int | None = None,
        auxiliary_targets: torch.LongTensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> TokenClassifierOutput:
        """`labels` (batch, length): tag ids, -100 = ignored (padding and non-first sub-tokens).
        `auxiliary_targets` (batch, length, len(config.auxiliary_num_labels)): the auxiliary tasks' tag ids, -100 =
        ignored; their cross-entropies, each divided by the main loss's token count, are added to the loss with weight
        `config.auxiliary_loss_weight`. (Not named `*labels`: Trainer would then expect them at evaluation too.)
        Returns a `TokenClassifierOutput`: `logits` (batch, length, num_labels), `loss` (given `labels`)."""
        check_model_kwargs(self, kwargs)
        outputs = self.model(
            input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds, return_dict=True, **kwargs
        )
        hidden = apply_dropout(outputs.last_hidden_state, self.dropout, self.training)
        logits = self.classifier(hidden)  # (B, T, num_labels)
        loss, logits = tagging_loss_and_scores(
            logits, labels, attention_mask, self.crf, self.training, num_items_in_batch
        )
        if auxiliary_targets is not None:
            loss = auxiliary_loss(
                self.auxiliary_classifiers,
                hidden,
                auxiliary_targets,
                labels,
                num_items_in_batch,
                self.config.auxiliary_loss_weight,
                loss,
            )
        return TokenClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


# ----------------------------------------------------------------------------------------------------------------------
# Encoder pretraining without labels (not in the paper): masked language modelling (Devlin et al., 2019)


class VanillaTransformerForMaskedLM(VanillaTransformerPreTrainedModel):
    """The encoder + a projection to the vocabulary (tied to the token embeddings, as in section 3.4) that predicts
    masked tokens from their context. Its parameter names are the tagger's (`model.shared`, `model.encoder.*`), so
    `VanillaTransformerForTokenClassification.from_pretrained` of a checkpoint of this model starts from the pretrained
    encoder (character features and relative positions included) with a new tagging head."""

    _tied_weights_keys = {"lm_head.weight": "model.shared.weight"}

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        self.model = VanillaTransformerEncoderModel(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self):
        return self.model.get_input_embeddings()

    def set_input_embeddings(self, value):
        self.model.set_input_embeddings(value)

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, new_embeddings):
        self.lm_head = new_embeddings

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        num_items_in_batch: torch.Tensor | int | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> MaskedLMOutput:
        """`labels` (batch, length): the original ids at masked positions, -100 elsewhere. Returns a `MaskedLMOutput`:
        `logits` (batch, length, vocab), `loss` (given `labels`)."""
        check_model_kwargs(self, kwargs)
        if labels is not None:
            check_token_ids("labels", labels.masked_fill(labels == -100, 0), self.config.vocab_size)
        outputs = self.model(
            input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds, return_dict=True, **kwargs
        )
        logits = self.lm_head(outputs.last_hidden_state)  # (B, T, V)
        loss = None if labels is None else token_loss(logits, labels, num_items_in_batch, self.config.label_smoothing)
        return MaskedLMOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


__all__ = [
    "VanillaTransformerPreTrainedModel",
    "VanillaTransformerModel",
    "VanillaTransformerForConditionalGeneration",
    "VanillaTransformerEncoderModel",
    "VanillaTransformerForTokenClassification",
    "VanillaTransformerForMaskedLM",
]


def __getattr__(name: str):
    """config.json's `custom_pipelines` names the translation pipeline as this file's; it loads on first use
    (`transformers.pipelines` takes a second to import)."""
    if name == "VanillaTranslationPipeline":
        from .pipeline_vanilla_transformer import VanillaTranslationPipeline

        return VanillaTranslationPipeline
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
