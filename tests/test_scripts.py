"""The run scripts end to end on tiny data: train a few steps, evaluate, predict, reload through Auto* classes;
resume after a kill; two-process data parallelism equals one process."""

import json
import os
import signal
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM, AutoModelForTokenClassification, AutoTokenizer

from conftest import (
    NER_SENTENCES,
    ROOT,
    SHARED_DATA,
    f1_of_predictions_file,
    free_port,
    ner_args,
    read_predictions_file,
    torchrun_two,
    translation_args,
    write_conll,
    write_parallel,
)
from vanilla_transformer import VanillaTransformerForConditionalGeneration
from vanilla_transformer.commands import average_checkpoints, train_ner, train_translation
from vanilla_transformer.data import DataError
from vanilla_transformer.ner import mentions


def test_run_translation_end_to_end(tmp_path):
    data_dir = write_parallel(tmp_path)
    out = tmp_path / "out"
    metrics = train_translation.main(translation_args(data_dir, out, "--num_beams", "2"))
    for key in ("train_loss", "eval_bleu", "eval_chrf", "predict_bleu", "eval_exact_match"):
        assert key in metrics, key
    assert metrics["eval_samples"] == 10 and metrics["train_samples"] == 64
    results = json.loads((out / "all_results.json").read_text())
    assert results["eval_bleu"] == pytest.approx(metrics["eval_bleu"])
    lines = (out / "generated_predictions_test.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 10
    tokenizer = AutoTokenizer.from_pretrained(out)
    model = AutoModelForSeq2SeqLM.from_pretrained(out)
    assert model.config.label_smoothing == 0.1  # the paper's default, applied inside the model
    assert model.generation_config.num_beams == 2
    batch = tokenizer(["Ein hund läuft im park."], return_tensors="pt", return_token_type_ids=False)
    generated = model.generate(**batch, max_new_tokens=12)
    assert generated.shape[0] == 1


def test_demo_that_did_not_learn_fails_loudly(tmp_path):
    """A demo run whose held-out exact match is below 0.95 must not report success (exit status non-zero, a message
    saying what failed): here 2 training steps."""
    with pytest.raises(SystemExit, match=r"Demo failed: held-out exact match .*eval_exact_match.* below 0.95"):
        train_translation.main(
            [
                "--output_dir",
                str(tmp_path),
                "--max_steps",
                "2",
                "--demo_train_examples",
                "64",
                "--demo_eval_examples",
                "4",
                "--generation_max_length",
                "8",
                "--disable_tqdm",
                "true",
            ]
        )
    metrics = json.loads((tmp_path / "eval_results.json").read_text())  # still saved
    assert metrics["eval_exact_match"] < 0.95 and "eval_chrf" in metrics
    assert "eval_bleu" not in metrics  # word n-grams of unspaced strings measure nothing


@pytest.mark.parametrize("fast", [True, False])
def test_demo_trains_in_bf16_where_it_pays(monkeypatch, fast):
    """The demo's --bf16 default follows the measurement; a run given data or a model gets no demo flags."""
    monkeypatch.setattr(train_translation, "fast_bf16", lambda device_type="cpu": fast)
    demo = train_translation.demo_defaults(["--output_dir", "x"])
    assert demo[demo.index("--bf16") + 1] == str(fast).lower()
    assert train_translation.demo_defaults(["--train_file=data/train.json"]) == []
    assert train_translation.demo_defaults(["--config_name", "small"]) == []


@pytest.mark.parametrize("accelerator", [None, "cuda"])
def test_training_device_is_decided_when_the_command_runs(tmp_path, monkeypatch, accelerator):
    """Without an accelerator the commands train with --use_cpu true (what forms a gloo group under torchrun); with
    one, the Trainer takes it. A --use_cpu on the command line or in a JSON file of arguments wins."""
    from vanilla_transformer import training

    monkeypatch.setattr(training.precision, "accelerator_type", lambda: accelerator)
    classes = (
        training.arguments.ModelArguments,
        train_translation.DataTrainingArguments,
        train_translation.TranslationTrainingArguments,
    )
    assert training.precision.with_device_default(["--use_cpu", "false"]) == ["--use_cpu", "false"]
    assert training.precision.with_device_default(["--x"]) == (["--x"] if accelerator else ["--use_cpu", "true", "--x"])
    if accelerator is None:  # (with an accelerator the Trainer would try to reach it here)
        args = training.arguments.parse_run_arguments(classes, ["--output_dir", str(tmp_path)])[2]
        assert args.use_cpu is True
        (tmp_path / "args.json").write_text(json.dumps({"output_dir": str(tmp_path), "do_train": True}))
        assert training.arguments.parse_run_arguments(classes, [str(tmp_path / "args.json")])[2].use_cpu is True
    monkeypatch.setattr(training.precision.torch.cuda, "is_available", lambda: accelerator == "cuda")
    monkeypatch.setattr(training.precision.torch.cuda, "is_bf16_supported", lambda: True)
    assert training.precision.fast_bf16() == (True if accelerator else training.precision.fast_bf16("cpu"))


@pytest.mark.parametrize(
    "native,speedup,warning", [(False, 0.0, "no native bf16"), (True, 0.55, "0.55x as fast"), (True, 2.0, None)]
)
def test_explicit_bf16_warns_where_it_does_not_pay(tmp_path, monkeypatch, caplog, native, speedup, warning):
    """--bf16 true on a CPU where bf16 matrix products are emulated or measure slower than fp32 warns, saying which."""
    from vanilla_transformer import training

    monkeypatch.setattr(training.precision, "native_bf16", lambda device_type="cpu": native)
    monkeypatch.setattr(training.precision, "bf16_matmul_speedup", lambda: speedup)
    with caplog.at_level("WARNING"):
        training.arguments.parse_run_arguments(
            (
                training.arguments.ModelArguments,
                train_translation.DataTrainingArguments,
                train_translation.TranslationTrainingArguments,
            ),
            ["--output_dir", str(tmp_path), "--bf16", "true"],
        )
    assert ("pass --bf16 false" in caplog.text) == (warning is not None)
    assert warning is None or warning in caplog.text


def test_bf16_measurement_leaves_the_seed_alone():
    """Measuring bf16 against fp32 draws from its own generator: a seeded run draws the same numbers after it. It is 0
    where bf16 has no native kernel, a positive ratio elsewhere."""
    from vanilla_transformer import training

    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    speedup = training.precision.bf16_matmul_speedup.__wrapped__()
    assert torch.equal(torch.rand(3), expected)
    assert (speedup > 0) == training.precision.native_bf16("cpu")
    precision = training.precision
    assert precision.fast_bf16("cpu") == (precision.bf16_matmul_speedup() >= precision.BF16_MIN_SPEEDUP)


def test_run_translation_on_tab_separated_pairs(tmp_path):
    """d2l's English-French data layout: one tab-separated pair a line, an attribution column ignored."""
    data_dir = tmp_path / "parallel"
    data_dir.mkdir()
    write_parallel(data_dir)
    for split in ("train", "validation", "test"):
        de = (data_dir / f"{split}.de").read_text(encoding="utf-8").splitlines()
        en = (data_dir / f"{split}.en").read_text(encoding="utf-8").splitlines()
        (tmp_path / f"{split}.tsv").write_text(
            "".join(f"{e}\t{d}\tCC-BY 2.0 #{i}\n" for i, (e, d) in enumerate(zip(en, de))), encoding="utf-8"
        )
    args = translation_args(data_dir, tmp_path / "out")
    for flag, split in (("--train_file", "train"), ("--validation_file", "validation"), ("--test_file", "test")):
        args[args.index(flag) + 1] = str(tmp_path / f"{split}.tsv")
    args[args.index("--source_lang") + 1], args[args.index("--target_lang") + 1] = "en", "de"
    metrics = train_translation.main(args)
    assert metrics["train_samples"] == 64 and metrics["eval_samples"] == 10
    (tmp_path / "train.tsv").write_text("One.\tEins.\nTwo. Zwei.\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"train\.tsv, line 2: no tab"):
        train_translation.main(args + ["--overwrite_output_dir", "true"])


def test_run_translation_continues_from_saved_model(tmp_path):
    data_dir = write_parallel(tmp_path)
    train_translation.main(translation_args(data_dir, tmp_path / "first", "--do_train"))
    second = tmp_path / "second"
    train_translation.main(
        translation_args(data_dir, second, "--model_name_or_path", str(tmp_path / "first"), "--do_eval")
    )
    assert json.loads((second / "eval_results.json").read_text())["eval_samples"] == 10


def test_run_translation_bad_arguments(tmp_path):
    data_dir = write_parallel(tmp_path)
    with pytest.raises(ValueError, match="unknown config field 'd_modle'"):
        train_translation.main(translation_args(data_dir, tmp_path / "o", "--config_overrides", "d_modle=64"))
    with pytest.raises(ValueError, match="'huge'"):
        train_translation.main(translation_args(data_dir, tmp_path / "o", "--config_name", "huge"))
    with pytest.raises(ValueError, match="encoder_layers='three' is not a number"):
        train_translation.main(translation_args(data_dir, tmp_path / "o", "--config_overrides", "encoder_layers=three"))
    (data_dir / "validation.en").write_text("only one line\n")
    with pytest.raises(ValueError, match="validation.de has 10 lines but .*validation.en has 1"):
        train_translation.main(translation_args(data_dir, tmp_path / "o"))


@pytest.mark.parametrize(
    "extra",
    [
        ("--label_all_tokens", "true"),
        ("--context_words", "4", "--config_overrides", "use_crf=true"),
        ("--mention_replacement", "0.5", "--config_overrides", "char_cnn_dim=8"),
        (
            "--auxiliary_columns",
            "true",
            "--mention_replacement",
            "0.5",
            "--context_words",
            "2",
            "--label_all_tokens",
            "true",
        ),
    ],
)
def test_run_ner_end_to_end(tmp_path, extra):
    out = tmp_path / "out"
    metrics = train_ner.main(ner_args(tmp_path, out, *extra))
    for key in ("eval_f1", "eval_precision", "eval_recall", "eval_accuracy", "eval_PER_f1", "predict_f1"):
        assert key in metrics, key
    model = AutoModelForTokenClassification.from_pretrained(out)
    assert set(model.config.id2label.values()) == {"O", "B-PER", "I-PER", "B-LOC", "B-ORG", "I-ORG"}
    if "--auxiliary_columns" in extra:  # POS (NN, NNP) and chunk (B-NP, O) heads, trained
        assert model.config.auxiliary_num_labels == [2, 2]
        assert [head.out_features for head in model.auxiliary_classifiers] == [2, 2]
        assert model.auxiliary_classifiers[0].bias.abs().sum() > 0
    if model.config.char_cnn_dim:  # the tokenizer's spelling table was filled and saved
        assert model.model.encoder.char_features.token_chars[4:60, 0].any()
    lines = (out / "predictions_test.txt").read_text().split("\n\n")
    assert lines[0].splitlines()[0].split()[:2] == ["Anna", "B-PER"]
    assert sum(1 for block in lines if block.strip()) == 3
    tokenizer = AutoTokenizer.from_pretrained(out)
    from transformers import pipeline

    tagger = pipeline("token-classification", model=model, tokenizer=tokenizer, aggregation_strategy="simple")
    assert isinstance(tagger("Anna lives in Berlin ."), list)


def test_run_ner_document_consistency(tmp_path, monkeypatch):
    """--document_consistency hands the predicted tags with their words and documents to
    `mentions.document_consistency` (tested in test_ner_mentions.py), writes what it returns and reports that file's
    F1. A stand-in that tags every word B-PER makes the hand-over visible."""
    train_ner.main(ner_args(tmp_path, tmp_path / "m", "--do_train", "--max_steps", "1"))
    write_conll(tmp_path / "doc.txt", NER_SENTENCES * 2)
    (tmp_path / "docs.txt").write_text((tmp_path / "doc.txt").read_text() * 2)  # two documents of six sentences
    calls = []

    def every_word_a_person(words, tags, documents):
        calls.append((words, tags, list(documents)))
        return [["B-PER"] * len(row) for row in tags]

    monkeypatch.setattr(mentions, "document_consistency", every_word_a_person)
    runs = {}
    for flag in ("false", "true"):
        out = tmp_path / flag
        metrics = train_ner.main(
            [
                "--model_name_or_path",
                str(tmp_path / "m"),
                "--validation_file",
                str(tmp_path / "docs.txt"),
                "--do_eval",
                "--document_consistency",
                flag,
                "--output_dir",
                str(out),
                "--disable_tqdm",
                "true",
            ]
        )
        f1, n = f1_of_predictions_file(out / "predictions_validation.txt")
        assert (metrics["eval_f1"], metrics["eval_samples"]) == (pytest.approx(f1), n)
        runs[flag] = [(w, p) for w, _, p in read_predictions_file(out / "predictions_validation.txt")]
    assert calls == [([w for w, _ in runs["false"]], [t for _, t in runs["false"]], [0] * 6 + [1] * 6)]
    assert all(set(tags) == {"B-PER"} for _, tags in runs["true"])


def test_run_ner_unseen_validation_label(tmp_path):
    args = ner_args(tmp_path, tmp_path / "out")
    write_conll(tmp_path / "valid.txt", [(["Rome"], ["B-CITY"])])
    with pytest.raises(ValueError, match=r"\['B-CITY'\] occur in the validation split but never in training"):
        train_ner.main(args)


def test_tagger_from_translation_checkpoint(tmp_path):
    """Fine-tune a translation model's encoder for NER: the run starts from the seq2seq checkpoint."""
    data_dir = write_parallel(tmp_path)
    train_translation.main(translation_args(data_dir, tmp_path / "mt", "--do_train"))
    encoder_before = load_file(tmp_path / "mt" / "model.safetensors")["model.encoder.layers.0.ffn.fc1.weight"]
    train_ner.main(
        ner_args(
            tmp_path,
            tmp_path / "ner",
            "--model_name_or_path",
            str(tmp_path / "mt"),
            "--max_steps",
            "1",
            "--learning_rate",
            "1e-9",
            "--do_train",
        )
    )
    tagger = load_file(tmp_path / "ner" / "model.safetensors")
    assert not any(k.startswith("model.decoder") for k in tagger)
    torch.testing.assert_close(tagger["model.encoder.layers.0.ffn.fc1.weight"], encoder_before, rtol=0, atol=1e-6)


def _script_cmd(*args):
    return [sys.executable, os.path.join(ROOT, "scripts", "run_translation.py"), *args]


# Runs the translation command with a fault injected: the process kills itself (SIGKILL, as a power cut would) when
# the checkpoint named in argv[1] is about to be renamed into place ("staged": written but not yet visible) or just
# after ("renamed").
KILL_DURING_SAVE = """
import os, signal, sys
target, when = sys.argv.pop(1), sys.argv.pop(1)
real_replace = os.replace
def replace(src, dst, *args, **kwargs):
    if os.path.basename(dst) == target and when == "staged":
        os.kill(os.getpid(), signal.SIGKILL)
    real_replace(src, dst, *args, **kwargs)
    if os.path.basename(dst) == target and when == "renamed":
        os.kill(os.getpid(), signal.SIGKILL)
os.replace = replace
from vanilla_transformer.commands.train_translation import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize(
    "when, visible", [("staged", ["checkpoint-10"]), ("renamed", ["checkpoint-10", "checkpoint-20"])]
)
def test_resume_after_kill_during_save(tmp_path, when, visible):
    """Killed while saving checkpoint-20: before its rename only whole earlier checkpoints are visible, after it
    checkpoint-20 too; `--resume_from_checkpoint true` continues from the newest whole one to the end."""
    data_dir = write_parallel(tmp_path, n=64)
    out = tmp_path / "out"
    args = translation_args(
        data_dir,
        out,
        "--do_train",
        "--max_steps",
        "30",
        "--save_strategy",
        "steps",
        "--save_steps",
        "10",
        "--save_total_limit",
        "3",
        "--per_device_train_batch_size",
        "4",
    )
    env = dict(os.environ, OMP_NUM_THREADS="1")
    killed = subprocess.run(
        [sys.executable, "-c", KILL_DURING_SAVE, "checkpoint-20", when, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("checkpoint-")) == visible
    assert not (out / "model.safetensors").exists()
    for name in visible:
        AutoModelForSeq2SeqLM.from_pretrained(out / name)  # every visible checkpoint is whole
    resumed = subprocess.run(
        _script_cmd(*args, "--resume_from_checkpoint", "true"), env=env, capture_output=True, text=True, timeout=400
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"from checkpoint {out / visible[-1]}" in resumed.stderr + resumed.stdout
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 30
    assert not (out / ".staging").exists() or not any((out / ".staging").iterdir())


def test_two_processes_match_one(tmp_path):
    """torchrun --nproc_per_node 2 with batch 4 per process = 1 process with batch 8: same losses, same weights,
    same evaluation (no duplicated samples in the gather)."""
    torchrun = torchrun_two()
    # 8 training pairs = one global batch: every step sees all of them in both runs, whatever the shuffling
    data_dir = write_parallel(tmp_path, n=8)
    # SGD: Adam's tiny epsilon turns float reduction-order noise in near-zero gradients into visible updates
    common = [
        "--do_train",
        "--do_eval",
        "--max_steps",
        "4",
        "--max_eval_samples",
        "7",
        "--save_strategy",
        "no",
        "--warmup_steps",
        "2",
        "--optim",
        "sgd",
        "--learning_rate",
        "0.5",
    ]
    one = tmp_path / "one"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r1 = subprocess.run(
        _script_cmd(*translation_args(data_dir, one, *common, "--per_device_train_batch_size", "8")),
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert r1.returncode == 0, r1.stderr[-3000:]
    two = tmp_path / "two"
    cmd = [*torchrun, *_script_cmd(*translation_args(data_dir, two, *common, "--per_device_train_batch_size", "4"))[1:]]
    r2 = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r2.returncode == 0, r2.stderr[-3000:]
    res1 = json.loads((one / "all_results.json").read_text())
    res2 = json.loads((two / "all_results.json").read_text())
    assert res2["eval_samples"] == res1["eval_samples"] == 7
    assert res2["train_loss"] == pytest.approx(res1["train_loss"], rel=1e-5)
    assert res2["eval_bleu"] == pytest.approx(res1["eval_bleu"], abs=1e-6)
    # Trainer's eval_loss averages per-batch means, and batches group differently across processes (the last one
    # topped up with a repeated pair): close, not equal
    assert res2["eval_loss"] == pytest.approx(res1["eval_loss"], rel=1e-2)
    w1, w2 = load_file(one / "model.safetensors"), load_file(two / "model.safetensors")
    for name in w1:
        torch.testing.assert_close(w1[name], w2[name], rtol=1e-4, atol=1e-6)
    predictions = (two / "generated_predictions_validation.txt").read_text(encoding="utf-8").splitlines()
    assert len(predictions) == 7  # in the file's order, as one process writes them
    assert predictions == (one / "generated_predictions_validation.txt").read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("held_elsewhere", [False, True])
def test_process_group_closed_after_the_wrapper(held_elsewhere):
    """The end of a run under torchrun: the data-parallel wrapper is dropped, then the process group closed (left to
    the exit, Gloo's threads can abort a finished run); where something else still holds the wrapper, the group is
    left open (closing it would join Gloo's threads from the wrapper's destructor later, under the interpreter lock)."""
    import gc
    from types import SimpleNamespace

    from torch.nn.parallel import DistributedDataParallel

    from vanilla_transformer.training.runs import close_process_group

    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        model = torch.nn.Linear(3, 2)
        trainer = SimpleNamespace(
            model=model,
            model_wrapped=DistributedDataParallel(model),
            accelerator=SimpleNamespace(free_memory=gc.collect),
        )
        trainer.model_wrapped(torch.ones(4, 3)).sum().backward()  # a gradient all-reduce on the group
        kept = trainer.model_wrapped if held_elsewhere else None
        close_process_group(trainer)
        assert trainer.model_wrapped is model
        assert torch.distributed.is_initialized() == held_elsewhere
        del kept
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


@pytest.mark.skipif(not os.path.isdir(os.path.join(SHARED_DATA, "multi30k")), reason="shared data absent")
def test_real_data_smoke_translation(tmp_path):
    prefix = os.path.join(SHARED_DATA, "multi30k")
    metrics = train_translation.main(
        [
            "--train_file",
            f"{prefix}/train",
            "--validation_file",
            f"{prefix}/validation",
            "--source_lang",
            "de",
            "--target_lang",
            "en",
            "--output_dir",
            str(tmp_path / "o"),
            "--config_name",
            "tiny",
            "--vocab_size",
            "500",
            "--max_train_samples",
            "256",
            "--max_eval_samples",
            "8",
            "--max_steps",
            "3",
            "--do_train",
            "--do_eval",
            "--generation_max_length",
            "8",
            "--save_strategy",
            "no",
            "--disable_tqdm",
            "true",
        ]
    )
    assert metrics["eval_samples"] == 8 and metrics["train_samples"] == 256


@pytest.mark.skipif(not os.path.isdir(os.path.join(SHARED_DATA, "conll2003")), reason="shared data absent")
def test_real_data_smoke_ner(tmp_path):
    prefix = os.path.join(SHARED_DATA, "conll2003")
    metrics = train_ner.main(
        [
            "--train_file",
            f"{prefix}/train.txt",
            "--validation_file",
            f"{prefix}/validation.txt",
            "--output_dir",
            str(tmp_path / "o"),
            "--config_name",
            "tiny",
            "--vocab_size",
            "500",
            "--max_train_samples",
            "256",
            "--max_eval_samples",
            "16",
            "--max_steps",
            "3",
            "--do_train",
            "--do_eval",
            "--save_strategy",
            "no",
            "--disable_tqdm",
            "true",
        ]
    )
    f1, sentences = f1_of_predictions_file(tmp_path / "o" / "predictions_validation.txt")
    assert metrics["eval_samples"] == sentences == 16 and metrics["eval_f1"] == pytest.approx(f1)


def test_average_checkpoints(tmp_path, tiny_config):
    models = []
    for step in (10, 20, 30):
        torch.manual_seed(step)
        model = VanillaTransformerForConditionalGeneration(tiny_config)
        model.save_pretrained(tmp_path / f"checkpoint-{step}")
        models.append(model)
    (tmp_path / "checkpoint-40").mkdir()  # an incomplete checkpoint (no weights) is skipped
    used = average_checkpoints.main([str(tmp_path), "--last", "2", "--output_dir", str(tmp_path / "avg")])
    assert [os.path.basename(p) for p in used] == ["checkpoint-20", "checkpoint-30"]
    averaged = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path / "avg")
    for name, tensor in averaged.state_dict().items():
        expected = (models[1].state_dict()[name] + models[2].state_dict()[name]) / 2
        torch.testing.assert_close(tensor, expected, rtol=0, atol=1e-7, msg=name)
    with pytest.raises(ValueError, match="No checkpoint-"):
        average_checkpoints.main([str(tmp_path / "avg"), "--output_dir", str(tmp_path / "x")])


def test_evaluation_keeps_dataset_order_under_group_by_length(tmp_path, tiny_config):
    """transformers 5 applies group_by_length to evaluation as well; our trainers must not, or the predictions files
    pair predictions with the wrong sources."""
    from datasets import Dataset
    from transformers import DataCollatorWithPadding, Seq2SeqTrainingArguments

    from vanilla_transformer.tokenization import train_tokenizer
    from vanilla_transformer.training.trainers import AtomicSeq2SeqTrainer

    lengths = [3, 9, 1, 7, 2, 8, 5, 4, 6, 10] * 3
    ds = Dataset.from_dict({"input_ids": [[5 + i % 7] * n for i, n in enumerate(lengths)]})
    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path),
        per_device_eval_batch_size=4,
        report_to="none",
        train_sampling_strategy="group_by_length",
        use_cpu=True,
    )
    tokenizer = train_tokenizer(["ein hund", "a dog"], vocab_size=20)
    trainer = AtomicSeq2SeqTrainer(
        model=VanillaTransformerForConditionalGeneration(tiny_config),
        args=args,
        data_collator=DataCollatorWithPadding(tokenizer),
        processing_class=tokenizer,
    )
    seen = [int(mask.sum()) for batch in trainer.get_eval_dataloader(ds) for mask in batch["attention_mask"]]
    assert seen == lengths


def source_tcmalloc(tmp_path, tcmalloc: str, preload: str = "", shell: str = "bash"):
    """Source recipes/tcmalloc.sh the way the recipes (bash) and `make demo` (sh) do; returns (exit code,
    LD_PRELOAD after it, stderr)."""
    strict = "set -euo pipefail" if shell == "bash" else "set -eu"
    script = f"{strict}; LD_PRELOAD='{preload}'; . '{ROOT}/recipes/tcmalloc.sh' >/dev/null; printf %s \"$LD_PRELOAD\""
    env = {**os.environ, "TCMALLOC": tcmalloc}
    done = subprocess.run([shell, "-c", script], env=env, capture_output=True, text=True, cwd=tmp_path)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_recipes_preload_the_chosen_allocator(tmp_path, shell):
    library = tmp_path / "libtcmalloc_minimal.so.4"
    library.write_bytes(b"")
    assert source_tcmalloc(tmp_path, str(library), shell=shell) == (0, str(library), "")
    assert source_tcmalloc(tmp_path, str(library), preload="/other.so", shell=shell)[1] == f"{library}:/other.so"
    assert source_tcmalloc(tmp_path, "", preload="/other.so", shell=shell) == (0, "/other.so", "")  # TCMALLOC= : none


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_recipes_reject_a_missing_allocator(tmp_path, shell):
    code, preload, err = source_tcmalloc(tmp_path, str(tmp_path / "missing.so"), shell=shell)
    assert code == 2 and "missing.so: no such file" in err and preload == ""


def test_predictions_come_back_in_the_files_order(small_demo_model):
    """Evaluation runs on length-sorted batches; the predictions file is in the validation set's own order (line i
    translates source i), as the exact-match score of a model that learned the task shows line by line."""
    from vanilla_transformer.data import make_demo_translation

    pairs = make_demo_translation(200, seed=43, max_length=10)["translation"]  # the demo's validation split (seed+1)
    lines = (small_demo_model / "generated_predictions_validation.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 200
    assert sum(line == pair["tgt"] for line, pair in zip(lines, pairs)) >= 190
