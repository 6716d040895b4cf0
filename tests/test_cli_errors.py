"""A user's mistake on the command line ends with one `error:` line naming the culprit and exit status 2, never a
Python trace; `--debug` shows the trace."""

import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

from conftest import ROOT
from vanilla_transformer import (
    VanillaTransformerConfig,
    VanillaTransformerForConditionalGeneration,
    VanillaTransformerForTokenClassification,
)
from vanilla_transformer.cli import main as cli
from vanilla_transformer.tokenization import train_tokenizer


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Broken inputs of every kind, in one folder."""
    d = tmp_path_factory.mktemp("mistakes")
    (d / "pairs.tsv").write_text("Hallo\tHello\nJa\tYes\nkein Tab hier\n", encoding="utf-8")
    (d / "empty").mkdir()
    for step, size in (("checkpoint-1", 4), ("checkpoint-2", 5)):  # checkpoints of different shapes
        (d / "run" / step).mkdir(parents=True)
        save_file({"w": torch.zeros(size)}, str(d / "run" / step / "model.safetensors"))
    VanillaTransformerForTokenClassification(
        VanillaTransformerConfig.from_preset("tiny", num_labels=3)
    ).save_pretrained(d / "tagger")
    (d / "conll.txt").write_text("EU B-ORG\nrejects O\n\nbad line without tag\n", encoding="utf-8")
    translator = VanillaTransformerForConditionalGeneration(VanillaTransformerConfig.from_preset("tiny"))
    translator.save_pretrained(d / "reshaped")
    train_tokenizer(["ab cd ef", "gh ij"], vocab_size=40).save_pretrained(d / "reshaped")
    state = load_file(str(d / "reshaped" / "model.safetensors"))
    state[next(k for k in state if k.endswith("fc1.weight"))] = torch.zeros(3, 3)  # a tensor of another shape
    save_file(state, str(d / "reshaped" / "model.safetensors"), metadata={"format": "pt"})
    translator.save_pretrained(d / "badcard")
    (d / "badcard" / "README.md").write_text("---\nlanguage: [de, en\n---\n# A card\n", encoding="utf-8")
    (d / "example_flags.json").write_text(json.dumps({"output_dir": str(d / "out"), "overwrite_cache": True}))
    return d


def run(capsys, argv):
    """(exit status, stderr) of `vanilla-transformer ARGV` in this process; argparse's own exits included."""
    try:
        status = cli(argv)
    except SystemExit as exit_:
        status = exit_.code
    return status, capsys.readouterr().err


