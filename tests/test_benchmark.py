"""Regression guard for scripts/benchmark.py: the quick run completes and its results file is complete and
consistent (no timing assertion: speed is measured by the benchmark itself, not by tests). Every case: VT_SLOW=1."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from vanilla_transformer.training.precision import native_bf16

try:
    import ctranslate2  # noqa: F401  (present or not)

    CTRANSLATE2 = True
except ImportError:
    CTRANSLATE2 = False

KEYS = {
    "task",
    "preset",
    "dtype",
    "engine",
    "compute_type",
    "dropout",
    "ours",
    "reference",
    "reference_name",
    "unit",
    "ratio",
    "reference_ctranslate2",
    "ratio_ctranslate2",
    "peak_rss_mb_ours",
    "peak_rss_mb_reference",
    "peak_tensor_mb_ours",
    "peak_tensor_mb_reference",
    "mfu_ours",
    "us_per_token_ours",
    "us_per_token_reference",
}


def quick_benchmark(tmp_path, *extra):
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "benchmark.py"), "--quick", "--output", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert proc.stdout.count("rounds: ours") == len(rows)  # each case prints its spread across rounds
    for row in rows:
        assert set(row) == KEYS
        assert row["preset"] == "tiny" and row["dropout"] == 0.0
        assert row["ours"] > 0 and row["reference"] > 0
        assert row["engine"] == ("pytorch" if row["compute_type"] is None else "ctranslate2")
        assert row["unit"] == ("sentences/s" if row["task"] in ("greedy", "beam") else "tokens/s")
        assert row["peak_rss_mb_ours"] > 50 and row["peak_rss_mb_reference"] > 50
        sides = ("ours", "reference")
        if row["engine"] == "ctranslate2":  # also against Marian served by CTranslate2; its memory is not torch's
            assert row["reference_ctranslate2"] > 0 and row["peak_tensor_mb_ours"] is None
            sides = ("reference",)
        else:
            assert row["reference_ctranslate2"] is None
        for side in sides:  # tensors of one repetition: something, and less than the whole process
            assert 0 < row[f"peak_tensor_mb_{side}"] < row[f"peak_rss_mb_{side}"]
        assert 0 < row["mfu_ours"] < 1
        if row["task"] in ("greedy", "beam"):  # 32 new tokens per sentence (one round: the same run's numbers)
            assert row["us_per_token_ours"] == pytest.approx(1e6 / (row["ours"] * 32), rel=1e-9)
        else:
            assert row["us_per_token_ours"] is None and row["us_per_token_reference"] is None
    return {(r["task"], r["dtype"], r["reference_name"], r["compute_type"]) for r in rows}, proc.stdout


def test_quick_benchmark_beam_cases(tmp_path):
    """The default suite's guard: the beam cases only (PyTorch, and CTranslate2 int8 where it is installed)."""
    cases, _ = quick_benchmark(tmp_path, "--tasks", "beam", "--compute_types", "int8")
    assert cases == {("beam", "fp32", "MarianMTModel", None)} | (
        {("beam", "fp32", "MarianMTModel", "int8")} if CTRANSLATE2 else set()
    )


@pytest.mark.slow
def test_quick_benchmark_every_case(tmp_path):
    cases, stdout = quick_benchmark(tmp_path)
    bf16 = {("train", "bf16", "MarianMTModel", None), ("greedy", "bf16", "MarianMTModel", None)}
    ct2 = {
        (task, "fp32", "MarianMTModel", compute_type)
        for task in ("greedy", "beam")
        for compute_type in ("float32", "int8")
    }
    assert cases == {
        ("train", "fp32", "MarianMTModel", None),
        ("greedy", "fp32", "MarianMTModel", None),
        ("beam", "fp32", "MarianMTModel", None),
        ("train", "fp32", "BartForConditionalGeneration", None),
        ("greedy", "fp32", "BartForConditionalGeneration", None),
        ("token_classification", "fp32", "BertForTokenClassification", None),
    } | (bf16 if native_bf16("cpu") else set()) | (ct2 if CTRANSLATE2 else set())
    # bf16 cases are skipped exactly where bf16 matrix products are not native (and the run says so)
    assert ("bf16 cases skipped" in stdout) == (not native_bf16("cpu"))


