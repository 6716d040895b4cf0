"""Packed rows (`train-translation --packing true`): several pairs per row of one fixed length, each pair computed as
if alone, gradients equal to the unpacked batch's, every example once per epoch in batches of one shape, one
compiled graph for a whole epoch, and the flags that packing rules out."""

import json

import numpy as np
import pytest
import torch

from conftest import backend_config, seq2seq
from vanilla_transformer import VanillaTransformerConfig
from vanilla_transformer.training.batching import PackedBatchSampler, PackedSeq2SeqCollator, RowsOf, pack_rows

PAIRS = [(5, 7), (3, 2), (9, 6), (1, 4), (6, 9), (4, 3), (2, 2), (7, 5)]  # (source, target) tokens, EOS included
LENGTH, ROWS = 16, 4


def pairs_and_batch(config, seed=0):
    """Random pairs of PAIRS' lengths and their packed batch (ROWS x LENGTH, the rows first-fit packed)."""
    g = torch.Generator().manual_seed(seed)
    examples = [
        {
            "input_ids": torch.randint(4, config.vocab_size, (s,), generator=g).tolist(),
            "labels": torch.randint(4, config.vocab_size, (t,), generator=g).tolist(),
        }
        for s, t in PAIRS
    ]
    sampler = PackedBatchSampler(*zip(*PAIRS), LENGTH, ROWS, shuffle=False)
    assert len(sampler) == 1
    keys = next(iter(sampler))
    collate = PackedSeq2SeqCollator(config.pad_token_id, config.decoder_start_token_id, ROWS, LENGTH)
    return examples, keys, collate([dict(examples[i], row=row) for row, i in keys])


def spans(batch, row, mask="decoder_attention_mask"):
    """The (start, end) of each pair in `row` of a packed batch, from its segment numbers."""
    segments = batch[mask][row].tolist()
    return {n: (segments.index(n), len(segments) - segments[::-1].index(n)) for n in set(segments) - {0}}


CONFIGS = {
    "paper": {},
    "pre-LN + learned positions + relative bias": dict(
        normalize_before=True, position_embedding_type="learned", relative_attention_max_distance=4
    ),
}


@pytest.mark.parametrize("overrides", CONFIGS.values(), ids=CONFIGS.keys())
@pytest.mark.parametrize("implementation", ["eager", "sdpa", "flex_attention"])
def test_each_packed_pair_is_computed_as_if_alone(overrides, implementation):
    """A packed row's logits for each pair, and each pair's summed loss, equal the pair run alone (batch of one, no
    padding) within 1e-5: each pair attends to itself only (encoder, causal decoder, cross-attention to its own
    source) and its positions restart at 0."""
    config = backend_config(implementation, **overrides)
    model = seq2seq(config)
    if overrides.get("relative_attention_max_distance"):
        torch.nn.init.normal_(model.model.encoder.relative_bias.weight)
        torch.nn.init.normal_(model.model.decoder.relative_bias.weight)
    model.set_attn_implementation(implementation)
    examples, keys, packed = pairs_and_batch(config)
    assert sum(len(spans(packed, row)) for row in range(ROWS)) == len(PAIRS)
    with torch.no_grad():
        logits = model(**{k: v for k, v in packed.items() if k != "labels"}).logits
        token_losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), packed["labels"], reduction="none")
        for row in range(ROWS):
            sources, targets = spans(packed, row, "attention_mask"), spans(packed, row)
            for pair, (t0, t1) in targets.items():
                s0, s1 = sources[pair]
                alone = model(
                    input_ids=packed["input_ids"][row : row + 1, s0:s1], labels=packed["labels"][row : row + 1, t0:t1]
                )
                torch.testing.assert_close(logits[row, t0:t1], alone.logits[0], rtol=0, atol=1e-5)
                torch.testing.assert_close(token_losses[row, t0:t1].mean(), alone.loss, rtol=0, atol=1e-5)


