"""BPE-dropout on the tokenized training pairs (training/bpe_dropout.py, train-translation --bpe_dropout)."""

import copy
from types import SimpleNamespace

import numpy as np
import pytest
from datasets import Dataset

from conftest import translation_args, write_parallel
from vanilla_transformer.commands import train_translation
from vanilla_transformer.tokenization import train_tokenizer
from vanilla_transformer.training.bpe_dropout import BpeDropout, merge_parts, split_merges
from vanilla_transformer.training.trainers import EpochOfSampler

TEXTS = [
    "Ein Mann fährt mit dem Fahrrad durch die Stadt.",
    "Zwei Hunde spielen im Schnee.",
    "A man rides his bicycle through the city.",
    "Two dogs are playing in the snow.",
    "Eine Frau in einem roten Mantel wartet an der Haltestelle.",
    "A woman in a red coat waits at the stop.",
]


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(TEXTS * 3, vocab_size=200)


def test_each_merged_token_is_its_two_parts(tokenizer):
    parts = merge_parts(tokenizer)
    tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    merged = np.flatnonzero(parts[:, 0] >= 0)
    assert len(merged) > 50
    for i in merged:
        assert tokens[parts[i, 0]] + tokens[parts[i, 1]] == tokens[i]
    assert (parts[tokenizer.all_special_ids] < 0).all()


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 1.0])
def test_splits_keep_the_text(tokenizer, p):
    parts, rng = merge_parts(tokenizer), np.random.default_rng(0)
    lengths = []
    for text in TEXTS:
        ids = np.array(tokenizer(text)["input_ids"])
        split = split_merges(ids, parts, p, rng)
        assert tokenizer.decode(split, skip_special_tokens=True) == tokenizer.decode(ids, skip_special_tokens=True)
        assert split[-1] == tokenizer.eos_token_id
        lengths.append((len(ids), len(split)))
        if p == 1.0:  # every merge undone: characters
            assert (parts[split, 0] < 0).all()
    assert all(s == i for i, s in lengths) if p == 0.0 else sum(s for _, s in lengths) > sum(i for i, _ in lengths)


def test_a_merged_token_splits_with_the_given_probability(tokenizer):
    parts = merge_parts(tokenizer)
    merged = np.flatnonzero((parts[:, 0] >= 0) & (parts[parts[:, 0], 0] < 0) & (parts[parts[:, 1], 0] < 0))[0]
    for p in (0.1, 0.4):  # a token merged from two characters: one draw each
        split = split_merges(np.full(20_000, merged), parts, p, np.random.default_rng(1))
        assert (len(split) - 20_000) / 20_000 == pytest.approx(p, abs=0.02)


def test_the_transform_draws_anew_each_epoch_also_in_the_trainers_copies(tokenizer):
    encoded = [tokenizer(t)["input_ids"] for t in TEXTS]
    dropout = BpeDropout(tokenizer, 0.3, seed=1, max_lengths={"input_ids": 128, "labels": 128})
    train = Dataset.from_dict({"input_ids": encoded, "labels": encoded[::-1]}).with_transform(dropout)
    first = train[:]
    assert train[:] == first and first["input_ids"] != encoded  # the same draw for the same epoch
    assert first["labels"][::-1] != first["input_ids"]  # source and target draw apart
    EpochOfSampler(dropout).on_epoch_begin(None, SimpleNamespace(epoch=1.0), None)
    second = train[:]
    assert second != first and copy.deepcopy(train)[:] == second  # the Trainer's copies see the epoch
    assert tokenizer.batch_decode(second["input_ids"]) == tokenizer.batch_decode(encoded)
    assert (
        BpeDropout(tokenizer, 0.3, seed=2, max_lengths={"input_ids": 128}).split(encoded[0], "input_ids")
        != first["input_ids"][0]
    )  # another seed, other splits


def test_a_sequence_split_past_its_maximum_is_kept_whole(tokenizer):
    ids = tokenizer(TEXTS[0])["input_ids"]
    assert BpeDropout(tokenizer, 1.0, 0, {"input_ids": len(ids)}).split(ids, "input_ids") == ids
    assert len(BpeDropout(tokenizer, 1.0, 0, {"input_ids": 128}).split(ids, "input_ids")) > len(ids)


@pytest.mark.parametrize("batches", [["--max_tokens", "64"], []], ids=["budget", "sentences"])
def test_training_meets_the_split_pairs(tmp_path, batches):
    data = write_parallel(tmp_path)

    def tokens_trained(name, *extra):
        metrics = train_translation.main(
            translation_args(data, tmp_path / name, "--max_steps", "-1", "--num_train_epochs", "2", *batches, *extra)
        )
        return metrics["train_tokens_per_second"] * metrics["train_runtime"]

    assert tokens_trained("dropped", "--bpe_dropout", "0.5") > 1.05 * tokens_trained("plain")


@pytest.mark.parametrize(
    "extra, problem",
    [
        (["--bpe_dropout", "1.5"], "between 0 and 1"),
        (["--bpe_dropout", "0.1", "--max_tokens", "64", "--packing", "true"], "--packing"),
    ],
)
def test_bpe_dropout_flags_are_checked(tmp_path, extra, problem):
    with pytest.raises(ValueError, match=problem):
        train_translation.main(translation_args(write_parallel(tmp_path), tmp_path / "out", *extra))