def test_tensor_peak_counts_what_one_step_holds_at_once():
    import torch

    from benchmarks.common import tensor_peak_mb

    weight = torch.ones(2**18)  # 1 MB, allocated before: not counted, nor are its views

    def step(keep: bool):
        a = weight * 2  # 1 MB
        b = (a + 1).view(4, -1)  # 1 MB; a view shares it
        kept = a if keep else None
        del a
        c = torch.cat([b.flatten(), weight[: 2**17]])  # 1.5 MB while b (and kept) live
        return c.sum() + weight.view(2, -1).sum(), kept

    assert tensor_peak_mb(lambda: step(keep=False)) == pytest.approx(2.5, abs=0.01)
    assert tensor_peak_mb(lambda: step(keep=True)) == pytest.approx(3.5, abs=0.01)


@pytest.mark.parametrize("name", ["ours", "marian", "bart", "bert"])
def test_dropout_acts_in_every_model_in_training(name):
    """--dropout reaches each library's model: two training-mode forward passes differ with it, agree without it."""
    import torch

    from benchmarks.common import build, shape_of

    ids = torch.randint(4, 100, (2, 6))
    inputs = dict(input_ids=ids) if name == "bert" else dict(input_ids=ids, decoder_input_ids=ids)
    for dropout in (0.0, 0.1):
        model = build(name, shape_of("tiny"), dropout).train()
        first, second = model(**inputs).logits, model(**inputs).logits
        assert torch.equal(first, second) == (dropout == 0.0)


def test_device_benchmark_runs_every_case_on_the_cpu(tmp_path):
    """The GPU benchmark's code (`--device cuda`) on the CPU with a tiny shape: ours and Marian in training, greedy in
    PyTorch and CTranslate2; a spent time budget skips and lists the rest."""
    from benchmarks.common import datasheet_peak
    from benchmarks.training import device_benchmark

    out = tmp_path / "gpu.json"
    compute_types = ["int8"] if CTRANSLATE2 else []
    assert (
        device_benchmark(
            "cpu", ["tiny"], [False], 300, 2, 6, 10, compute_types, float("inf"), str(out), tasks=("train", "greedy")
        )
        == 0
    )
    result = json.loads(out.read_text())
    assert result["device"] == "CPU" and result["datasheet_tflops"] is None and result["skipped"] == []
    assert [(r["model"], r["preset"], r["compiled"]) for r in result["training"]] == [
        ("ours", "tiny", False),
        ("marian", "tiny", False),
    ]
    for row in result["training"]:
        assert row["tokens_per_second"] > 0 and row["mfu"] is None and 0 < row["matmul_fraction"]
    cases = {r["case"]: r for r in result["inference"]}
    assert set(cases) == {"ours pytorch bfloat16", "marian pytorch bfloat16"} | (
        {"ours ctranslate2 int8", "marian ctranslate2 int8"} if CTRANSLATE2 else set()
    )
    assert cases["marian pytorch bfloat16"]["ratio_to_marian_pytorch"] == 1.0
    assert (
        device_benchmark(
            "cpu", ["tiny"], [False], 300, 2, 64, 10, [], float("inf"), str(out), tasks=("lengths",), steps=3
        )
        == 0
    )
    rows = {row["case"]: row for row in json.loads(out.read_text())["lengths"]}
    assert list(rows) == [
        "ours --max_tokens 128",
        "ours --packing 128",
        "marian grouped batches 128",
        "marian random batches 128",
        "marian --max_tokens 128",
    ]
    for row in rows.values():
        assert row["tokens_per_second"] > 0 and 0 <= row["padding"] < 1
    assert rows["ours --packing 128"]["shapes"] == 1 and rows["ours --max_tokens 128"]["shapes"] > 1
    # token budgets pad least, random sentence batches most (the lengths of a natural corpus)
    assert (
        rows["ours --max_tokens 128"]["padding"]
        < rows["marian grouped batches 128"]["padding"]
        < rows["marian random batches 128"]["padding"]
    )
    # "dynamic" compiles only the natural-length cases: the fixed-length training cases stay eager
    assert (
        device_benchmark(
            "cpu", ["tiny"], [False, "dynamic"], 300, 2, 6, 10, [], float("inf"), str(out), tasks=("train",)
        )
        == 0
    )
    assert [row["compiled"] for row in json.loads(out.read_text())["training"]] == [False, False]
    assert device_benchmark("cpu", ["tiny"], [False], 300, 2, 6, 10, [], 0.0, str(out), tasks=("train",)) == 0
    assert json.loads(out.read_text())["skipped"] == [dict(task="train", preset="tiny", compiled=False)]
    assert datasheet_peak("NVIDIA H100 80GB HBM3") == 989.4e12 and datasheet_peak("NVIDIA H100 PCIe") == 756e12
    assert datasheet_peak("NVIDIA H200") == 989.4e12 and datasheet_peak("Tesla T4") is None


