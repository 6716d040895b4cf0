"""What named-entity recognition adds to the encoder of the Transformer (Vaswani et al., 2017): the tagging head's
projection and losses (cross-entropy, the CRF's likelihood, auxiliary tasks), and, none of it in the paper and all of
it off by default, character features of every word (`config.char_cnn_dim`), a linear-chain CRF over the tags
(`config.use_crf`) and auxiliary taggers (`config.auxiliary_num_labels`). The model file imports this file relatively,
so `save_pretrained` copies it beside the weights with the model's code (`trust_remote_code`).
"""

import torch
import torch.nn.functional as F
from torch import nn

from .configuration_vanilla_transformer import VanillaTransformerConfig
from .kernels_vanilla_transformer import item_count, may_read_values, token_loss

WORD_START = "\u2581"  # the "▁" our Metaspace tokenizers put before each word


class VanillaTransformerCharacterFeatures(nn.Module):
    """Deviation, off by default (`char_cnn_dim=0`): character-level word features added to the encoder's token
    embeddings, as in the from-scratch taggers of Ma & Hovy (2016) and Lample et al. (2016). Sub-word embeddings of rare
    or unseen words are barely trained; their spelling (capitals, digits, suffixes) still says a lot.

    The characters of every vocabulary entry live in the buffer `token_chars` (vocab_size, MAX_CHARS) of byte codes,
    filled from the tokenizer by `set_token_characters` and saved with the weights, so the model still takes only
    `input_ids`. A CNN (width 3) over each sub-token's characters, max-pooled over characters, then max-pooled over
    the sub-tokens of one word (a word starts at a "▁"-marked or special token) gives every sub-token its whole word's
    features, projected to d_model. Encoder only: in the decoder, pooling over a word would look ahead.
    """

    MAX_CHARS, CHAR_DIM, NUM_CODES = 16, 32, 256  # code 0 = no character, 1 = word start, 255 = any non-Latin-1

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__()
        self.register_buffer("token_chars", torch.zeros(config.vocab_size, self.MAX_CHARS, dtype=torch.uint8))
        self.embed_chars = nn.Embedding(self.NUM_CODES, self.CHAR_DIM, padding_idx=0)
        self.conv = nn.Conv1d(self.CHAR_DIM, config.char_cnn_dim, kernel_size=3, padding=1)
        self.proj = nn.Linear(config.char_cnn_dim, config.d_model)

    @classmethod
    def encode(cls, token: str, special: bool) -> list[int]:
        """A vocabulary entry as character codes: a word-start code for "▁" or a special token, then its characters
        (Latin-1 code points; others share code 255), cut at MAX_CHARS."""
        starts = special or token.startswith(WORD_START)
        text = token[1:] if token.startswith(WORD_START) else token
        codes = [1] * starts + [ord(c) if 1 < ord(c) < cls.NUM_CODES - 1 else cls.NUM_CODES - 1 for c in text]
        return codes[: cls.MAX_CHARS]

    @torch.no_grad()
    def set_token_characters(self, tokens: list[str], special_ids) -> None:
        """Fill the table from the vocabulary (`tokens[i]` is the string of id i)."""
        if len(tokens) > self.token_chars.shape[0]:
            raise ValueError(
                f"The vocabulary has {len(tokens)} tokens but the model's vocab_size is {self.token_chars.shape[0]}."
            )
        table = torch.zeros_like(self.token_chars)
        for i, token in enumerate(tokens):
            codes = self.encode(token, i in special_ids)
            table[i, : len(codes)] = torch.tensor(codes, dtype=table.dtype)
        self.token_chars.copy_(table)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():  # traced or exported: every token, no data-dependent shape or check
            ids = input_ids.flatten()
            inverse = torch.arange(ids.shape[0], device=ids.device).view(input_ids.shape)
        else:
            ids, inverse = input_ids.unique(return_inverse=True)  # each distinct token once; sorted
            if ids[-1] >= self.token_chars.shape[0]:
                raise ValueError(
                    f"Token id {ids[-1].item()} has no row in the character table of "
                    f"{self.token_chars.shape[0]} tokens; call model.set_token_characters(tokenizer)."
                )
            empty = (self.token_chars[ids] == 0).all(1)  # (uint8: `any` would not give bools)
            if empty.any():
                raise ValueError(
                    f"Token ids {ids[empty][:5].tolist()} have no characters in the table (char_cnn_dim "
                    "> 0 needs it): call model.set_token_characters(tokenizer) before training or "
                    "inference."
                )
        return self.pool_words(self.token_features(ids)[inverse], input_ids)

    def token_features(self, ids: torch.Tensor) -> torch.Tensor:
        """(U,) token ids -> (U, F): the CNN over each token's characters, max-pooled over them (all >= 0). A function
        of the token id alone: an export computes it once for the whole vocabulary (`deploy/onnx.py`)."""
        chars = self.token_chars[ids].long()  # (U, C)
        per_char = F.relu(self.conv(self.embed_chars(chars).transpose(1, 2)))  # (U, F, C)
        return per_char.masked_fill((chars == 0).unsqueeze(1), 0).amax(-1)

    def pool_words(self, per_token: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, T, F) token features -> (B, T, D): each sub-token gets its whole word's features (max over the word's
        sub-tokens), projected to d_model."""
        word = (self.token_chars[input_ids, 0] == 1).cumsum(1)  # (B, T) word index in the row (0: before any start)
        word = word.unsqueeze(-1).expand_as(per_token)
        per_word = per_token.new_zeros(word.shape[0], word.shape[1] + 1, per_token.shape[-1])  # (B, T + 1, F)
        per_word = per_word.scatter_reduce(1, word, per_token, "amax")
        return self.proj(per_word.gather(1, word))  # (B, T, D)


def iob2_penalties(id2label: dict | None, num_labels: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(start (L,), transitions (L, L) [from, to]): -1e4 where IOB2 forbids a tag - I-X first, or after anything but
    B-X / I-X - and 0 elsewhere; all 0 unless every label is "O", "B-X" or "I-X"."""
    start, transitions = torch.zeros(num_labels), torch.zeros(num_labels, num_labels)
    labels = [str((id2label or {}).get(i, "")) for i in range(num_labels)]
    if not all(label == "O" or label[:2] in ("B-", "I-") for label in labels):
        return start, transitions
    for to, label in enumerate(labels):
        if label.startswith("I-"):
            start[to] = -1e4
            for before, previous in enumerate(labels):
                if previous not in ("B-" + label[2:], label):
                    transitions[before, to] = -1e4
    return start, transitions


