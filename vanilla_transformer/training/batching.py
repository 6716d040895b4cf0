"""Batches of a token budget (`--max_tokens`, `--eval_max_tokens`), packed rows of one shape (`--packing`) and
shuffled token-budget batches of a stream (`--streaming`)."""

import itertools
import logging
from dataclasses import dataclass

import numpy as np
import torch


def check_token_budget(data_args, training_args, logger=None, packs: bool = False) -> None:
    """The combinations of flags that --max_tokens (and --packing) rule out, or warn about; `packs`: the command
    can pack."""
    if data_args.max_tokens and str(training_args.train_sampling_strategy) == "group_by_length":
        raise ValueError(
            "--max_tokens batches examples of similar length itself: drop --train_sampling_strategy group_by_length."
        )
    if data_args.packing and not packs:
        raise ValueError(
            "--packing is offered by train-translation only (a tagger's CRF would chain the tags of "
            "the sentences packed into a row); drop --packing."
        )
    if data_args.packing and not data_args.max_tokens:
        raise ValueError(
            "--packing fills rows up to a token budget: give --max_tokens too (rows per batch = "
            "--max_tokens / --packing_length)."
        )
    if data_args.packing_length and not data_args.packing:
        raise ValueError("--packing_length sets the length of packed rows: give --packing true too.")
    if data_args.packing and data_args.packing_length and data_args.packing_length > data_args.max_tokens:
        raise ValueError(
            f"--packing_length {data_args.packing_length} is above --max_tokens {data_args.max_tokens}: "
            "a batch holds at least one row."
        )
    if data_args.max_tokens and training_args.torch_compile and not data_args.packing:
        (logger or logging.getLogger(__name__)).warning(
            "--torch_compile with --max_tokens: batch shapes change from step to step, which the compiler meets with "
            "dynamic shapes, slower than eager (docs/gpu.md). Add --packing true (one shape for every batch), or "
            "leave --torch_compile off."
        )