def test_device_cuda_without_a_gpu_is_a_usage_error():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present")
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "benchmark.py"), "--device", "cuda"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and "--device cuda: PyTorch sees no CUDA GPU" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_corpus_case_trains_from_the_cache_and_from_a_stream(tmp_path):
    """--corpus: a recombined corpus trained on an empty cache, on the cache and streamed; every figure present."""
    from benchmarks.corpus import corpus_report

    words = ["haus", "katze", "hund", "baum", "auto", "mann", "frau", "kind"]
    lines = [" ".join(words[(i + k) % 8] for k in range(2 + i % 6)) for i in range(200)]
    (tmp_path / "src.de").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "src.en").write_text("\n".join(line.upper() for line in lines) + "\n", encoding="utf-8")
    [row] = corpus_report(str(tmp_path / "src"), "de", "en", [400], str(tmp_path / "work"), max_tokens=256, steps=2)
    assert len((tmp_path / "work" / "400" / "train.de").read_text().splitlines()) == 400
    for run in ("first", "cached", "streaming"):
        assert row[f"{run}_to_first_step_s"] > 0 and row[f"{run}_peak_rss_anon_mb"] > 0
        assert row[f"{run}_metrics"]["train_tokens_per_second"] > 0
    assert row["first_metrics"]["train_samples"] == 400 and "train_samples" not in row["streaming_metrics"]


@pytest.mark.slow
def test_tagging_engines_case(tmp_path):
    """`--tasks tagging-engines`: PyTorch and both ONNX Runtime exports, each in its own process, at batches of 1 and
    32; the float32 export's tags are PyTorch's."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    out = tmp_path / "tagging.json"
    proc = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "scripts", "benchmark.py"),
            "--tasks",
            "tagging-engines",
            "--rounds",
            "1",
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert {(r["engine"], r["batch"]) for r in rows} == {
        (e, b) for b in (1, 32) for e in ("pytorch float32", "onnxruntime float32", "onnxruntime int8")
    }
    assert all(r["sentences_per_second"] > 0 for r in rows)
    assert all(r["same_tags"] == 1.0 for r in rows if r["engine"] != "onnxruntime int8")


def test_tagging_batches_case(tmp_path):
    """`--tasks tagging-batches`: both ways at 1, 8, 16 and 32 mixed-length sentences a call, the same tags."""
    from benchmarks.tagging import tagging_batches_benchmark

    rows = tagging_batches_benchmark(str(tmp_path / "batches.json"), reps=2, rounds=1)
    assert {(r["batch"], r["batching"]) for r in rows} == {
        (b, w) for b in (1, 8, 16, 32) for w in ("one padded batch", "length-cut batches")
    }
    assert all(r["sentences_per_second"] > 0 and r["same_tags"] for r in rows)
    assert json.loads((tmp_path / "batches.json").read_text()) == rows
