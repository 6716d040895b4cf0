"""Ensembles of trained translation models, for evaluation, prediction and `translate` (not in the paper, which
averages checkpoints of one run instead, section 6.1; models trained apart share no weights that could be averaged).

At each decoding step every member reads its own encoder output and its own cache, and the ensemble's scores are the
mean of the members' log-probabilities; greedy and beam search run over that mean (a product of experts, as the
tagger ensemble of `ner/ensemble.py`).
"""

import copy

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput

from .model.configuration_vanilla_transformer import VanillaTransformerConfig
from .model.modeling_vanilla_transformer import BeamSearchCache, VanillaTransformerForConditionalGeneration

SHARED = ("vocab_size", "pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")


class TranslationEnsembleCache(EncoderDecoderCache):
    """One decoder cache per member, held as one: what generate asks of a cache (its length, reordering beams,
    selecting or repeating rows) is done to every member's; introspection reads the first member's."""

    def __init__(self, members: list[EncoderDecoderCache]):
        super().__init__(members[0].self_attention_cache, members[0].cross_attention_cache)
        self.members = members

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        for member in self.members:
            member.reorder_cache(beam_idx)

    def crop(self, tokens_to_remove: int) -> None:
        for member in self.members:
            member.crop(tokens_to_remove)

    def batch_repeat_interleave(self, repeats: int) -> None:
        for member in self.members:
            member.batch_repeat_interleave(repeats)

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        for member in self.members:
            member.batch_select_indices(indices)

    def reset(self) -> None:
        for member in self.members:
            member.reset()


class TranslationEnsembleEncoder(nn.Module):
    """Every member's encoder over the same source: their outputs side by side on the last axis, (B, S, sum of the
    members' d_model), so that generate expands them for beams as one tensor."""

    main_input_name = "input_ids"

    def __init__(self, members):
        super().__init__()
        self.encoders = nn.ModuleList(member.get_encoder() for member in members)

    def forward(self, input_ids=None, attention_mask=None, inputs_embeds=None, **kwargs) -> BaseModelOutput:
        if inputs_embeds is not None:
            raise ValueError("An ensemble reads input_ids: its members embed them each in their own way.")
        hidden = [
            encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state for encoder in self.encoders
        ]
        return BaseModelOutput(last_hidden_state=torch.cat(hidden, dim=-1))