CASES = [  # (argv with {d} for the folder of broken inputs, what stderr must name)
    (
        "train-translation --train_file {d}/pairs.tsv --source_lang de --target_lang en --output_dir {d}/out",
        "pairs.tsv, line 3",
    ),
    (
        "train-translation --train_file {d}/missing.tsv --source_lang de --target_lang en --output_dir {d}/out",
        "missing.tsv",
    ),
    ("train-translation --num_beams 0 --output_dir {d}/out", "--num_beams must be at least 1, got 0"),
    ("train-translation --demo_min_length 9 --demo_max_length 3 --output_dir {d}/out", "--demo_min_length 9"),
    ("train-translation --max_source_lenght 64 --output_dir {d}/out", "--max_source_lenght"),
    ("train-translation --model_name_or_path {d}/empty --output_dir {d}/out", "empty"),
    ("train-translation --attn_implementation flex_attention --output_dir {d}/out", "trains on GPUs only"),
    ("train-ner --mention_replacement 1.5 --output_dir {d}/out", "--mention_replacement must lie between 0 and 1"),
    ("train-ner --context_words -1 --output_dir {d}/out", "--context_words must not be negative"),
    ("train-ner --eval_max_tokens 0 --output_dir {d}/out", "--eval_max_tokens must be at least 1, got 0"),
    (
        "train-translation --eval_max_tokens 2 --do_eval --demo_train_examples 50 --demo_eval_examples 5 "
        "--output_dir {d}/out",
        "--eval_max_tokens 2 is below evaluation example 0's length",
    ),
    ("train-ner --train_file {d}/conll.txt --validation_file {d}/conll.txt --output_dir {d}/out", "conll.txt"),
    ("pretrain-encoder --mlm_probability 0 --output_dir {d}/out", "--mlm_probability"),
    ("average-checkpoints {d}/empty --output_dir {d}/avg", "No checkpoint-* directory"),
    ("average-checkpoints {d}/run --last 2 --output_dir {d}/avg", "has shape (5,), not (4,)"),
    ("average-checkpoints {d}/run --last 0 --output_dir {d}/avg", "--last must be at least 1"),
    ("translate {d}/missing --input -", "no such directory: "),
    ("translate {d}/tagger --input -", "not a translation model"),
    ("translate {d}/tagger --num_beams 0", "argument --num_beams: must be at least 1, got 0"),
    ("translate {d}/tagger --batch_size x", "argument --batch_size: not an integer: 'x'"),
    ("export-ctranslate2 {d}/tagger {d}/ct2", "not a translation model"),
    ("plot curves {d}/empty", "trainer_state.json not found"),
    ("plot attention {d}/missing abc", "missing"),
    ("demo {d}/missing", "no such directory: "),
    ("demo {d}/tagger", "not a translation model"),
    ("demo {d}/tagger --port 70000", "not a port number"),
    ("push {d}/empty me/model", "config.json is missing"),
    (
        "train-translation --source_prefix x --output_dir {d}/out",
        "--source_prefix (a flag of transformers' examples) is not taken here: it is T5's task prefix",
    ),
    ("train-ner --return_entity_level_metrics true --output_dir {d}/out", "scores of each entity type are always"),
    (
        "train-translation --overwrite_cache --output_dir {d}/out",
        "--overwrite_cache (a flag of transformers' "
        "examples) is not taken here: the Arrow caches of local files are rebuilt",
    ),
    ("train-ner {d}/example_flags.json", "--overwrite_cache (a flag of transformers' examples) is not taken here"),
    ("translate {d}/tagger --threads -1", "argument --threads: must be at least 0, got -1"),
    ("serve {d}/tagger --workers -2", "--workers '-2': must be at least 0, got -2"),
    ("serve {d}/tagger --port 0", "not a port number"),
    ("serve {d}/tagger --request_timeout nan", "--request_timeout 'nan': not a number"),
    ("serve {d}/tagger --file_ttl 0", "--file_ttl '0': must be more than 0"),
    ("serve {d}/tagger --char-limit -5", "--char-limit '-5': must be at least -1, got -5"),
    ("plot positions --d_model 0", "argument --d_model: must be at least 1, got 0"),
    ("translate {d}/reshaped --input -", "reshaped/model.safetensors holds tensors whose shapes do not match"),
    ("serve {d}/badcard", "badcard/README.md is damaged: its metadata block is not a YAML mapping"),
]


@pytest.mark.parametrize("command,culprit", CASES, ids=[c.split()[0] + "-" + str(i) for i, (c, _) in enumerate(CASES)])
def test_mistakes_end_in_one_error_line(files, capsys, command, culprit):
    status, err = run(capsys, command.format(d=files).split())
    assert status == 2, err
    assert culprit in err, err
    assert "Traceback" not in err
    assert "error: " in err.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def exported(small_demo_model, tmp_path_factory):
    pytest.importorskip("ctranslate2")
    from vanilla_transformer.deploy.ctranslate2 import export_ctranslate2

    return export_ctranslate2(small_demo_model, tmp_path_factory.mktemp("ct2") / "model")


