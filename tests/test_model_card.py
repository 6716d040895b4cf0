"""The model card: the command it records runs as written, the hardware line names the processor and dtype, and the
licence metadata follows the training data."""

import json
import shlex
import sys
from types import SimpleNamespace

import pytest
import torch
from huggingface_hub import ModelCard

from vanilla_transformer import model_card
from vanilla_transformer.model_card import describe_hardware, invoked_command, render_card, write_card_info


@pytest.fixture
def argv0(monkeypatch):
    def set_program(program):
        monkeypatch.setattr(sys, "argv", [program, "--ignored"])

    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    return set_program


def test_console_command_is_recorded_as_typed(argv0):
    argv0("vanilla-transformer train-translation")  # what cli.dispatch sets
    command = invoked_command(["--output_dir", "out dir", "--config_overrides", "dropout=0.3"])
    assert command == "vanilla-transformer train-translation --output_dir 'out dir' --config_overrides dropout=0.3"
    assert shlex.split(command)[3] == "out dir"


def test_script_is_recorded_with_python_and_a_relative_path(argv0, tmp_path, monkeypatch):
    (tmp_path / "scripts").mkdir()
    monkeypatch.chdir(tmp_path)
    argv0(str(tmp_path / "scripts" / "run_ner.py"))
    assert invoked_command(["--do_train"]) == "python scripts/run_ner.py --do_train"


def test_several_processes_are_recorded_with_torchrun(argv0, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    argv0("scripts/run_translation.py")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert invoked_command(["--max_tokens", "4096"]) == (
        "torchrun --nproc_per_node 2 --nnodes 2 scripts/run_translation.py --max_tokens 4096"
    )


def test_secrets_and_absolute_paths_are_not_recorded(argv0, tmp_path, monkeypatch):
    """The value of every flag naming a secret is redacted (both spellings, `--max_tokens` is no secret); an absolute
    path is relative inside the current directory, a placeholder outside it; `python -m` is recorded as typed."""
    from vanilla_transformer import run_translation  # the module `python -m` runs

    monkeypatch.chdir(tmp_path)
    argv0(run_translation.__file__)
    command = invoked_command(
        [
            "--hub_token",
            "hf_abc",
            "--api_key=k",
            "--max_tokens",
            "4096",
            "--train_file",
            str(tmp_path / "data" / "train"),
            "--validation_file=/srv/corpora/wmt/valid",
        ]
    )
    assert command == (
        "python -m vanilla_transformer.run_translation --hub_token '<HUB_TOKEN>' '--api_key=<API_KEY>' "
        "--max_tokens 4096 --train_file data/train --validation_file=.../wmt/valid"
    )


def test_hardware_names_the_cpu_cores_and_dtype(monkeypatch):
    monkeypatch.setattr(model_card, "cpu_name", lambda: "Example CPU 9000")
    args = SimpleNamespace(bf16=True, fp16=False, world_size=1, device=torch.device("cpu"))
    line = describe_hardware(args)
    assert line.startswith("Example CPU 9000, ") and line.endswith(", bf16 autocast")
    assert f"{torch.get_num_threads()} threads per process" in line
    two = describe_hardware(SimpleNamespace(bf16=False, fp16=False, world_size=2, device=torch.device("cpu")))
    assert two.endswith("2 processes, fp32")


def test_cpu_name_reads_the_processor_model():
    name = model_card.cpu_name()
    assert name and name != "unknown CPU"
    try:
        cpuinfo = open("/proc/cpuinfo", encoding="utf-8").read()
    except OSError:
        return
    assert f": {name}" in cpuinfo


@pytest.mark.parametrize(
    "dataset, licence, link_part, words",
    [
        ("multi30k", "other", "multi30k/dataset", "non-commercial"),
        ("conll2003", "other", "conll2003", "Reuters"),
        ("split + multi30k", "other", "multi30k", "Flickr"),
        ("wmt14-en-de", "other", "statmt.org/wmt14", "Europarl"),
        ("demo", "apache-2.0", None, "synthetic"),
        ("my-corpus", "other", None, "my-corpus: the weights carry that data's terms"),
    ],
)
def test_licence_follows_the_training_data(tmp_path, dataset, licence, link_part, words):
    (tmp_path / "config.json").write_text(json.dumps({"d_model": 8}))
    write_card_info(
        str(tmp_path), "translation", dataset, 10, "vanilla-transformer train-translation", languages=["de", "en"]
    )
    card = render_card(str(tmp_path), "me/model")
    assert card.data.license == licence
    if link_part:
        assert link_part in card.data.license_link
    else:
        assert card.data.get("license_link") is None
    assert words in card.text and "the code is Apache-2.0" in card.text
    assert "vanilla-transformer train-translation" in ModelCard.load(tmp_path / "README.md").text
