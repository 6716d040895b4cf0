"""`train-translation --streaming`: parallel text files read, tokenized and batched by a token budget as they are
trained on, nothing cached; every example once per pass through the stream, an equal share of batches per process,
a resumed run that ends where the uninterrupted one did, and clear errors for what a stream cannot do."""

import itertools
import json
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from vanilla_transformer.commands import train_translation
from vanilla_transformer.data import DataError
from vanilla_transformer.training.batching import TokenBudgetBatchSampler, TokenBudgetStream


@pytest.fixture
def examples():
    g = np.random.default_rng(0)
    return [
        {"input_ids": [5] * int(s), "labels": [6] * int(t), "id": i}
        for i, (s, t) in enumerate(zip(g.integers(1, 60, 1000), g.integers(1, 70, 1000)))
    ]


def ids(rows):
    return [row["id"] for row in rows]


def test_stream_batches_stay_within_the_budget_and_give_each_example_once_a_pass(examples):
    stream = iter(TokenBudgetStream(examples, max_tokens=400, collate_fn=ids, seed=1, buffer=300))
    batches = []
    while sum(map(len, batches)) < 1000:
        batches.append(next(stream))
    for batch in batches:
        assert len(batch) * max(max(len(examples[i]["input_ids"]), len(examples[i]["labels"])) for i in batch) <= 400
    assert sorted(i for batch in batches for i in batch) == list(range(1000))
    assert set(batches[0]) < set(range(300))  # batches form within a buffer of the stream
    again = []
    while sum(map(len, again)) < 1000:  # the stream repeats, in another order
        again.append(next(stream))
    assert sorted(i for batch in again for i in batch) == list(range(1000)) and again != batches