@pytest.mark.parametrize(
    "name,damage",
    [
        ("model.bin", lambda p: open(p, "r+b").truncate(os.path.getsize(p) // 2)),
        ("config.json", lambda p: p.write_text('{"bos_token": ')),
        ("shared_vocabulary.json", lambda p: p.write_text('["<pad>", ')),
        ("tokenizer.json", lambda p: p.write_text('{"version": ')),  # read by `tokenizers` itself: named by us first
        ("tokenizer.json", lambda p: p.unlink()),
        ("tokenizer_config.json", lambda p: p.write_text('["not", "an", "object"]')),
        ("config.json", lambda p: p.write_text("[1, 2]")),
    ],
)
def test_damaged_ctranslate2_export_names_the_file(exported, tmp_path, capsys, name, damage):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(exported, broken)
    damage(broken / name)
    status, err = run(capsys, ["translate", str(broken), "--input", os.devnull])
    assert status == 2 and str(broken / name) in err and "Traceback" not in err
    if name != "config.json":
        assert "export the model again" in err
        found = ("is truncated or corrupted", "is damaged") if (broken / name).exists() else ("is missing",)
        assert any(words in err for words in found), err


@pytest.mark.parametrize("name", ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"])
@pytest.mark.parametrize("damage", ['{"a": ', "[1, 2]"], ids=["truncated", "not-an-object"])
def test_damaged_saved_model_files_are_named(files, tmp_path, capsys, name, damage):
    """Every JSON file of a saved model, truncated or holding something other than an object, is one error line naming
    it (transformers would trace, or ignore a damaged generation config and decode with its defaults)."""
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(files / "reshaped", broken)
    shutil.copy(files / "badcard" / "model.safetensors", broken / "model.safetensors")  # (whole weights)
    (broken / name).write_text(damage, encoding="utf-8")
    status, err = run(capsys, ["translate", str(broken), "--engine", "pytorch", "--input", os.devnull])
    assert status == 2 and str(broken / name) in err and "Traceback" not in err, err


def test_the_console_command_prints_no_trace_unless_debug(files):
    """The installed entry point: one line and status 2; with --debug (or VT_DEBUG=1) the trace for a bug report."""
    argv = [
        sys.executable,
        "-m",
        "vanilla_transformer.cli",
        "average-checkpoints",
        str(files / "run"),
        "--last",
        "2",
        "--output_dir",
        str(files / "avg"),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    plain = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    assert plain.stderr.strip().splitlines()[-1].startswith("vanilla-transformer average-checkpoints: error: ")
    for debug_argv, debug_env in (
        (argv[:3] + ["--debug"] + argv[3:], env),
        (argv + ["--debug"], env),
        (argv, {**env, "VT_DEBUG": "1"}),
    ):
        debug = subprocess.run(debug_argv, capture_output=True, text=True, cwd=ROOT, env=debug_env, timeout=300)
        assert debug.returncode == 1 and "Traceback" in debug.stderr and "has shape (5,)" in debug.stderr


@pytest.mark.parametrize(
    "module,argv,named,program",
    [
        (
            "vanilla_transformer.run_translation",
            ["--max_source_length", "0", "--output_dir", "out"],
            "--max_source_length must be at least 1, got 0",
            "python -m vanilla_transformer.run_translation",
        ),
        (
            "vanilla_transformer.run_ner",
            ["--train_file", "/no/such.conll", "--do_train", "--output_dir", "out"],
            "/no/such.conll: file not found",
            "python -m vanilla_transformer.run_ner",
        ),
        (
            "vanilla_transformer",
            ["average-checkpoints", "/no/such/run", "--output_dir", "x"],
            "no such directory",
            "vanilla-transformer average-checkpoints",
        ),
    ],
)
def test_python_m_launches_answer_a_mistake_with_one_line(module, argv, named, program, tmp_path):
    """`python -m vanilla_transformer.run_*` (what torchrun -m runs) and `python -m vanilla_transformer COMMAND` end a
    user's mistake as the console command does: one error line naming it, exit status 2, no trace."""
    proc = subprocess.run(
        [sys.executable, "-m", module, *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{program}: error: ") and named in last, last


def test_a_bug_keeps_its_trace(monkeypatch, files):
    """Errors that are not a user's mistake (here a TypeError from inside a command) are not turned into a line."""
    from vanilla_transformer.commands import average_checkpoints

    def broken(*args, **kwargs):
        raise TypeError("a bug")

    monkeypatch.setattr(average_checkpoints, "average", broken)
    with pytest.raises(TypeError, match="a bug"):
        cli(["average-checkpoints", str(files / "run"), "--last", "2", "--output_dir", str(files / "avg")])
    assert json.dumps(CASES)  # the table stays plain data


@pytest.mark.parametrize("argv", [["serve", ""], ["translate", "", "--input", os.devnull], ["serve", "", "--ner", ""]])
def test_an_empty_model_path_is_named_not_sent_to_the_hub(capsys, argv):
    """An empty model path (an unset shell variable) is one error line saying so, not the Hub's refusal of '' as a
    repository name."""
    status, err = run(capsys, argv)
    assert status == 2 and err.strip().splitlines()[-1].endswith(
        (
            "no such directory: '' (an empty path).",
            "is not a saved tagger (VanillaTransformerForTokenClassification: a config.json naming it).",
        )
    ), err