class VanillaTransformerCRF(nn.Module):
    """A linear-chain conditional random field over the tag sequence (Lafferty et al., 2001), an option of the
    token-classification head (`config.use_crf`; not part of the paper). Scores a tag path as the sum of its
    per-token emission scores plus learned start, transition and end scores.

    Positions whose label is -100 (special tokens, non-first sub-tokens) stay in the chain with their tag
    marginalised out, so the loss is -log P(labelled tags | x) of a partially labelled sequence; padding
    (`mask` 0, on either side) is skipped. Decoding returns max-marginals: for each position and tag, the score of the
    best whole path through that tag, so `argmax(-1)` gives exactly the Viterbi path to every consumer of `logits`.
    When the labels are IOB2 tags (`config.id2label`: "O", "B-X", "I-X"), decoding keeps to paths IOB2 allows (an
    I-X only after B-X or I-X), so no prediction holds an entity that starts with I-; training is unconstrained.

    A tagger with `use_crf=True` holds it as `model.crf` and uses it itself: in training mode its `logits` are the
    emission scores (batch, length, num_labels) and its loss the CRF's; in eval mode its `logits` are the
    max-marginals, of the same shape, so `logits.argmax(-1)` decodes. Its parameters are `start_transitions` and
    `end_transitions` (num_labels,) and `transitions` (num_labels, num_labels), indexed [from, to], all zero at first.

    Args:
        config: the model's config; `num_labels` sets the tag count and `id2label` the IOB2 constraints.

    Example:
        ```python
        from transformers import AutoTokenizer

        from vanilla_transformer.model.modeling_vanilla_transformer import VanillaTransformerForTokenClassification

        model = VanillaTransformerForTokenClassification.from_pretrained("outputs/conll").eval()  # use_crf=True
        tokenizer = AutoTokenizer.from_pretrained("outputs/conll")
        batch = tokenizer(["Anna Novak lives in Berlin ."], return_tensors="pt", return_token_type_ids=False)
        tags = model(**batch).logits.argmax(-1)  # (batch, length): the Viterbi path's tag id of each piece
        [model.config.id2label[i] for i in tags[0].tolist()]
        ```
    """

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__()
        self.start_transitions = nn.Parameter(torch.zeros(config.num_labels))
        self.end_transitions = nn.Parameter(torch.zeros(config.num_labels))
        self.transitions = nn.Parameter(torch.zeros(config.num_labels, config.num_labels))  # [from, to]
        start_penalty, transition_penalty = iob2_penalties(config.id2label, config.num_labels)
        self.register_buffer("start_penalty", start_penalty, persistent=False)
        self.register_buffer("transition_penalty", transition_penalty, persistent=False)

    def _forward_scores(self, emissions, mask, reduce, start, transitions):
        """Left-to-right recursion; `reduce` is logsumexp (partition function) or max (Viterbi). Returns the score per
        position and tag (B, T, L) and the final score per sequence (B,)."""
        first = mask & (mask.cumsum(1) == 1)  # the first real token of each row
        carry = emissions.new_zeros(emissions.shape[0], emissions.shape[2])  # (B, L)
        scores = []
        for t in range(emissions.shape[1]):
            step = reduce(carry.unsqueeze(2) + transitions, 1) + emissions[:, t]  # (B, L)
            step = torch.where(first[:, t, None], start + emissions[:, t], step)
            carry = torch.where(mask[:, t, None], step, carry)
            scores.append(carry)
        return torch.stack(scores, 1), reduce(carry + self.end_transitions, 1)

    def neg_log_likelihood(self, emissions, labels, mask):
        """The CRF's training loss: the sum over the batch of -log P(tags | x), -100 labels marginalised.

        Args:
            emissions: (batch, length, num_labels) per-token scores, float.
            labels: (batch, length) tag ids, -100 where a position has no label.
            mask: (batch, length) bool, False at padding.

        Returns:
            A scalar tensor (the tagger divides it by its labelled token count).
        """
        allowed = (labels == -100).unsqueeze(-1) | F.one_hot(labels.clamp(min=0), emissions.shape[-1]).bool()
        constrained = emissions.masked_fill(~allowed, -1e4)
        # one pass over both: all paths (log Z) and the paths that agree with the labels
        _, both = self._forward_scores(
            torch.cat([emissions, constrained]),
            mask.repeat(2, 1),
            torch.logsumexp,
            self.start_transitions,
            self.transitions,
        )
        log_z, gold = both.chunk(2)
        return (log_z - gold).sum()  # a row without real tokens scores log Z = gold: it adds 0

    def max_marginals(self, emissions, mask):
        """The decoding: for each position and tag, the score of the best whole path through that tag.

        Args:
            emissions: (batch, length, num_labels) per-token scores, float.
            mask: (batch, length) bool, False at padding.

        Returns:
            (batch, length, num_labels) max-marginals (forward max + backward max); their `argmax(-1)` is the Viterbi
            path, kept to the paths IOB2 allows when the labels are IOB2 tags.
        """
        transitions = self.transitions + self.transition_penalty
        alpha, _ = self._forward_scores(
            emissions, mask, torch.amax, self.start_transitions + self.start_penalty, transitions
        )
        carry = self.end_transitions.expand(emissions.shape[0], -1)  # best continuation after the last real token
        beta = []
        for t in reversed(range(emissions.shape[1])):
            beta.append(carry)
            step = (transitions + (emissions[:, t] + carry).unsqueeze(1)).max(2).values  # (B, L) from-tag view
            carry = torch.where(mask[:, t, None], step, carry)
        return alpha + torch.stack(beta[::-1], 1)


