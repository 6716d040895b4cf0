"""Token-budget batches (`train-translation --max_tokens`): within the budget on both sides, every example once per
epoch, the same batches in a new order each epoch, an equal share per process, a clear error for an example that
cannot fit, and a resumed run that sees the batches the uninterrupted run saw."""

import json
import shutil

import numpy as np
import pytest
import torch
from accelerate.data_loader import BatchSamplerShard
from safetensors.torch import load_file

from vanilla_transformer import run_translation
from vanilla_transformer.training import TokenBudgetBatchSampler


@pytest.fixture
def lengths():
    g = np.random.default_rng(0)
    return g.integers(1, 60, 1000), g.integers(1, 70, 1000)


def test_batches_stay_within_the_budget_and_cover_every_example(lengths):
    source, target = lengths
    sampler = TokenBudgetBatchSampler(source, target, max_tokens=400, seed=1, pad_to_multiple_of=8)
    batches = list(sampler)
    for batch in batches:
        widest = max(-(-max(source[batch]) // 8) * 8, -(-max(target[batch]) // 8) * 8)
        assert len(batch) * widest <= 400
    assert sorted(i for batch in batches for i in batch) == list(range(1000))
    # sorted by length, then cut: far fewer padded tokens than random batches of the same count
    padded = sum(len(b) * max(source[b]) for b in batches)
    assert padded < 1.15 * source.sum()


def test_same_batches_new_order_each_epoch(lengths):
    source, target = lengths
    sampler = TokenBudgetBatchSampler(source, target, max_tokens=400, seed=1)
    first = list(sampler)
    sampler.set_epoch(1)
    second = list(sampler)
    assert len(sampler) == len(first) == len(second)
    assert sorted(map(tuple, first)) == sorted(map(tuple, second)) and first != second
    again = TokenBudgetBatchSampler(source, target, max_tokens=400, seed=1)
    again.set_epoch(1)
    assert list(again) == second  # (seed, epoch) decide the order: a resumed run replays it
    assert list(TokenBudgetBatchSampler(source, target, max_tokens=400, seed=2)) != first


@pytest.mark.parametrize("processes", [2, 3])
def test_every_process_gets_its_own_batches_and_as_many(lengths, processes):
    """accelerate deals the batches out in turn; no process runs out before the others (none waits forever)."""
    source, target = lengths
    sampler = TokenBudgetBatchSampler(source, target, max_tokens=300, seed=0)
    shards = [list(BatchSamplerShard(sampler, processes, rank)) for rank in range(processes)]
    assert len({len(shard) for shard in shards}) == 1
    seen = [i for shard in shards for batch in shard for i in batch]
    assert set(seen) == set(range(1000))
    assert len(seen) - 1000 < 300  # only the last round is topped up with a few repeated batches


def test_an_example_longer_than_the_budget_is_named():
    with pytest.raises(ValueError, match=r"--max_tokens 32 is below training example 2's length \(40 source"):
        TokenBudgetBatchSampler([5, 9, 40, 50], [5, 9, 3, 8], max_tokens=32, pad_to_multiple_of=8)


def test_max_tokens_with_group_by_length_is_refused(tmp_path):
    with pytest.raises(ValueError, match="drop --train_sampling_strategy group_by_length"):
        run_translation.main(["--output_dir", str(tmp_path), "--max_tokens", "256",
                              "--train_sampling_strategy", "group_by_length"])


FLAGS = ["--config_overrides", "d_model=32,encoder_ffn_dim=64,decoder_ffn_dim=64,encoder_layers=1,decoder_layers=1",
         "--max_tokens", "192", "--demo_train_examples", "120", "--demo_max_length", "12", "--learning_rate", "1e-3",
         "--do_train", "--do_eval", "false", "--do_predict", "false", "--save_strategy", "steps", "--save_steps", "17",
         "--max_steps", "30", "--logging_steps", "3", "--disable_tqdm", "true", "--bf16", "false", "--seed", "3"]


def test_resumed_run_sees_the_same_batches(tmp_path):
    """Stopped in the middle of a later epoch and resumed, a run ends with the uninterrupted run's weights (the
    epoch's batch order is drawn again from the seed and the epoch)."""
    whole = tmp_path / "whole"
    run_translation.main(["--output_dir", str(whole), *FLAGS])
    state = json.loads((whole / "checkpoint-17" / "trainer_state.json").read_text())
    assert state["epoch"] > 1 and state["epoch"] % 1  # in the middle of an epoch after the first
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    shutil.copytree(whole / "checkpoint-17", resumed / "checkpoint-17")
    run_translation.main(["--output_dir", str(resumed), *FLAGS, "--resume_from_checkpoint", "true"])
    a, b = load_file(str(whole / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=1e-5, atol=1e-6, msg=key)


def test_the_epoch_reaches_the_sampler_through_a_callback(lengths):
    """Also where accelerate's wrappers hide the sampler from the Trainer (resumed, several processes)."""
    from types import SimpleNamespace

    from vanilla_transformer.training import EpochOfSampler

    sampler = TokenBudgetBatchSampler(*lengths, max_tokens=400)
    for done, epoch in ((0.0, 0), (2.43, 2), (2.9999999, 3), (3.0, 3)):  # float sums of whole epochs round
        EpochOfSampler(sampler).on_epoch_begin(None, SimpleNamespace(epoch=done), None)
        assert sampler.epoch == epoch