def test_packed_step_has_the_unpacked_steps_gradients():
    """One training step on the packed batch (dropout off) gives the gradients of the same pairs in an ordinary
    padded batch (one pair a row), within 1e-5: the loss of both is the sum over real target tokens / their number."""
    from transformers import DataCollatorForSeq2Seq

    config = VanillaTransformerConfig.from_preset("tiny", dropout=0.0)
    examples, _, packed = pairs_and_batch(config)

    class Tokenizer:  # what DataCollatorForSeq2Seq reads of a tokenizer: pad
        pad_token_id, padding_side = config.pad_token_id, "right"

        def pad(self, features, return_tensors=None, **kwargs):
            width = max(len(f["input_ids"]) for f in features)
            ids = [f["input_ids"] + [self.pad_token_id] * (width - len(f["input_ids"])) for f in features]
            mask = [[1] * len(f["input_ids"]) + [0] * (width - len(f["input_ids"])) for f in features]
            return {
                "input_ids": torch.tensor(ids),
                "attention_mask": torch.tensor(mask),
                **{k: torch.tensor([f[k] for f in features]) for k in features[0] if k != "input_ids"},
            }

    unpacked = DataCollatorForSeq2Seq(Tokenizer(), label_pad_token_id=-100)([dict(e) for e in examples])
    grads = []
    for batch in (packed, unpacked):
        model = seq2seq(config).train()
        model(**batch).loss.backward()
        grads.append({name: p.grad for name, p in model.named_parameters()})
    for name in grads[0]:
        torch.testing.assert_close(grads[0][name], grads[1][name], rtol=0, atol=1e-5, msg=name)


@pytest.fixture
def lengths():
    g = np.random.default_rng(0)  # sentence-like lengths: mostly short, a few long; a translation about as long
    source = np.minimum(g.lognormal(2.6, 0.5, 3000).astype(int) + 1, 64)
    return source, np.clip(source + g.integers(-3, 4, 3000), 1, 64)


def test_every_example_once_per_epoch_in_batches_of_one_shape(lengths):
    sampler = PackedBatchSampler(*lengths, length=128, rows=8, seed=1)
    orders = []
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        seen = sorted(i for keys in batches for _, i in keys)
        assert seen == list(range(len(lengths[0])))  # every example once
        for keys in batches:
            assert {row for row, _ in keys} <= set(range(8))
            for row in range(16):
                members = [i for r, i in keys if r == row]
                assert lengths[0][members].sum() <= 128 and lengths[1][members].sum() <= 128
        orders.append([tuple(k) for k in batches])
    assert orders[0] != orders[1] and sorted(orders[0]) == sorted(orders[1])  # the same batches, in a new order
    real = lengths[0].sum() + lengths[1].sum()
    assert 1 - real / (2 * len(sampler) * 8 * 128) < 0.05  # padding: first fit, longest first


def test_packing_a_large_corpus_keeps_few_rows_open():
    """With at most `open_rows` rows taking pairs at a time, packing stays linear in the corpus; every pair lands in
    one row, within its length on both sides."""
    g = np.random.default_rng(0)
    source, target = g.integers(1, 100, 100_000), g.integers(1, 100, 100_000)
    members, starts = pack_rows(source, target, 256, open_rows=64)
    assert np.array_equal(np.sort(members), np.arange(100_000))
    for side in (source, target):
        assert (np.add.reduceat(side[members], starts[:-1]) <= 256).all()


def test_a_packed_stream_gives_each_example_once_a_pass_in_batches_of_one_shape():
    """`--streaming --packing`: each buffer of the stream is packed as it is read; every collated batch has rows x
    length tokens a side, and one pass holds every example once."""
    from vanilla_transformer.training.batching import TokenBudgetStream

    g = np.random.default_rng(0)
    examples = [
        {"input_ids": [5] * int(s), "labels": [6] * int(t), "id": i}
        for i, (s, t) in enumerate(zip(g.integers(1, 30, 500), g.integers(1, 30, 500)))
    ]
    collate = PackedSeq2SeqCollator(0, 1, 4, 32)
    seen, shapes = [], set()
    stream = iter(
        TokenBudgetStream(
            examples,
            max_tokens=128,
            seed=1,
            buffer=200,
            packing_length=32,
            collate_fn=lambda rows: (collate(rows), [row["id"] for row in rows]),
        )
    )
    while len(seen) < 500:
        batch, rows = next(stream)
        shapes.add((tuple(batch["input_ids"].shape), tuple(batch["labels"].shape)))
        seen += rows
    assert sorted(seen) == list(range(500)) and shapes == {((4, 32), (4, 32))}


def test_rows_of_a_dataset_carry_their_row():
    import datasets

    ds = datasets.Dataset.from_dict({"input_ids": [[5, 6], [7]], "labels": [[8], [9, 10]]})
    assert RowsOf(ds).__getitems__([(3, 1), (0, 0)]) == [
        {"input_ids": [7], "labels": [9, 10], "row": 3},
        {"input_ids": [5, 6], "labels": [8], "row": 0},
    ]


def test_a_pair_longer_than_a_row_is_named():
    with pytest.raises(ValueError, match=r"--packing_length 8 is below training example 2's length \(9 input"):
        pack_rows([3, 4, 9], [2, 2, 2], 8)