# ----------------------------------------------------------------------------------------------------------------------
# The tagging head and its losses


class VanillaTransformerClassifier(nn.Linear):
    """A tagging head's projection to its labels, drawn N(0, init_std) (the projections inside the model are
    Xavier-uniform)."""


def check_label_ids(ids: torch.Tensor, num_labels: int, name: str) -> None:
    """Raise a ValueError naming the first id of `ids` that is neither -100 nor in [0, num_labels). Not while training
    on a GPU (a host sync per step; the labels come from the label list the config was built from)."""
    if not may_read_values(ids):
        return
    invalid = (ids != -100) & ((ids < 0) | (ids >= num_labels))
    if invalid.any():
        raise ValueError(f"{name} contain {ids[invalid][0].item()}, outside [0, {num_labels}) and not -100.")


def tagging_loss_and_scores(logits, labels, attention_mask, crf, training: bool, num_items_in_batch=None):
    """The token-classification head's (loss, logits) from its per-token scores `logits` (B, T, L): cross-entropy, or
    with a `crf` its sequence likelihood, and in eval mode its max-marginals as `logits` (argmax = the Viterbi path)."""
    if labels is not None:
        if labels.shape != logits.shape[:-1]:
            raise ValueError(
                f"labels have shape {tuple(labels.shape)} but the logits have shape {tuple(logits.shape[:-1])}."
            )
        check_label_ids(labels, logits.shape[-1], "labels")
    loss = None
    if crf is None:
        if labels is not None:
            loss = token_loss(logits, labels, num_items_in_batch)
        return loss, logits
    emissions = logits.float()
    mask = (
        torch.ones(logits.shape[:2], dtype=torch.bool, device=logits.device)
        if attention_mask is None
        else attention_mask.bool()
    )
    if labels is not None:
        nll = crf.neg_log_likelihood(emissions, labels, mask)
        loss = nll / item_count(labels, num_items_in_batch, nll.device)
    if not training:  # (training returns the emission scores: the loss does not need decoding)
        with torch.no_grad():
            logits = crf.max_marginals(emissions, mask)  # argmax(-1) = the Viterbi path
    return loss, logits


def auxiliary_loss(heads, hidden, targets, labels, num_items_in_batch, weight: float, loss):
    """`loss` plus `weight` times each auxiliary head's token cross-entropy on its column of `targets` (batch, length,
    tasks), each divided by the main loss's token count (multi-task learning, not in the paper)."""
    tasks = len(heads)
    if not tasks:
        raise ValueError(
            "auxiliary_targets were given but the model has no auxiliary heads (config.auxiliary_num_labels is None)."
        )
    if targets.shape != (*hidden.shape[:2], tasks):
        raise ValueError(
            f"auxiliary_targets have shape {tuple(targets.shape)}; expected "
            f"{(*hidden.shape[:2], tasks)} (batch, length, auxiliary tasks)."
        )
    if num_items_in_batch is None and labels is not None:
        num_items_in_batch = item_count(labels)
    for k, head in enumerate(heads):
        target = targets[..., k]
        check_label_ids(target, head.out_features, f"auxiliary_targets[..., {k}]")
        aux = weight * token_loss(head(hidden), target, num_items_in_batch)
        loss = aux if loss is None else loss + aux
    return loss
