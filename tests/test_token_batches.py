"""Token-budget batches (`train-translation --max_tokens`): within the budget on both sides, every example once per
epoch, the same batches in a new order each epoch, an equal share per process, a clear error for an example that
cannot fit, and a resumed run that sees the batches the uninterrupted run saw."""

import json
import os
import shutil

import numpy as np
import pytest
import torch
from accelerate.data_loader import BatchSamplerShard
from safetensors.torch import load_file
from transformers import AutoTokenizer

from conftest import ROOT, torchrun_two
from vanilla_transformer.commands import train_translation
from vanilla_transformer.training.batching import EvaluationBatches, TokenBudgetBatchSampler


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
    with pytest.raises(ValueError, match=r"--max_tokens 32 is below training example 2's length \(40 input"):
        TokenBudgetBatchSampler([5, 9, 40, 50], [5, 9, 3, 8], max_tokens=32, pad_to_multiple_of=8)


@pytest.mark.parametrize("processes", [1, 2, 3])
def test_evaluation_batches_keep_the_order_and_gather_back_into_it(lengths, processes):
    """Evaluation batches by a token budget: within the budget, the dataset's order, and rounds of one batch size per
    process, so that gathering each step's batches from all processes returns the examples in order, the repeats
    that top up the last round at the very end."""
    source, target = lengths
    order = np.argsort(-source, kind="stable")  # as the translation command sorts its evaluation data
    batches = EvaluationBatches(source[order], target[order], max_tokens=300, processes=processes, pad_to_multiple_of=8)
    for batch in batches:
        assert len(batch) * max(-(-max(source[order][batch]) // 8) * 8, -(-max(target[order][batch]) // 8) * 8) <= 300
    shards = [list(BatchSamplerShard(batches, processes, rank)) for rank in range(processes)]
    assert len({len(shard) for shard in shards}) == 1
    gathered = [i for step in zip(*shards) for batch in step for i in batch]
    for step in zip(*shards):
        assert len({len(batch) for batch in step}) == 1  # one tensor shape per step on every process
    assert batches.real_examples == 1000 and gathered[:1000] == list(range(1000))
    assert set(gathered[1000:]) <= {999} and len(gathered) - 1000 < processes * max(map(len, batches))
    if processes == 1:
        assert len(gathered) == 1000


def test_an_evaluation_example_longer_than_the_budget_is_named():
    with pytest.raises(
        ValueError, match=r"--eval_max_tokens 16 is below evaluation example 1's length \(8 input, 24 label"
    ):
        EvaluationBatches([5, 8, 3], [5, 20, 3], max_tokens=16, pad_to_multiple_of=8)


def test_max_tokens_with_group_by_length_is_refused(tmp_path):
    with pytest.raises(ValueError, match="drop --train_sampling_strategy group_by_length"):
        train_translation.main(
            ["--output_dir", str(tmp_path), "--max_tokens", "256", "--train_sampling_strategy", "group_by_length"]
        )


FLAGS = [
    "--config_overrides",
    "d_model=32,encoder_ffn_dim=64,decoder_ffn_dim=64,encoder_layers=1,decoder_layers=1",
    "--max_tokens",
    "192",
    "--demo_train_examples",
    "120",
    "--demo_max_length",
    "12",
    "--learning_rate",
    "1e-3",
    "--do_train",
    "--do_eval",
    "false",
    "--do_predict",
    "false",
    "--save_strategy",
    "steps",
    "--save_steps",
    "17",
    "--max_steps",
    "30",
    "--logging_steps",
    "3",
    "--disable_tqdm",
    "true",
    "--bf16",
    "false",
    "--seed",
    "3",
]


@pytest.mark.parametrize("packing", [[], ["--packing", "true"]], ids=["budget", "packed"])
def test_resumed_run_sees_the_same_batches(tmp_path, packing):
    """Stopped in the middle of a later epoch and resumed, a run ends with the uninterrupted run's weights (the
    epoch's batch order is drawn again from the seed and the epoch), with token budgets and with packed rows."""
    whole = tmp_path / "whole"
    train_translation.main(["--output_dir", str(whole), *FLAGS, *packing])
    state = json.loads((whole / "checkpoint-17" / "trainer_state.json").read_text())
    assert state["epoch"] > 1 and state["epoch"] % 1  # in the middle of an epoch after the first
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    shutil.copytree(whole / "checkpoint-17", resumed / "checkpoint-17")
    train_translation.main(["--output_dir", str(resumed), *FLAGS, *packing, "--resume_from_checkpoint", "true"])
    a, b = load_file(str(whole / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=1e-5, atol=1e-6, msg=key)


def test_resumed_run_sees_the_same_batches_under_two_processes(tmp_path):
    """The same under torchrun with 2 processes, where accelerate wraps the sampler twice on a resumed run (the epoch
    reaches it through EpochOfSampler)."""
    import os
    import subprocess

    script = os.path.join(ROOT, "scripts", "run_translation.py")

    def run(out, *extra):
        proc = subprocess.run(
            [*torchrun_two(), script, "--output_dir", str(out), *FLAGS, "--dataloader_num_workers", "0", *extra],
            env=dict(os.environ, OMP_NUM_THREADS="1"),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]

    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    run(whole)
    state = json.loads((whole / "checkpoint-17" / "trainer_state.json").read_text())
    assert state["epoch"] > 1 and state["epoch"] % 1  # (2 processes: half the batches per epoch each)
    resumed.mkdir()
    shutil.copytree(whole / "checkpoint-17", resumed / "checkpoint-17")
    run(resumed, "--resume_from_checkpoint", "true")
    a, b = load_file(str(whole / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=1e-5, atol=1e-6, msg=key)


def test_the_epoch_reaches_the_sampler_through_a_callback(lengths):
    """Also where accelerate's wrappers hide the sampler from the Trainer (resumed, several processes)."""
    from types import SimpleNamespace

    from vanilla_transformer.training.trainers import EpochOfSampler

    sampler = TokenBudgetBatchSampler(*lengths, max_tokens=400)
    for done, epoch in ((0.0, 0), (2.43, 2), (2.9999999, 3), (3.0, 3)):  # float sums of whole epochs round
        EpochOfSampler(sampler).on_epoch_begin(None, SimpleNamespace(epoch=done), None)
        assert sampler.epoch == epoch


def test_tokens_trained_are_counted_without_padding(tmp_path):
    """train_tokens_per_second counts every real source and target token once per epoch, no padding."""
    flags = [f for f in FLAGS if f not in ("--max_steps", "30")]
    metrics = train_translation.main(
        ["--output_dir", str(tmp_path), *flags, "--max_steps", "-1", "--num_train_epochs", "1", "--save_strategy", "no"]
    )
    state = json.loads((tmp_path / "trainer_state.json").read_text())
    from vanilla_transformer.data import make_demo_translation

    tokenizer = AutoTokenizer.from_pretrained(str(tmp_path))
    pairs = make_demo_translation(120, seed=3, max_length=12)["translation"]
    real = sum(len(tokenizer(p[side])["input_ids"]) for p in pairs for side in ("src", "tgt"))
    runtime = metrics["train_runtime"]
    assert metrics["train_tokens_per_second"] * runtime == pytest.approx(real, rel=1e-3)
    assert state["global_step"] < 120  # several pairs a batch
    logged = [entry for entry in state["log_history"] if "loss" in entry]  # every --logging_steps after the first
    assert len(logged) >= 2 and "tokens_per_second" not in logged[0]
    assert all(entry["tokens_per_second"] > 0 for entry in logged[1:])


@pytest.mark.parametrize("packing", [[], ["--packing", "true"]], ids=["budget", "packed"])
def test_two_processes_with_accumulation_match_one(tmp_path, packing):
    """Token batches dealt to 2 processes that accumulate 2 each = 1 process accumulating 4: the loss of an optimizer
    step is divided by the target tokens of all its batches on all processes (num_items_in_batch), so the weights
    after a few SGD steps agree within float tolerance (a per-process normalisation would scale each process's
    gradient by its own token count and move them apart)."""
    import os
    import subprocess
    import sys

    script = os.path.join(ROOT, "scripts", "run_translation.py")
    flags = [
        "--config_overrides",
        "d_model=32,encoder_ffn_dim=64,decoder_ffn_dim=64,encoder_layers=1,decoder_layers=1,dropout=0.0",
        "--label_smoothing_factor",
        "0.1",
        "--max_tokens",
        "96",
        "--demo_train_examples",
        "400",
        "--demo_max_length",
        "24",
        "--optim",
        "sgd",
        "--learning_rate",
        "0.5",
        "--warmup_steps",
        "0",
        "--do_train",
        "--do_eval",
        "false",
        "--do_predict",
        "false",
        "--save_strategy",
        "no",
        "--max_steps",
        "4",
        "--disable_tqdm",
        "true",
        "--bf16",
        "false",
        "--seed",
        "5",
        *packing,
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    one, two = tmp_path / "one", tmp_path / "two"
    r1 = subprocess.run(
        [sys.executable, script, "--output_dir", str(one), *flags, "--gradient_accumulation_steps", "4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert r1.returncode == 0, r1.stderr[-3000:]
    r2 = subprocess.run(
        [*torchrun_two(), script, "--output_dir", str(two), *flags, "--gradient_accumulation_steps", "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r2.returncode == 0, r2.stderr[-3000:]
    w1, w2 = load_file(str(one / "model.safetensors")), load_file(str(two / "model.safetensors"))
    for name in w1:
        torch.testing.assert_close(w2[name], w1[name], rtol=1e-4, atol=1e-6, msg=name)
    # (the logged train_loss is not compared: Trainer averages the processes' shares of each step's loss, which
    # depend on how the step's tokens fall between them; the gradient, and so the weights, do not)
    for run in (one, two):
        assert json.loads((run / "train_results.json").read_text())["train_tokens_per_second"] > 0


@pytest.mark.slow
def test_two_nodes_on_loopback_match_one_process(tmp_path):
    """docs/training.md's several-machines command, on loopback: two single-process nodes (`torchrun --nnodes 2
    --node_rank 0|1`, rendezvous at node 0's address) with token budgets and 2 accumulated batches each end with the
    weights of one process accumulating 4 (as `test_two_processes_with_accumulation_match_one`)."""
    import subprocess
    import sys

    from conftest import free_port

    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    flags = [
        "--config_overrides",
        "d_model=32,encoder_ffn_dim=64,decoder_ffn_dim=64,encoder_layers=1,decoder_layers=1,dropout=0.0",
        "--max_tokens",
        "96",
        "--demo_train_examples",
        "400",
        "--demo_max_length",
        "24",
        "--optim",
        "sgd",
        "--learning_rate",
        "0.5",
        "--warmup_steps",
        "0",
        "--do_train",
        "--do_eval",
        "false",
        "--do_predict",
        "false",
        "--save_strategy",
        "no",
        "--max_steps",
        "4",
        "--disable_tqdm",
        "true",
        "--bf16",
        "false",
        "--seed",
        "5",
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    one, two = tmp_path / "one", tmp_path / "two"
    single = subprocess.run(
        [
            sys.executable,
            "-m",
            "vanilla_transformer.run_translation",
            "--output_dir",
            str(one),
            *flags,
            "--gradient_accumulation_steps",
            "4",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert single.returncode == 0, single.stderr[-3000:]
    port = str(free_port())
    nodes = [
        subprocess.Popen(
            [
                torchrun,
                "--nnodes",
                "2",
                "--nproc_per_node",
                "1",
                "--node_rank",
                str(rank),
                "--master_addr",
                "127.0.0.1",
                "--master_port",
                port,
                "-m",
                "vanilla_transformer.run_translation",
                "--output_dir",
                str(two),
                *flags,
                "--gradient_accumulation_steps",
                "2",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    for node in nodes:
        _, err = node.communicate(timeout=600)
        assert node.returncode == 0, err[-3000:]
    w1, w2 = load_file(str(one / "model.safetensors")), load_file(str(two / "model.safetensors"))
    for name in w1:
        torch.testing.assert_close(w2[name], w1[name], rtol=1e-4, atol=1e-6, msg=name)


def test_evaluation_by_a_token_budget_equals_sentence_batches(small_demo_model, tmp_path):
    """--eval_max_tokens changes how evaluation and prediction are batched, not what they return: the same
    predictions, line by line, and the same scores, in one process and in two (torchrun)."""
    import os
    import subprocess

    flags = [
        "--model_name_or_path",
        str(small_demo_model),
        "--do_train",
        "false",
        "--do_eval",
        "--do_predict",
        "--demo_max_length",
        "10",
        "--demo_eval_examples",
        "45",
        "--generation_max_length",
        "16",
        "--disable_tqdm",
        "true",
        "--bf16",
        "false",
    ]
    runs = {"sentences": ["--per_device_eval_batch_size", "16"], "tokens": ["--eval_max_tokens", "40"]}
    results = {
        name: train_translation.main(["--output_dir", str(tmp_path / name), *flags, *extra])
        for name, extra in runs.items()
    }
    script = os.path.join(ROOT, "scripts", "run_translation.py")
    two = subprocess.run(
        [*torchrun_two(), script, "--output_dir", str(tmp_path / "two"), *flags, *runs["tokens"]],
        env=dict(os.environ, OMP_NUM_THREADS="1"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert two.returncode == 0, two.stderr[-3000:]
    results["two"] = json.loads((tmp_path / "two" / "all_results.json").read_text())

    def predictions(name, split):
        return (tmp_path / name / f"generated_predictions_{split}.txt").read_text(encoding="utf-8").splitlines()

    assert len(predictions("sentences", "test")) == 45
    for name, metrics in results.items():
        for split in ("validation", "test"):
            assert predictions(name, split) == predictions("sentences", split), (name, split)
        for key in ("eval_exact_match", "eval_chrf", "predict_exact_match", "predict_gen_len"):
            assert metrics[key] == pytest.approx(results["sentences"][key], abs=1e-9), (name, key)
        assert metrics["eval_samples"] == metrics["predict_samples"] == 45


def test_tagger_by_a_token_budget(small_ner_model, tmp_path):
    """train-ner: --eval_max_tokens tags exactly as sentence batches do; --max_tokens trains, and refuses
    --mention_replacement (which changes the sentences' lengths every epoch)."""
    from vanilla_transformer.commands import train_ner

    flags = [
        "--model_name_or_path",
        str(small_ner_model),
        "--do_train",
        "false",
        "--do_eval",
        "--do_predict",
        "false",
        "--demo_eval_examples",
        "60",
        "--disable_tqdm",
        "true",
        "--bf16",
        "false",
    ]
    runs = {"sentences": ["--per_device_eval_batch_size", "8"], "tokens": ["--eval_max_tokens", "64"]}
    results = {
        name: train_ner.main(["--output_dir", str(tmp_path / name), *flags, *extra]) for name, extra in runs.items()
    }
    assert results["tokens"]["eval_f1"] == results["sentences"]["eval_f1"] > 0.9
    assert (tmp_path / "tokens" / "predictions_validation.txt").read_text() == (
        tmp_path / "sentences" / "predictions_validation.txt"
    ).read_text()
    trained = train_ner.main(
        [
            "--output_dir",
            str(tmp_path / "trained"),
            "--config_overrides",
            "d_model=32,encoder_layers=1,encoder_ffn_dim=64",
            "--max_tokens",
            "128",
            "--max_steps",
            "3",
            "--demo_train_examples",
            "200",
            "--demo_eval_examples",
            "20",
            "--disable_tqdm",
            "true",
            "--bf16",
            "false",
            "--save_strategy",
            "no",
        ]
    )
    assert json.loads((tmp_path / "trained" / "trainer_state.json").read_text())["global_step"] == 3
    assert "eval_f1" in trained
    with pytest.raises(ValueError, match="--mention_replacement"):
        train_ner.main(
            ["--output_dir", str(tmp_path / "refused"), "--max_tokens", "128", "--mention_replacement", "0.5"]
        )


def test_corpus_encoder_gives_the_tokenizers_ids():
    """The fast path for whole corpora returns exactly the ids of the tokenizer's own call, truncation included, and
    leaves the tokenizer as it was."""
    from vanilla_transformer.tokenization import CorpusEncoder, train_tokenizer

    texts = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee, einer ist braun.", "", "Straße " * 40]
    tokenizer = train_tokenizer(texts * 20, vocab_size=120)
    encoder = CorpusEncoder(tokenizer, max_length=12)
    assert encoder.words is not None  # sentences assembled from their words' ids
    expected = tokenizer(texts, truncation=True, max_length=12)["input_ids"]
    assert encoder(texts) == encoder(texts, target=True) == expected
    assert max(map(len, expected)) == 12 and expected[3][-1] == tokenizer.eos_token_id
    assert tokenizer(texts[3])["input_ids"] != expected[3]  # the tokenizer itself does not truncate afterwards
    tokenizer.__class__ = type("TokenizerWithOwnRules", (type(tokenizer),), {})  # a subclass: encoded by its call
    fallback = CorpusEncoder(tokenizer, max_length=12)
    assert fallback.rust is None and fallback(texts) == fallback(texts, target=True) == expected


@pytest.mark.parametrize("max_length", [2, 5, 1024])
def test_corpus_encoder_by_words_equals_the_tokenizer_on_awkward_text(max_length):
    """Random strings of spaces (double, leading, trailing, no-break, ideographic), tabs, combining accents, the "▁"
    marker, special tokens written out, ligatures, full-width letters and Hangul jamo (whose NFKC forms differ):
    word by word (each distinct word encoded once, remembered across calls) the ids equal the tokenizer's own."""
    import pickle
    import random

    from vanilla_transformer.tokenization import CorpusEncoder, train_tokenizer

    pieces = list("ab cdé  \t") + ["\u00a0", "\u0301", "▁", "</s>", "<unk>", "ﬁ", "Ａ", "\u3000", "ᄀ", "ᅡ", "ß", "¨"]
    rng = random.Random(max_length)
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))) for _ in range(3000)]
    tokenizer = train_tokenizer(texts * 3, vocab_size=60)
    encoder = CorpusEncoder(tokenizer, max_length=max_length)
    expected = tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
    assert encoder(texts[:1500]) + encoder(texts[1500:]) == expected
    assert len(encoder.words) > 100 and None in encoder.words.values()  # words remembered, some encoded in context
    assert pickle.loads(pickle.dumps(encoder)).words == {}  # nor pickled (nor hashed into the cache's name)
    assert encoder(texts) == expected  # from memory
    tokenizer.add_tokens(["b c"])  # an added token spanning two words: sentences are encoded whole
    spanning = CorpusEncoder(tokenizer, max_length=max_length)
    assert spanning.words is None
    assert spanning(texts) == tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]


def test_tokenizer_is_trained_on_an_even_sample_and_reused(tmp_path):
    """A BPE trained on a corpus read from disk is saved beside its Arrow files and loaded by the next run; its
    training sample is --tokenizer_train_samples pairs spread over the whole corpus."""
    from vanilla_transformer.data import load_parallel_text
    from vanilla_transformer.training.arguments import ModelArguments
    from vanilla_transformer.training.models import evenly_spaced, get_tokenizer

    lines = [f"satz {i}" for i in range(100)]
    (tmp_path / "c.de").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "c.en").write_text("\n".join(f"sentence {i}" for i in range(100)) + "\n", encoding="utf-8")
    rows = load_parallel_text(str(tmp_path / "c"), "de", "en", cache_dir=str(tmp_path / "cache"))
    assert [p["de"] for p in evenly_spaced(rows, 4)["translation"]] == ["satz 0", "satz 33", "satz 66", "satz 99"]
    assert evenly_spaced(rows, 1000) is rows
    seen = []

    def texts(sample):
        seen.append(len(sample))
        return (pair[side] for pair in sample["translation"] for side in ("de", "en"))

    args = ModelArguments(vocab_size=40, tokenizer_train_samples=10)
    first = get_tokenizer(args, texts, rows)
    second = get_tokenizer(args, texts, rows)
    assert seen == [10]  # trained once, then loaded
    assert second.get_vocab() == first.get_vocab()
    assert second.name_or_path.startswith(str(tmp_path / "cache"))
    get_tokenizer(ModelArguments(vocab_size=41, tokenizer_train_samples=10), texts, rows)
    assert seen == [10, 10]  # other settings: trained again
    with pytest.raises(ValueError, match="--tokenizer_train_samples must be at least 1"):
        ModelArguments(tokenizer_train_samples=0)
