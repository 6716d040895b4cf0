"""The paper's Table 3 on Multi30k (recipes/ablations.sh, recipes/ablations.py): every row is a valid change of the
recipe's model, the rows near the noise get their second seed, and docs/results.md's table is the one the kept
runs (docs/recipe-runs/ablations/) render."""

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

spec = importlib.util.spec_from_file_location("ablations", os.path.join(ROOT, "recipes", "ablations.py"))
ablations = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ablations)
KEPT = os.path.join(ROOT, "docs", "recipe-runs", "ablations")


def test_each_row_changes_the_recipe_s_model_with_real_fields_and_flags():
    from vanilla_transformer.commands.train_translation import build_parser
    from vanilla_transformer.training.arguments import parse_config_overrides

    recipe = "normalize_before=true,dropout=0.2,attention_dropout=0.1"
    assert recipe in open(os.path.join(ROOT, "recipes", "multi30k.sh"), encoding="utf-8").read()
    flags = set(re.findall(r"--\w+", build_parser().format_help()))
    names = [row.name for row in ablations.ROWS]
    assert len(names) == len(set(names)) and names[0] == "recipe"
    for row in ablations.ROWS[1:]:
        changed = parse_config_overrides(f"{recipe},{row.overrides}")
        assert row.overrides or row.flags, row
        assert changed != parse_config_overrides(recipe) or row.flags, row
        assert set(re.findall(r"--\w+", row.flags)) <= flags, row


def fake_runs(tmp_path, bleus: dict) -> str:
    for (name, seed), bleu in bleus.items():
        folder = tmp_path / name / f"s{seed}"
        folder.mkdir(parents=True)
        run = {"eval_bleu": bleu, "train_wall_seconds": 300.0, "train_steps_per_second": 2.0}
        (folder / "all_results.json").write_text(json.dumps(run))
    return tmp_path


def test_rows_within_the_recipe_s_seed_spread_train_a_second_seed(tmp_path):
    runs = fake_runs(
        tmp_path,
        {("recipe", "42"): 20.0, ("recipe", "7"): 20.6, ("recipe", "1"): 20.3, ("heads-1", "42"): 18.0,
         ("heads-8", "42"): 20.5, ("post-ln", "42"): 0.4},
    )  # fmt: skip
    assert [row.name for row in ablations.second_seeds(runs)] == ["heads-8"]
    table = ablations.markdown(runs)
    assert "| 20.30 (20.00 / 20.60 / 20.30) |" in table
    assert "| -2.30 |" in table and "| +0.20 (noise) |" in table and "| -19.90 |" in table
    assert "heads-2" not in table and table.count("\n") == 2 + 4  # header, rule, the four rows with a run
    listed = subprocess.run(
        [sys.executable, os.path.join(ROOT, "recipes", "ablations.py"), "second-seeds", str(runs)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert listed.split("\t")[0] == "heads-8" and listed.strip().endswith("\t7")


@pytest.mark.skipif(not os.path.isdir(KEPT), reason="no kept ablation runs")
def test_the_results_page_s_table_is_the_kept_runs():
    results = open(os.path.join(ROOT, "docs", "results.md"), encoding="utf-8").read()
    assert ablations.markdown(ablations.Path(KEPT)) in results
    run = json.load(open(os.path.join(KEPT, "run.json"), encoding="utf-8"))
    assert run["command"] == "make ablations"
    assert "recipes/ablations.sh $(DATA) outputs/ablations" in open(os.path.join(ROOT, "Makefile")).read()
    assert os.path.isfile(os.path.join(ROOT, "docs", "images", "ablations.png"))
