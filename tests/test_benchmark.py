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
        "peak_rss_mb_reference", "mfu_ours"}


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
        assert 0 < row["mfu_ours"] < 1
