"""transformers' own example scripts fine-tune our saved models with `--trust_remote_code`, in a process where this
package cannot be imported (what a transformers user without it has): `examples/pytorch/translation/run_translation.py`
continues training a translation model, `examples/pytorch/token-classification/run_ner.py` a tagger (CRF and
auxiliary heads) on its own label set and on a new one (`--ignore_mismatched_sizes`); a tagger given to the
translation script is refused, naming what to load it with.

Opt-in: set VT_TRANSFORMERS to a transformers checkout (or its bare git directory). The two scripts are read from there
into a temporary directory, never into this repository. The Hub's `sacrebleu` and `seqeval` metric scripts cannot be
downloaded offline: the scripts' `evaluate.load` finds this package's own metric modules (the same keys) under those
names in their working directory.
"""

import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from conftest import BLOCK_PACKAGE, NER_SENTENCES, files_of_checkout, ner_args, translation_args, write_parallel
from vanilla_transformer.commands import train_ner, train_translation
from vanilla_transformer.evaluation import METRICS_DIR

SOURCE = os.environ.get("VT_TRANSFORMERS")
pytestmark = pytest.mark.skipif(
    not SOURCE, reason="set VT_TRANSFORMERS to a transformers checkout to run its example scripts against our models"
)
SCRIPTS = {"run_translation.py": "examples/pytorch/translation", "run_ner.py": "examples/pytorch/token-classification"}
# Runs the script named first in argv as `python SCRIPT ARGS...` would, with our package unimportable.
WITHOUT_PACKAGE = (
    BLOCK_PACKAGE + "import runpy, sys\nsys.argv = sys.argv[1:]\nrunpy.run_path(sys.argv[0], run_name='__main__')\n"
)


@pytest.fixture
def workdir(tmp_path):
    """A working directory holding the two scripts and the metric modules their `evaluate.load` asks for."""
    work = tmp_path / "work"
    work.mkdir()
    for script, folder in SCRIPTS.items():
        (work / script).write_text(files_of_checkout(SOURCE, folder)[script], encoding="utf-8")
    for hub_name, ours in (("sacrebleu", "bleu_chrf"), ("seqeval", "seqeval_f1")):
        (work / hub_name).mkdir()
        with open(os.path.join(METRICS_DIR, ours, f"{ours}.py"), encoding="utf-8") as f:
            (work / hub_name / f"{hub_name}.py").write_text(f.read(), encoding="utf-8")
    return work


def run_example(workdir, script, *argv):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_CACHE=str(workdir / "datasets"))
    return subprocess.run(
        [
            sys.executable,
            "-c",
            WITHOUT_PACKAGE,
            script,
            "--trust_remote_code",
            "--report_to",
            "none",
            "--max_steps",
            "4",
            "--per_device_train_batch_size",
            "8",
            "--do_train",
            "--do_eval",
            *argv,
        ],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def write_json_lines(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def test_run_translation_continues_training_a_saved_model(workdir, tmp_path):
    data = write_parallel(tmp_path)
    model = tmp_path / "mt"
    train_translation.main(translation_args(data, model, "--do_train", "--do_eval", "false", "--do_predict", "false"))
    files = {}
    for split in ("train", "validation"):
        pairs = zip(*(open(data / f"{split}.{lang}", encoding="utf-8").read().splitlines() for lang in ("de", "en")))
        files[split] = write_json_lines(
            tmp_path / f"{split}.json", [{"translation": {"de": de, "en": en}} for de, en in pairs]
        )
    out = tmp_path / "finetuned"
    proc = run_example(
        workdir,
        "run_translation.py",
        "--model_name_or_path",
        str(model),
        "--source_lang",
        "de",
        "--target_lang",
        "en",
        "--train_file",
        files["train"],
        "--validation_file",
        files["validation"],
        "--predict_with_generate",
        "--generation_max_length",
        "12",
        "--output_dir",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads((out / "all_results.json").read_text())
    assert 0 <= results["eval_bleu"] <= 100 and results["train_loss"] > 0, results
    assert "trust_remote_code" not in proc.stdout + proc.stderr  # (no prompt: the flag was honoured throughout)
    before, after = load_file(model / "model.safetensors"), load_file(out / "model.safetensors")
    assert before.keys() == after.keys() and any(not torch.equal(before[k], after[k]) for k in before)


def test_run_ner_fine_tunes_a_tagger_on_its_labels_and_on_new_ones(workdir, tmp_path):
    model = tmp_path / "tagger"
    train_ner.main(
        ner_args(
            tmp_path,
            model,
            "--config_overrides",
            "use_crf=true",
            "--auxiliary_columns",
            "true",
            "--do_train",
            "--do_eval",
            "false",
            "--do_predict",
            "false",
        )
    )
    config = json.loads((model / "config.json").read_text())
    original = load_file(model / "model.safetensors")
    renamed = {"PER": "PERSON", "LOC": "PLACE"}
    for label_set, mapping in (("same", {}), ("new", renamed)):
        rows = [
            {"tokens": words, "ner_tags": [t if t == "O" else t[:2] + mapping.get(t[2:], t[2:]) for t in tags]}
            for words, tags in NER_SENTENCES * 10
        ]
        train = write_json_lines(tmp_path / f"{label_set}.json", rows)
        out = tmp_path / f"finetuned-{label_set}"
        extra = ["--ignore_mismatched_sizes"] if mapping else []
        proc = run_example(
            workdir,
            "run_ner.py",
            "--model_name_or_path",
            str(model),
            "--train_file",
            train,
            "--validation_file",
            train,
            "--output_dir",
            str(out),
            *extra,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert 0 <= json.loads((out / "all_results.json").read_text())["eval_f1"] <= 1
        saved, weights = json.loads((out / "config.json").read_text()), load_file(out / "model.safetensors")
        labels = sorted({t for row in rows for t in row["ner_tags"]})
        assert sorted(saved["label2id"]) == labels and saved["use_crf"] is True
        assert weights["crf.transitions"].shape == (len(labels), len(labels))
        assert saved["auxiliary_num_labels"] == config["auxiliary_num_labels"]
        auxiliary = [k for k in original if k.startswith("auxiliary_classifiers.")]
        assert auxiliary and all(weights[k].shape == original[k].shape for k in auxiliary)
    assert sorted(config["label2id"]) != labels  # (the second label set was a new one)


def test_a_tagger_given_to_the_translation_example_is_refused(workdir, tmp_path):
    model = tmp_path / "tagger"
    train_ner.main(ner_args(tmp_path, model, "--do_train", "--do_eval", "false", "--do_predict", "false"))
    data = write_json_lines(tmp_path / "pairs.json", [{"translation": {"de": "Ein Hund.", "en": "A dog."}}] * 8)
    proc = run_example(
        workdir,
        "run_translation.py",
        "--model_name_or_path",
        str(model),
        "--source_lang",
        "de",
        "--target_lang",
        "en",
        "--train_file",
        data,
        "--validation_file",
        data,
        "--output_dir",
        str(tmp_path / "out"),
    )
    assert proc.returncode != 0
    assert "VanillaTransformerForTokenClassification, which has no decoder" in proc.stderr
    assert not (tmp_path / "out" / "model.safetensors").exists()
