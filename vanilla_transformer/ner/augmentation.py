"""Training-time data augmentation for the tagger."""

import random

from datasets import Dataset

from .mentions import mention_spans, mention_tags


class MentionReplacement:
    """Training-time augmentation: mention replacement (Dai & Adel, 2020). At every access, each entity mention of
    the sentence (between its `first` and `last` word, see `with_document_context`) is replaced with probability
    `prob` by a mention of the same type drawn from the dataset itself, and the result is encoded by
    `encode(words, tags, first, last)`. The model meets names in new contexts, so it must learn from the context and
    the spelling rather than memorise names: unseen names are the largest error class of a from-scratch tagger."""

    def __init__(self, dataset: Dataset, encode, prob: float, seed: int = 0):
        if not isinstance(prob, (int, float)) or isinstance(prob, bool) or not 0.0 <= prob <= 1.0:
            raise ValueError(f"The mention replacement probability must be in [0, 1], got {prob!r}.")
        self.rows, self.encode, self.prob, self.rng = dataset, encode, prob, random.Random(seed)
        self.pool = {}  # type -> [(words, their auxiliary tags or None)]
        for row in dataset:
            tokens, first, aux = row["tokens"], row.get("first", 0), row.get("auxiliary_tags")
            for start, end, kind in mention_spans(row["ner_tags"][first : row.get("last", len(tokens))]):
                span = slice(first + start, first + end)
                self.pool.setdefault(kind, []).append((tokens[span], aux[span] if aux else None))

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict:
        """`encode(words, tags, first, last, auxiliary_tags)`: a replaced mention brings its own auxiliary tags."""
        row = self.rows[index]
        words, tags, aux = row["tokens"], row["ner_tags"], row.get("auxiliary_tags")
        first, last = row.get("first", 0), row.get("last", len(words))
        out_words, out_tags, done = list(words[:first]), list(tags[:first]), first
        out_aux = list(aux[:first]) if aux else None
        for start, end, kind in mention_spans(tags[first:last]):
            start, end = start + first, end + first
            out_words += words[done:start]
            out_tags += tags[done:start]
            mention = (words[start:end], aux[start:end] if aux else None)
            if self.rng.random() < self.prob:
                mention = self.rng.choice(self.pool[kind])
            out_words += mention[0]
            out_tags += mention_tags(kind, len(mention[0]))
            if aux:
                out_aux += aux[done:start] + mention[1]
            done = end
        out_words += words[done:last]
        out_tags += tags[done:last]
        new_last = len(out_words)
        if aux:
            out_aux += aux[done:]
        return self.encode(out_words + list(words[last:]), out_tags + list(tags[last:]), first, new_last, out_aux)