class TranslationEnsemble(PreTrainedModel, GenerationMixin):
    """`VanillaTransformerForConditionalGeneration` models trained with one tokenizer, generating as one: called
    and generating like a member (its `generation_config` is the first member's), its logits the mean of the members'
    log-probabilities. Built for evaluation and prediction: it starts, and stays, in eval mode.

    `translation_ensemble` builds one from saved directories, checking that the members agree; this class checks only
    the config fields the members must share (vocab_size and the special token ids).

    Args:
        members: the translation models, the first one's config and generation settings the ensemble's.

    Raises:
        ValueError: no members, or members whose vocab_size or special token ids differ.
        TypeError: a member that is not a `VanillaTransformerForConditionalGeneration`.

    Example:
        ```python
        from vanilla_transformer.model.modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration
        from vanilla_transformer.translation_ensemble import TranslationEnsemble

        load = VanillaTransformerForConditionalGeneration.from_pretrained
        ensemble = TranslationEnsemble([load("outputs/m30k-lr2e3"), load("outputs/m30k-lr2e3-s7")])
        ensemble.generate(**inputs, num_beams=4)  # inputs: a member's tokenizer's batch, as for one model
        ```
    """

    config_class = VanillaTransformerConfig
    main_input_name = "input_ids"
    # the members attend, each as its own class allows
    _supports_sdpa = VanillaTransformerForConditionalGeneration._supports_sdpa
    _supports_flex_attn = VanillaTransformerForConditionalGeneration._supports_flex_attn

    def __init__(self, members):
        members = list(members)
        if not members:
            raise ValueError("An ensemble needs at least one translation model, got none.")
        for i, member in enumerate(members):
            if not isinstance(member, VanillaTransformerForConditionalGeneration):
                raise TypeError(
                    f"Ensemble member {i} is a {type(member).__name__}, not a "
                    "VanillaTransformerForConditionalGeneration."
                )
            for name in SHARED:
                if getattr(member.config, name) != getattr(members[0].config, name):
                    raise ValueError(
                        f"Ensemble member {i} has {name}={getattr(member.config, name)!r} but member 0 "
                        f"has {getattr(members[0].config, name)!r}; members must share the tokenizer."
                    )
        super().__init__(copy.deepcopy(members[0].config))
        self.members = nn.ModuleList(members)
        self.encoder = TranslationEnsembleEncoder(members)
        self.widths = [member.config.d_model for member in members]
        self.generation_config = copy.deepcopy(members[0].generation_config)
        self.eval()

    def get_encoder(self):
        """The ensemble's encoder (what `generate` calls): every member's encoder, their outputs side by side."""
        return self.encoder

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        decoder_input_ids=None,
        decoder_attention_mask=None,
        encoder_outputs=None,
        cache=None,
        labels=None,
        use_cache=None,
        **kwargs,
    ) -> Seq2SeqLMOutput:
        """The ensemble's scores of the next target tokens, as a member's `forward` gives its own.

        Args:
            input_ids, attention_mask: (batch, source length), the source (or `encoder_outputs` instead of
                `input_ids`: the ensemble encoder's, every member's side by side).
            decoder_input_ids, decoder_attention_mask: (batch, target length); built from `labels` where not given.
            cache: a `TranslationEnsembleCache` (or None); use_cache: return one for the next step.
            labels: (batch, target length) target ids, -100 = ignored.

        Returns:
            A `Seq2SeqLMOutput`: `logits` (batch, target length, vocab), the mean of the members' log-probabilities;
            `loss` (given `labels`), the cross-entropy of the ensemble's distribution (the softmax of its logits);
            `cache`.
        """
        if encoder_outputs is None:
            encoder_outputs = self.encoder(input_ids=input_ids, attention_mask=attention_mask)
        hidden = encoder_outputs[0].split(self.widths, dim=-1)  # each member's own encoder output
        caches = cache.members if cache is not None else [None] * len(self.members)
        if labels is not None:
            use_cache = False
            if decoder_input_ids is None:
                decoder_input_ids = self.members[0].prepare_decoder_input_ids_from_labels(labels)
        log_probs, member_caches = [], []
        for member, encoded, member_cache in zip(self.members, hidden, caches):
            out = member(
                attention_mask=attention_mask,
                decoder_input_ids=decoder_input_ids,
                decoder_attention_mask=decoder_attention_mask,
                encoder_outputs=BaseModelOutput(last_hidden_state=encoded),
                cache=member_cache,
                use_cache=use_cache,
            )
            log_probs.append(out.logits.float().log_softmax(-1))  # (B, T, V)
            member_caches.append(out.cache)
        logits = torch.stack(log_probs).mean(0)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
        if use_cache is not False and cache is None and all(c is not None for c in member_caches):
            cache = TranslationEnsembleCache(member_caches)
        return Seq2SeqLMOutput(loss=loss, logits=logits, cache=cache if use_cache is not False else None)

    def generate(self, *args, **kwargs):
        """`GenerationMixin.generate` with one cache per member (each reordering only its self-attention keys and
        values under beam search, as a member's own `generate` does), unless the call chooses the cache."""
        config = kwargs.get("generation_config") or self.generation_config
        if (
            kwargs.get("cache") is None
            and kwargs.get("use_cache", config.use_cache) is not False
            and not kwargs.get("cache_implementation", config.cache_implementation)
        ):
            kwargs["cache"] = TranslationEnsembleCache([member_cache(member) for member in self.members])
        return super().generate(*args, **kwargs)


def member_cache(member) -> EncoderDecoderCache:
    decoder = member.config.get_text_config(decoder=True)
    return BeamSearchCache(DynamicCache(config=decoder), DynamicCache(config=decoder))


def translation_ensemble(model, tokenizer, paths, **kwargs) -> TranslationEnsemble:
    """A loaded translation model and more saved ones as one ensemble: what `--ensemble_with` builds.

    The members must share the tokenizer (its vocabulary, normalisation and special tokens), the architecture and,
    where both model cards name them, the languages.

    Args:
        model: a loaded `VanillaTransformerForConditionalGeneration`, the first member; the others go to its device.
        tokenizer: `model`'s tokenizer, which the others' must equal.
        paths: the directories (or Hub ids) of the other saved translation models.
        **kwargs: for `from_pretrained` of their models (and `cache_dir`, `trust_remote_code` of their tokenizers).

    Returns:
        The `TranslationEnsemble`, in eval mode.

    Raises:
        FileNotFoundError: no such directory.
        OSError: a damaged JSON file of a member, named.
        ValueError: a path that holds no translation model or an export, or members that disagree (named).

    Example:
        ```python
        from transformers import AutoTokenizer

        from vanilla_transformer.model.modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration
        from vanilla_transformer.translation_ensemble import translation_ensemble

        model = VanillaTransformerForConditionalGeneration.from_pretrained("outputs/m30k-lr2e3")
        tokenizer = AutoTokenizer.from_pretrained("outputs/m30k-lr2e3")
        ensemble = translation_ensemble(model, tokenizer, ["outputs/m30k-lr2e3-s7"])
        inputs = tokenizer(["Ein Hund läuft."], return_tensors="pt", return_token_type_ids=False)
        tokenizer.batch_decode(ensemble.generate(**inputs, num_beams=4), skip_special_tokens=True)
        ```
    """
    from .model_dirs import ensemble_members

    return TranslationEnsemble(
        ensemble_members(
            model, tokenizer, paths, VanillaTransformerForConditionalGeneration, "model", task="translation", **kwargs
        )
    )
