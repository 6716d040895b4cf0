"""Regression guard for scripts/benchmark.py: the quick run completes and its results file is complete and
consistent (no timing assertion: speed is measured by the benchmark itself, not by tests)."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from vanilla_transformer.training import native_bf16

KEYS = {"task", "preset", "dtype", "ours", "reference", "reference_name", "unit", "ratio", "peak_rss_mb_ours",
        "peak_rss_mb_reference", "peak_tensor_mb_ours", "peak_tensor_mb_reference", "mfu_ours"}


def test_quick_benchmark_results_file(tmp_path):
    out = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "benchmark.py"), "--quick", "--output",
                           str(out)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(out.read_text())
    bf16 = {("train", "bf16", "MarianMTModel"), ("greedy", "bf16", "MarianMTModel")}
    assert {(r["task"], r["dtype"], r["reference_name"]) for r in rows} == {
        ("train", "fp32", "MarianMTModel"), ("greedy", "fp32", "MarianMTModel"), ("beam", "fp32", "MarianMTModel"),
        ("train", "fp32", "BartForConditionalGeneration"), ("greedy", "fp32", "BartForConditionalGeneration"),
        ("token_classification", "fp32", "BertForTokenClassification")} | (bf16 if native_bf16("cpu") else set())
    # bf16 cases are skipped exactly where bf16 matrix products are not native (and the run says so)
    assert ("bf16 cases skipped" in proc.stdout) == (not native_bf16("cpu"))
    assert proc.stdout.count("rounds: ours") == len(rows)  # each case prints its spread across rounds
    for row in rows:
        assert set(row) == KEYS
        assert row["preset"] == "tiny"
        assert row["ours"] > 0 and row["reference"] > 0
        assert row["ratio"] == pytest.approx(row["ours"] / row["reference"])
        assert row["unit"] == ("sentences/s" if row["task"] in ("greedy", "beam") else "tokens/s")
        assert row["peak_rss_mb_ours"] > 50 and row["peak_rss_mb_reference"] > 50
        for side in ("ours", "reference"):  # tensors of one repetition: something, and less than the whole process
            assert 0 < row[f"peak_tensor_mb_{side}"] < row[f"peak_rss_mb_{side}"]
        assert 0 < row["mfu_ours"] < 1


def test_tensor_peak_counts_what_one_step_holds_at_once():
    import torch

    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from benchmark import tensor_peak_mb

    weight = torch.ones(2**18)  # 1 MB, existing: not counted, nor are its views

    def step():
        a = weight * 2  # 1 MB
        b = (a + 1).view(4, -1)  # 1 MB; a view shares it
        del a
        c = torch.cat([b.flatten(), weight[:2**17]])  # 1.5 MB while b lives: peak 2.5 MB
        return c.sum() + weight.view(2, -1).sum()

    assert tensor_peak_mb(step, [weight]) == pytest.approx(2.5, abs=0.01)
    assert tensor_peak_mb(step, []) == pytest.approx(3.5, abs=0.01)  # not excluded, the weight's slice counts it
