"""BPE-dropout (Provilkov et al., 2020) on the tokenized training pairs: each epoch every subword that a BPE merge
made is split back into the two subwords it was merged from with probability p, and each of those again with p,
down to characters. The model meets each word in several segmentations of the same text, which regularises a
translation model trained on a small corpus.

Deviation: Provilkov et al. skip each merge with probability p while a word is segmented; here merges of the finished
segmentation are undone. Both give finer segmentations of the same text; undoing works on the token ids the
tokenized-corpus cache already holds, in numpy, without the tokenizer. A pair's splits are drawn from (seed, epoch,
its token ids): the same run draws the same splits, whatever the order or the processes that read the pairs."""

import json
import zlib

import numpy as np


def merge_parts(tokenizer) -> np.ndarray:
    """(V, 2): the ids of the two subwords each token of a fast BPE tokenizer was merged from (its first merge in
    the tokenizer's list), -1 for tokens no merge made (characters, special and added tokens)."""
    model = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    if model["type"] != "BPE" or model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        raise ValueError(
            f"--bpe_dropout splits the merges of a BPE tokenizer without subword prefixes or suffixes; "
            f"this tokenizer's model is {model['type']} (continuing_subword_prefix "
            f"{model.get('continuing_subword_prefix')!r}, end_of_word_suffix "
            f"{model.get('end_of_word_suffix')!r})."
        )
    vocab = model["vocab"]
    parts = np.full((max(len(tokenizer), len(vocab)), 2), -1, dtype=np.int64)
    for merge in model["merges"]:
        left, right = merge if isinstance(merge, list) else merge.split(" ", 1)
        merged = vocab.get(left + right)
        if merged is not None and parts[merged, 0] < 0 and left in vocab and right in vocab:
            parts[merged] = vocab[left], vocab[right]
    return parts


def split_merges(ids: np.ndarray, parts: np.ndarray, p: float, rng: np.random.Generator) -> np.ndarray:
    """`ids` with each merged token split into its two parts with probability `p`, and each new part again, until no
    new part splits."""
    fresh = np.ones(len(ids), dtype=bool)  # (T,) tokens not yet drawn for
    while True:
        hit = fresh & (parts[ids, 0] >= 0) & (rng.random(len(ids)) < p)  # (T,)
        if not hit.any():
            return ids
        width = 1 + hit  # (T,) tokens each becomes
        first = np.cumsum(width) - width  # (T,) where each lands
        out = np.repeat(ids, width)
        out[first[hit]], out[first[hit] + 1] = parts[ids[hit], 0], parts[ids[hit], 1]
        fresh = np.zeros(len(out), dtype=bool)
        fresh[first[hit]] = fresh[first[hit] + 1] = True
        ids = out


class BpeDropout:
    """The transform of the training pairs (`datasets.Dataset.with_transform`): `split_merges` on each column of
    `max_lengths` (`input_ids`, `labels`), a sequence longer than its maximum after splitting kept whole. The
    Trainer gives it the epoch (`set_epoch`, through `EpochOfSampler`)."""

    def __init__(self, tokenizer, p: float, seed: int, max_lengths: dict):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"--bpe_dropout must lie between 0 and 1, got {p}.")
        self.parts, self.p, self.seed, self.max_lengths, self.epoch = merge_parts(tokenizer), p, seed, max_lengths, 0
        self.sides = {column: side for side, column in enumerate(max_lengths)}  # a pair's source and target draw apart

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __deepcopy__(self, memo):  # the Trainer's copies of the dataset share the transform, so the epoch reaches them
        return self

    def __call__(self, batch: dict) -> dict:
        return {
            column: [self.split(row, column) for row in rows] if column in self.max_lengths else rows
            for column, rows in batch.items()
        }

    def split(self, row, column: str) -> list[int]:
        ids = np.asarray(row, dtype=np.int64)
        rng = np.random.default_rng([self.seed, self.epoch, self.sides[column], zlib.crc32(ids.tobytes())])
        split = split_merges(ids, self.parts, self.p, rng)
        return (split if len(split) <= self.max_lengths[column] else ids).tolist()