@pytest.mark.parametrize("processes", [2, 3])
def test_every_process_reads_its_own_stream_batches_and_as_many(examples, processes):
    """Each process keeps every n-th batch of a buffer and leaves out the last few (fewer than n): in one pass all
    take the same number of batches, no example twice."""
    buffers = [examples[i : i + 300] for i in range(0, 1000, 300)]
    per_buffer = [
        len(TokenBudgetBatchSampler([len(e["input_ids"]) for e in b], [len(e["labels"]) for e in b], 300))
        for b in buffers
    ]
    streams = [
        TokenBudgetStream(examples, max_tokens=300, collate_fn=ids, seed=0, buffer=300, rank=rank, processes=processes)
        for rank in range(processes)
    ]
    shards = [list(itertools.islice(stream, sum(n // processes for n in per_buffer))) for stream in streams]
    seen = [i for shard in shards for batch in shard for i in batch]
    assert len(seen) == len(set(seen))  # one pass: no example twice
    left_out = set(range(1000)) - set(seen)
    assert len(left_out) <= sum(n % processes for n in per_buffer) * 300  # (a batch holds at most 300 examples)
    assert [len(shard) for shard in shards] == [sum(n // processes for n in per_buffer)] * processes


def test_an_empty_stream_is_an_error():
    with pytest.raises(ValueError, match="no examples"):
        next(iter(TokenBudgetStream([], max_tokens=100, collate_fn=ids)))


def write_corpus(prefix, lines=240, misaligned=False):
    g = np.random.default_rng(0)
    words = ["haus", "katze", "hund", "baum", "auto", "mann", "frau", "kind"]
    source = [" ".join(g.choice(words, g.integers(2, 9))) for _ in range(lines)]
    (prefix.parent / f"{prefix.name}.de").write_text("\n".join(source) + "\n", encoding="utf-8")
    target = [s.upper() for s in source][: lines - 1 if misaligned else lines]
    (prefix.parent / f"{prefix.name}.en").write_text("\n".join(target) + "\n", encoding="utf-8")


def flags(tmp_path, prefix, *extra):
    return [
        "--train_file",
        str(prefix),
        "--source_lang",
        "de",
        "--target_lang",
        "en",
        "--streaming",
        "--do_train",
        "--config_name",
        "tiny",
        "--vocab_size",
        "60",
        "--max_tokens",
        "192",
        "--max_steps",
        "6",
        "--save_strategy",
        "steps",
        "--save_steps",
        "4",
        "--logging_steps",
        "2",
        "--disable_tqdm",
        "true",
        "--bf16",
        "false",
        "--seed",
        "3",
        "--cache_dir",
        str(tmp_path / "cache"),
        "--report_to",
        "none",
        *extra,
    ]


@pytest.mark.parametrize("packing", [[], ["--packing", "true", "--packing_length", "64"]], ids=["budget", "packed"])
def test_streaming_run_caches_nothing_and_resumes_where_it_stopped(tmp_path, packing):
    prefix = tmp_path / "train"
    write_corpus(prefix)
    whole = tmp_path / "whole"
    metrics = train_translation.main(["--output_dir", str(whole), *flags(tmp_path, prefix, *packing)])
    assert json.loads((whole / "trainer_state.json").read_text())["global_step"] == 6
    assert metrics["train_tokens_per_second"] > 0 and "train_samples" not in metrics  # a stream has no length
    assert not list((tmp_path / "cache").rglob("*.arrow"))  # nothing read into a cache
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    shutil.copytree(whole / "checkpoint-4", resumed / "checkpoint-4")
    train_translation.main(
        ["--output_dir", str(resumed), *flags(tmp_path, prefix, *packing), "--resume_from_checkpoint", "true"]
    )
    a, b = load_file(str(whole / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=1e-5, atol=1e-6, msg=key)


@pytest.mark.parametrize(
    "change, message",
    [
        (["--max_tokens", "0"], "--max_tokens"),
        (["--max_steps", "-1"], "--max_steps"),
        (["--train_file", "pairs.tsv"], "parallel text files"),
        (["--max_tokens", "100"], "longest pair .*128 tokens"),
    ],
)
def test_streaming_needs_a_token_budget_steps_and_parallel_text(tmp_path, change, message):
    prefix = tmp_path / "train"
    write_corpus(prefix)
    args = flags(tmp_path, prefix)
    args[args.index(change[0]) + 1] = change[1]
    if change == ["--max_tokens", "0"]:
        del args[args.index("--max_tokens") : args.index("--max_tokens") + 2]
    with pytest.raises(ValueError, match=message):
        train_translation.main(["--output_dir", str(tmp_path / "out"), *args])


def test_misaligned_streamed_files_are_named(tmp_path):
    prefix = tmp_path / "train"
    write_corpus(prefix, misaligned=True)
    with pytest.raises(DataError, match=r"train\.en ends after line 239 but .*train\.de goes on"):
        train_translation.main(["--output_dir", str(tmp_path / "out"), *flags(tmp_path, prefix, "--max_steps", "40")])


def test_two_processes_stream_their_own_batches(tmp_path):
    """Under torchrun each process reads the stream and trains on its own batches: the run ends (no process waits
    for another) with the steps asked for, and the tokens counted over both processes are those of 2 x 6 batches."""
    import os
    import subprocess

    from conftest import ROOT, torchrun_two

    prefix = tmp_path / "train"
    write_corpus(prefix)
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            *torchrun_two(),
            os.path.join(ROOT, "scripts", "run_translation.py"),
            "--output_dir",
            str(out),
            *flags(tmp_path, prefix, "--save_strategy", "no"),
        ],
        env=dict(os.environ, OMP_NUM_THREADS="1"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 6
    one = train_translation.main(
        ["--output_dir", str(tmp_path / "one"), *flags(tmp_path, prefix, "--save_strategy", "no")]
    )
    two = json.loads((out / "train_results.json").read_text())
    assert (
        two["train_tokens_per_second"] * two["train_runtime"]
        > 1.5 * one["train_tokens_per_second"] * one["train_runtime"]
    )  # two batches a step (one per process)