def padded_lengths(
    source_lengths,
    target_lengths,
    max_tokens: int,
    pad_to_multiple_of: int = 1,
    flag: str = "--max_tokens",
    split: str = "training",
):
    """Input and label lengths rounded up to the collator's multiple; an example longer than the budget is a
    ValueError naming the flag, the example and its length."""
    source = -(-np.asarray(source_lengths, dtype=np.int64) // pad_to_multiple_of) * pad_to_multiple_of
    target = -(-np.asarray(target_lengths, dtype=np.int64) // pad_to_multiple_of) * pad_to_multiple_of
    too_long = np.flatnonzero(np.maximum(source, target) > max_tokens)
    if too_long.size:
        i = int(too_long[0])
        raise ValueError(
            f"{flag} {max_tokens} is below {split} example {i}'s length ({source[i]} input, "
            f"{target[i]} label tokens after padding); {too_long.size} example(s) that long. Raise "
            f"{flag} or lower the maximum lengths (--max_source_length / --max_target_length, "
            "--max_seq_length)."
        )
    return source, target


class EpochBatches:
    """Batches made once (`batch(i)`, `__len__`: the subclass's), visited each epoch in a new order drawn from
    (seed, epoch) when shuffled (`set_epoch`, which the Trainer calls); the subclass sets seed, shuffle and epoch."""

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __iter__(self):
        order = (
            np.random.default_rng([self.seed, self.epoch]).permutation(len(self)) if self.shuffle else range(len(self))
        )
        for i in order:
            yield self.batch(i)


class TokenBudgetBatchSampler(EpochBatches):
    """Batches of whole examples holding at most `max_tokens` padded tokens on each side: batch size x longest source
    <= max_tokens, and the same for the targets (fairseq's --max-tokens), lengths counted after padding to a multiple
    of `pad_to_multiple_of`. Examples are sorted by length (ties in a seeded random order) and cut into batches once,
    so the batches, and their number, are the same every epoch; each epoch visits them in a new order drawn from
    (seed, epoch) (`set_epoch`, which the Trainer calls). Under several processes accelerate deals the batches out in
    turn, every process the same number."""

    def __init__(
        self,
        source_lengths,
        target_lengths,
        max_tokens: int,
        seed: int = 0,
        shuffle: bool = True,
        pad_to_multiple_of: int = 1,
    ):
        source, target = padded_lengths(source_lengths, target_lengths, max_tokens, pad_to_multiple_of)
        ties = np.random.default_rng([seed, 2**31]).random(len(source))
        self.order = np.lexsort((ties, target, source))  # by source length, then target length
        source, target = source[self.order], target[self.order]
        starts, window = [0], np.arange(1, max_tokens + 1)  # a batch holds at most max_tokens examples
        while starts[-1] < len(source):  # batch after batch: as many examples as fit, in this order
            first, end = starts[-1], starts[-1] + max_tokens
            widest = np.maximum(source[first:end], np.maximum.accumulate(target[first:end]))  # sources ascend
            fits = window[: len(widest)] * widest <= max_tokens  # (n examples) x (longest so far), which only grows
            starts.append(first + (int(np.argmin(fits)) if not fits.all() else len(fits)))
        self.starts = np.asarray(starts, dtype=np.int64)  # numpy, not lists: small also for 10M pairs
        self.seed, self.shuffle, self.epoch = seed, shuffle, 0

    def __len__(self) -> int:
        return len(self.starts) - 1

    def batch(self, i: int) -> list[int]:
        return self.order[self.starts[i] : self.starts[i + 1]].tolist()


def pack_rows(source_lengths, target_lengths, length: int, seed: int = 0, open_rows: int = 1024):
    """Examples packed into rows of `length` tokens on each side (first fit, longest pairs first, ties in a seeded
    random order): (members, starts), row r holding the examples members[starts[r]:starts[r + 1]]. At most
    `open_rows` rows take examples at a time (the fullest is closed when another opens), so packing stays linear in
    the corpus. An example longer than `length` on either side is a ValueError naming it."""
    source, target = padded_lengths(source_lengths, target_lengths, length, flag="--packing_length")
    ties = np.random.default_rng([seed, 2**30]).random(len(source))
    order = np.lexsort((ties, -(source + target)))  # longest pairs first
    free = np.zeros((open_rows, 2), dtype=np.int64)  # tokens still free in each open row: source, target
    slot_row = np.full(open_rows, -1, dtype=np.int64)  # the row each open slot holds, -1: none
    row_of = np.empty(len(source), dtype=np.int64)
    rows = 0
    for i in order:
        fits = np.flatnonzero((free[:, 0] >= source[i]) & (free[:, 1] >= target[i]))
        if fits.size:
            slot = fits[0]
        else:  # a new row, in an empty slot or the fullest open row's
            slot = int(np.argmin(free.sum(axis=1))) if (slot_row >= 0).all() else int(np.argmin(slot_row))
            slot_row[slot], free[slot] = rows, length
            rows += 1
        row_of[i] = slot_row[slot]
        free[slot] -= (source[i], target[i])
    members = np.argsort(row_of, kind="stable")
    starts = np.searchsorted(row_of[members], np.arange(rows + 1))
    return members, starts


def default_packing_length(longest: int, max_tokens: int, d_model: int) -> int:
    """Rows of d_model / 2 tokens, at most 256, at least the longest example (rounded up to a multiple of 8), at most
    the token budget. Longer rows leave less padding at their ends but spend more on attention between the pairs of a
    row (all of it masked): per token and layer about 4 x length x d_model multiply-adds against 12 x d_model^2 in
    the projections (the padding and speed at each length: docs/training.md for Multi30k, docs/gpu.md for WMT-like
    lengths)."""
    return max(-(-int(longest) // 8) * 8, min(max_tokens, d_model // 2, 256))


class PackedBatchSampler(EpochBatches):
    """Training batches of `rows` packed rows of `length` tokens (`pack_rows`), the same shape every step: the rows
    are packed once and dealt, in a seeded random order, into batches (the last one topped up with empty rows by
    the collator); each epoch visits the batches in a new order drawn from (seed, epoch), every example once. Yields
    (row in the batch, example) keys for `RowsOf`."""

    def __init__(self, source_lengths, target_lengths, length: int, rows: int, seed: int = 0, shuffle: bool = True):
        self.members, self.starts = pack_rows(source_lengths, target_lengths, length, seed)
        self.length, self.rows = length, rows
        self.row_order = np.random.default_rng([seed, 2**29]).permutation(len(self.starts) - 1)
        self.seed, self.shuffle, self.epoch = seed, shuffle, 0

    def __len__(self) -> int:
        return -(-(len(self.starts) - 1) // self.rows)

    def batch(self, i: int) -> list[tuple[int, int]]:
        keys = []
        for slot, row in enumerate(self.row_order[i * self.rows : (i + 1) * self.rows]):
            keys += [(slot, int(e)) for e in self.members[self.starts[row] : self.starts[row + 1]]]
        return keys


class RowsOf(torch.utils.data.Dataset):
    """A dataset read by (row, index) keys (`PackedBatchSampler`): example `index`, with the packed row it goes to."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitems__(self, keys):
        examples = self.dataset.__getitems__([index for _, index in keys])
        return [dict(example, row=row) for (row, _), example in zip(keys, examples)]

    def __getitem__(self, key):
        return self.__getitems__([key])[0]


@dataclass
class PackedSeq2SeqCollator:
    """Pairs -> packed rows of one shape (`rows` x `length` each side): `input_ids` holds the sources of a row one
    after another, `labels` their targets; `decoder_input_ids` each target shifted right behind its own start token;
    `attention_mask` / `decoder_attention_mask` number the pairs of a row 1, 2, ... (0: padding), which the model
    reads as segments (each pair attends to itself, positions restart). Examples carry their `row` (`RowsOf`)."""

    pad_token_id: int
    decoder_start_token_id: int
    rows: int
    length: int

    def __call__(self, features):
        shape = (self.rows, self.length)
        pad, empty = torch.full(shape, self.pad_token_id), torch.zeros(shape, dtype=torch.long)
        batch = {
            "input_ids": pad,
            "decoder_input_ids": pad.clone(),
            "labels": torch.full(shape, -100),
            "attention_mask": empty,
            "decoder_attention_mask": empty.clone(),
        }
        used = [[0, 0, 0] for _ in range(self.rows)]  # per row: pairs, source tokens, target tokens
        for feature in features:
            row = feature["row"]
            source, target = feature["input_ids"], feature["labels"]
            pair, s, t = used[row][0] + 1, used[row][1], used[row][2]
            if s + len(source) > self.length or t + len(target) > self.length:
                raise ValueError(
                    f"A pair of {len(source)} source and {len(target)} target tokens overflows packed row "
                    f"{row} (length {self.length})."
                )
            batch["input_ids"][row, s : s + len(source)] = torch.as_tensor(source)
            batch["attention_mask"][row, s : s + len(source)] = pair
            batch["labels"][row, t : t + len(target)] = torch.as_tensor(target)
            batch["decoder_input_ids"][row, t] = self.decoder_start_token_id
            batch["decoder_input_ids"][row, t + 1 : t + len(target)] = torch.as_tensor(target[:-1])
            batch["decoder_attention_mask"][row, t : t + len(target)] = pair
            used[row] = [pair, s + len(source), t + len(target)]
        return batch


class TokenBudgetStream(torch.utils.data.IterableDataset):
    """Token-budget batches (collated) from a stream of tokenized examples (`--streaming`), repeated without end (the
    Trainer stops at --max_steps). The stream is read `buffer` examples at a time; each buffer is cut into batches as
    `TokenBudgetBatchSampler` cuts a whole corpus, in an order drawn from the seed and the buffer's number. Every
    process (and DataLoader worker) reads the whole stream and keeps every n-th batch, n the number of readers,
    leaving out the few batches a buffer has past a multiple of n: all readers take the same number of batches.
    Resuming reads the stream again from its start, skipping the batches already trained."""

    def __init__(
        self,
        examples,
        max_tokens: int,
        collate_fn,
        seed: int = 0,
        buffer: int = 100_000,
        pad_to_multiple_of: int = 1,
        rank: int = 0,
        processes: int = 1,
        packing_length: int | None = None,
    ):
        self.examples, self.max_tokens, self.collate_fn, self.seed = examples, max_tokens, collate_fn, seed
        self.buffer, self.pad_to_multiple_of, self.rank, self.processes = buffer, pad_to_multiple_of, rank, processes
        self.packing_length = packing_length  # packed rows of this length (PackedBatchSampler) instead

    def batches(self, chunk):
        lengths = [len(e["input_ids"]) for e in chunk], [len(e.get("labels", e["input_ids"])) for e in chunk]
        if self.packing_length:
            return PackedBatchSampler(
                *lengths, self.packing_length, self.max_tokens // self.packing_length, seed=self.seed
            )
        return TokenBudgetBatchSampler(
            *lengths, self.max_tokens, seed=self.seed, pad_to_multiple_of=self.pad_to_multiple_of
        )

    def buffers(self):
        """Lists of `buffer` examples (the last one shorter), the stream read again and again."""
        while True:
            stream, empty = iter(self.examples), True
            while chunk := list(itertools.islice(stream, self.buffer)):
                empty = False
                yield chunk
            if empty:
                raise ValueError("The training stream holds no examples.")

    def __iter__(self):
        worker = torch.utils.data.get_worker_info()
        workers, worker_id = (worker.num_workers, worker.id) if worker else (1, 0)
        readers, reader = self.processes * workers, self.rank * workers + worker_id
        for number, chunk in enumerate(self.buffers()):
            batches = self.batches(chunk)
            batches.set_epoch(number)
            kept = len(batches) // readers * readers
            for i, keys in enumerate(batches):
                if i < kept and i % readers == reader:
                    yield self.collate_fn(
                        [chunk[key] if isinstance(key, int) else dict(chunk[key[1]], row=key[0]) for key in keys]
                    )


class EvaluationBatches:
    """Evaluation batches by a token budget, in the dataset's order (sort it by length first for little padding).
    They come in rounds of `processes` batches of one size, dealt one to each process: the processes' outputs
    gather into one tensor per step, in the dataset's order. The last round is topped up with repeats of its last
    example; `real_examples` says how many of the gathered outputs to keep."""

    def __init__(
        self, source_lengths, target_lengths, max_tokens: int, processes: int = 1, pad_to_multiple_of: int = 1
    ):
        source, target = padded_lengths(
            source_lengths, target_lengths, max_tokens, pad_to_multiple_of, "--eval_max_tokens", "evaluation"
        )
        widest, n = np.maximum(source, target), len(source)
        self.real_examples, self.batches, first = n, [], 0
        while first < n:
            longest = np.maximum.accumulate(widest[first : first + max_tokens * processes])
            sizes = np.arange(1, -(-len(longest) // processes) + 1)  # examples per process
            fits = sizes * longest[np.minimum(sizes * processes, len(longest)) - 1] <= max_tokens
            size = int(np.argmin(fits)) if not fits.all() else len(fits)  # the round's longest x size fits
            size = min(size, -(-(n - first) // processes))
            take = min(size * processes, n - first)
            rows = list(range(first, first + take)) + [first + take - 1] * (size * processes - take)
            self.batches += [rows[p * size : (p + 1) * size] for p in range(processes)]
            first += take

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        return iter(self.batches)


def sequence_lengths(dataset, column: str):
    """The length of every row's `column` (a list column of a `datasets.Dataset`), read through Arrow."""
    import pyarrow.compute as pc

    return np.asarray(pc.list_value_length(dataset.with_format("arrow")[:][column]))