def test_one_compiled_graph_for_a_whole_epoch(lengths):
    """Every packed batch has one shape, so a compiled training step is compiled once for the epoch (counted by the
    backend, which torch.compile calls once per graph it compiles); token-budget batches compile again and again."""
    config = VanillaTransformerConfig.from_preset("tiny", dropout=0.1)
    rng = np.random.default_rng(0)
    source, target = lengths[0][:200] // 4 + 1, lengths[1][:200] // 4 + 1
    examples = [
        {
            "input_ids": rng.integers(4, config.vocab_size, s).tolist(),
            "labels": rng.integers(4, config.vocab_size, t).tolist(),
        }
        for s, t in zip(source, target)
    ]
    sampler = PackedBatchSampler(source, target, length=24, rows=4)
    collate = PackedSeq2SeqCollator(config.pad_token_id, config.decoder_start_token_id, 4, 24)
    graphs = []

    def backend(graph, example_inputs):
        graphs.append(graph)
        return graph.forward

    torch.compiler.reset()
    model = seq2seq(config).train()
    step = torch.compile(model, backend=backend, fullgraph=True)
    for keys in sampler:
        step(**collate([dict(examples[i], row=row) for row, i in keys])).loss.backward()
    assert len(sampler) > 5 and len(graphs) == 1


FLAGS = [
    "--config_overrides",
    "d_model=32,encoder_ffn_dim=64,decoder_ffn_dim=64,encoder_layers=1,decoder_layers=1",
    "--max_tokens",
    "128",
    "--demo_train_examples",
    "200",
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
    "no",
    "--max_steps",
    "-1",
    "--num_train_epochs",
    "2",
    "--disable_tqdm",
    "true",
    "--bf16",
    "false",
    "--seed",
    "3",
]


def test_train_translation_packs_and_reports_its_padding(tmp_path):
    """The command trains on packed rows and reports the padding of its batches: less than token-budget batches'."""
    from transformers import AutoTokenizer

    from vanilla_transformer.commands import train_translation
    from vanilla_transformer.data import make_demo_translation

    steps, fractions = {}, {}
    for packing in ("false", "true"):
        out = tmp_path / packing
        packs = ["--packing", "true", "--packing_length", "32"] if packing == "true" else []
        train_translation.main(["--output_dir", str(out), *FLAGS, *packs])
        fractions[packing] = json.loads((out / "train_results.json").read_text())["train_padding_fraction"]
        steps[packing] = json.loads((out / "trainer_state.json").read_text())["global_step"]
    tokenizer = AutoTokenizer.from_pretrained(str(tmp_path / "true"))
    pairs = make_demo_translation(200, seed=3, max_length=12)["translation"]
    real = 2 * sum(len(tokenizer(p[side])["input_ids"]) for p in pairs for side in ("src", "tgt"))  # 2 epochs
    assert fractions["true"] == pytest.approx(1 - real / (steps["true"] * 2 * 128), rel=1e-6)  # 4 rows of 32 a side
    assert 0 < fractions["false"] < 0.2


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--packing", "true"], "give --max_tokens too"),
        (["--packing_length", "32"], "give --packing true too"),
        (["--packing", "true", "--max_tokens", "64", "--packing_length", "128"], "--packing_length 128 is above"),
    ],
)
def test_packing_flags_that_do_not_go_together_are_refused(tmp_path, flags, message):
    from vanilla_transformer.commands import train_translation

    with pytest.raises(ValueError, match=message):
        train_translation.main(["--output_dir", str(tmp_path), *flags])


def test_a_tagger_refuses_packing(tmp_path):
    from vanilla_transformer.commands import train_ner

    with pytest.raises(ValueError, match="--packing is offered by train-translation only"):
        train_ner.main(["--output_dir", str(tmp_path), "--packing", "true", "--max_tokens", "256"])


def test_compiled_training_command_compiles_once_with_packing(tmp_path):
    """`train-translation --torch_compile true --packing true` compiles its step once for the run: torch's own
    recompilation log (TORCH_LOGS=recompiles) stays silent over two epochs, where token budgets recompile."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    flags = [*FLAGS, "--torch_compile", "true", "--torch_compile_backend", "eager"]  # (eager: tracing, no codegen)
    logs = {}
    for name, extra in (("packed", ["--packing", "true", "--packing_length", "32"]), ("budget", [])):
        proc = subprocess.run(
            [
                sys.executable,
                os.path.join(ROOT, "scripts", "run_translation.py"),
                "--output_dir",
                str(tmp_path / name),
                *flags,
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=600,
            env=dict(os.environ, TORCH_LOGS="recompiles", OMP_NUM_THREADS="1"),
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        logs[name] = proc.stderr
    assert "Recompiling" not in logs["packed"]
    assert "Recompiling" in logs["budget"]  # the log does speak when shapes change
