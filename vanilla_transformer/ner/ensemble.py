"""Ensembles of trained taggers, for evaluation and prediction (not in the paper, which averages checkpoints of one
run instead, section 6.1; independently trained models do not share weights that could be averaged)."""

import torch
from torch import nn
from transformers import AutoModelForTokenClassification
from transformers.modeling_outputs import TokenClassifierOutput

from ..model.kernels_vanilla_transformer import apply_dropout
from ..model.modeling_vanilla_transformer import VanillaTransformerForTokenClassification, tagging_loss_and_scores
from ..model.ner_vanilla_transformer import VanillaTransformerCRF
from ..model_dirs import ensemble_members


class TokenClassificationEnsemble(nn.Module):
    """A product of experts of `VanillaTransformerForTokenClassification` models trained on the same labels with the
    same tokenizer: each token's scores are the mean of the members' log-probabilities, or with CRF heads the mean of
    their emission scores decoded by a CRF whose start, transition and end scores are the members' means (the
    geometric mean of the members' sequence distributions, up to normalisation). Called like a member; starts in eval
    mode, where `logits` are the CRF max-marginals (argmax = the Viterbi path of the combined CRF).

    `ensemble_of` builds one from saved directories, checking that the members share the tokenizer; this class checks
    the config fields the members must share (`id2label`, `vocab_size`, `use_crf`).

    Args:
        taggers: the taggers, the first one's config the ensemble's `config`.

    Raises:
        ValueError: no taggers, or taggers whose labels, vocab_size or use_crf differ.
        TypeError: a member that is not a `VanillaTransformerForTokenClassification`.

    Example:
        ```python
        from vanilla_transformer.model.modeling_vanilla_transformer import VanillaTransformerForTokenClassification
        from vanilla_transformer.ner.ensemble import TokenClassificationEnsemble

        load = VanillaTransformerForTokenClassification.from_pretrained
        members = [load("outputs/conll/member1/averaged"), load("outputs/conll/member2/averaged")]
        ensemble = TokenClassificationEnsemble(members)
        tags = ensemble(**batch).logits.argmax(-1)  # batch: the tokenizer's input_ids, attention_mask
        ```
    """

    main_input_name = "input_ids"

    def __init__(self, taggers):
        super().__init__()
        taggers = list(taggers)
        if not taggers:
            raise ValueError("An ensemble needs at least one tagger, got none.")
        for i, tagger in enumerate(taggers):
            if not isinstance(tagger, VanillaTransformerForTokenClassification):
                raise TypeError(
                    f"Ensemble member {i} is a {type(tagger).__name__}, not a VanillaTransformerForTokenClassification."
                )
        config = taggers[0].config
        for i, tagger in enumerate(taggers[1:], 1):
            for name in ("id2label", "vocab_size", "use_crf"):
                if getattr(tagger.config, name) != getattr(config, name):
                    raise ValueError(
                        f"Ensemble member {i} has {name}={getattr(tagger.config, name)!r} but member 0 "
                        f"has {getattr(config, name)!r}; members must share labels and tokenizer."
                    )
        self.config = config
        self.taggers = nn.ModuleList(taggers)
        self.crf = None
        if config.use_crf:
            self.crf = VanillaTransformerCRF(config).to(taggers[0].device)
            with torch.no_grad():
                for name, param in self.crf.named_parameters():
                    param.copy_(torch.stack([tagger.crf.get_parameter(name) for tagger in taggers]).mean(0))
        self.eval()  # built for evaluation and prediction

    def forward(
        self, input_ids=None, attention_mask=None, inputs_embeds=None, labels=None, num_items_in_batch=None, **kwargs
    ):
        """The ensemble's tag scores, as a member's `forward` gives its own.

        Args:
            input_ids, attention_mask: (batch, length); inputs_embeds: instead of input_ids, given to every member.
            labels: (batch, length) tag ids, -100 = ignored; num_items_in_batch: as a member's (from Trainer).
            **kwargs: ignored.

        Returns:
            A `TokenClassifierOutput`: `logits` (batch, length, num_labels), the mean of the members' log-probabilities
            (with CRF heads, in eval mode, the combined CRF's max-marginals); `loss` given `labels`.
        """
        scores = []
        for tagger in self.taggers:
            hidden = tagger.model(input_ids, attention_mask, inputs_embeds, return_dict=True).last_hidden_state
            hidden = apply_dropout(hidden, tagger.dropout, tagger.training)
            logits = tagger.classifier(hidden).float()  # (B, T, num_labels)
            scores.append(logits if self.crf is not None else logits.log_softmax(-1))
        loss, logits = tagging_loss_and_scores(
            torch.stack(scores).mean(0), labels, attention_mask, self.crf, self.training, num_items_in_batch
        )
        return TokenClassifierOutput(loss=loss, logits=logits)


def ensemble_of(model, tokenizer, paths, **kwargs) -> TokenClassificationEnsemble:
    """A loaded tagger and more saved ones as one ensemble: what `--ensemble_with` of `tag` and `train-ner` builds.

    The members must share the tokenizer (its vocabulary, normalisation and special tokens), the architecture and the
    labels.

    Args:
        model: a loaded `VanillaTransformerForTokenClassification`, the first member; the others go to its device.
        tokenizer: `model`'s tokenizer, which the others' must equal.
        paths: the directories (or Hub ids) of the other saved taggers.
        **kwargs: for `from_pretrained` of their models (and `cache_dir`, `trust_remote_code` of their tokenizers).

    Returns:
        The `TokenClassificationEnsemble`, in eval mode.

    Raises:
        FileNotFoundError: no such directory.
        OSError: a damaged JSON file of a member, named.
        ValueError: a path that holds no tagger or an export, or members that disagree (named).

    Example:
        ```python
        from transformers import AutoTokenizer

        from vanilla_transformer.model.modeling_vanilla_transformer import VanillaTransformerForTokenClassification
        from vanilla_transformer.ner.ensemble import ensemble_of

        model = VanillaTransformerForTokenClassification.from_pretrained("outputs/conll/member1/averaged")
        tokenizer = AutoTokenizer.from_pretrained("outputs/conll/member1/averaged")
        ensemble = ensemble_of(model, tokenizer, ["outputs/conll/member2/averaged"])
        batch = tokenizer(["Anna Novak lives in Berlin ."], return_tensors="pt", return_token_type_ids=False)
        ensemble(**batch).logits.argmax(-1)  # (batch, length): tag ids, as `model.config.id2label` names them
        ```
    """
    return TokenClassificationEnsemble(
        ensemble_members(model, tokenizer, paths, AutoModelForTokenClassification, "tagger", task="tagging", **kwargs)
    )
