"""The commands and the user's files: no input or finished model is ever written over, however its path is spelled;
no NaN or infinity is saved into a model; models combined agree; a local path is named as a path. Every refusal is
exit status 2 and one `error:` line naming both paths, and the user's files keep their bytes."""

import os

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

from vanilla_transformer import (
    VanillaTransformerConfig,
    VanillaTransformerForConditionalGeneration,
    VanillaTransformerForTokenClassification,
)
from vanilla_transformer.cli import main as cli
from vanilla_transformer.tokenization import train_tokenizer

TEXTS = ["ab cd ef", "gh ij", "ab gh", "cd ef ij"]


def run(capsys, argv):
    """(exit status, stderr) of `vanilla-transformer ARGV` in this process."""
    try:
        status = cli([str(a) for a in argv])
    except SystemExit as exit_:
        status = exit_.code
    return status, capsys.readouterr().err


def refused(capsys, argv, *named):
    """The command ends with exit status 2 and one error line (no trace) naming each of `named`; returns the line."""
    status, err = run(capsys, argv)
    lines = err.strip().splitlines()
    assert status == 2, err
    assert "Traceback" not in err and lines[-1].startswith("vanilla-transformer ") and ": error: " in lines[-1], err
    for name in named:
        assert str(name) in lines[-1], (name, lines[-1])
    return lines[-1]


def snapshot(*roots) -> dict:
    """Every file under `roots` -> its bytes: what must be unchanged after a refusal."""
    files = {}
    for root in roots:
        for folder, _, names in os.walk(root):
            for name in names:
                with open(os.path.join(folder, name), "rb") as f:
                    files[os.path.join(folder, name)] = f.read()
    return files


def save_translator(path, languages=None, seed=0, texts=TEXTS, **overrides):
    """A tiny translation model with its tokenizer (and a model card naming `languages`, source first) at `path`."""
    torch.manual_seed(seed)
    model = VanillaTransformerForConditionalGeneration(VanillaTransformerConfig.from_preset("tiny", **overrides))
    model.save_pretrained(path)
    train_tokenizer(list(texts), vocab_size=40).save_pretrained(path)
    if languages:
        (path / "README.md").write_text(
            f"---\nlanguage:\n- {languages[0]}\n- {languages[1]}\n---\n# A model\n", encoding="utf-8"
        )
    return path


@pytest.fixture
def pairs(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.de").write_text("".join(f"Satz {i}\n" for i in range(20)), encoding="utf-8")
    (data / "train.en").write_text("".join(f"sentence {i}\n" for i in range(20)), encoding="utf-8")
    return data


# ------------------------------------------------------------------------------------------ splits: inputs kept


def spellings(folder):
    """The one folder written as a symlink, with `..`, with a trailing slash."""
    link = folder.parent / "link"
    link.symlink_to(folder, target_is_directory=True)
    return {"plain": folder, "symlink": link, "dotdot": folder / ".." / folder.name, "slash": f"{folder}/"}


@pytest.mark.parametrize("spelling", ["plain", "symlink", "dotdot", "slash"])
def test_split_pairs_into_the_inputs_folder_is_refused(pairs, capsys, spelling):
    before = snapshot(pairs)
    out = spellings(pairs)[spelling]
    refused(
        capsys,
        ["split-pairs", pairs / "train", out, "--source_lang", "de", "--target_lang", "en"],
        "train.de",
        pairs / "train.de",
    )
    assert snapshot(pairs) == before


def test_split_pairs_output_hard_linked_to_the_input_is_refused(pairs, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    os.link(pairs / "train.en", out / "tune.en")  # one inode under two names
    before = snapshot(pairs)
    refused(
        capsys,
        ["split-pairs", pairs / "train", out, "--source_lang", "de", "--target_lang", "en"],
        out / "tune.en",
        pairs / "train.en",
    )
    assert snapshot(pairs) == before


def test_split_pairs_elsewhere_in_the_same_folder_is_fine(pairs, capsys):
    os.rename(pairs / "train.de", pairs / "full.de")
    os.rename(pairs / "train.en", pairs / "full.en")
    before = snapshot(pairs)
    status, err = run(capsys, ["split-pairs", pairs / "full", pairs, "--source_lang", "de", "--target_lang", "en"])
    assert status == 0, err
    assert all(snapshot(pairs)[path] == data for path, data in before.items())  # the inputs untouched
    assert (pairs / "tune.de").exists() and (pairs / "train.en").exists()


@pytest.mark.parametrize(
    "languages,named",
    [(("de", "de"), "both 'de'"), (("../x", "en"), "'../x'"), (("de", "a/b"), "'a/b'"), (("de ", "en"), "'de '")],
)
def test_split_pairs_language_codes_name_no_path(pairs, tmp_path, capsys, languages, named):
    refused(
        capsys,
        [
            "split-pairs",
            pairs / "train",
            tmp_path / "out",
            "--source_lang",
            languages[0],
            "--target_lang",
            languages[1],
        ],
        named,
    )
    assert not (tmp_path / "x.train").exists() and not (tmp_path / "out").exists()


def test_split_documents_over_its_input_is_refused(tmp_path, capsys):
    conll = tmp_path / "train.txt"
    conll.write_text("".join(f"-DOCSTART- -X- O O\n\nWord{i} O\n\n" for i in range(6)), encoding="utf-8")
    before = snapshot(tmp_path)
    refused(capsys, ["split-documents", conll, tmp_path], conll)
    refused(capsys, ["split-documents", conll, tmp_path / ".." / tmp_path.name / "."], "train.txt")
    assert snapshot(tmp_path) == before


def test_splits_into_a_model_directory_are_refused(pairs, tmp_path, capsys):
    model = tmp_path / "model"
    VanillaTransformerForTokenClassification(VanillaTransformerConfig.from_preset("tiny")).save_pretrained(model)
    before = snapshot(model)
    refused(
        capsys,
        ["split-pairs", pairs / "train", model, "--source_lang", "de", "--target_lang", "en"],
        model,
        "config.json",
    )
    assert snapshot(model) == before


# ------------------------------------------------------------------------------------------ average-checkpoints


def write_run(run_dir, values=(1.0, 3.0), **configs):
    """A run directory of checkpoints holding one tensor each (`values`), with a config.json each (`configs`
    overriding fields by checkpoint name) and a finished model at the top."""
    import json

    for step, value in enumerate(values, start=1):
        checkpoint = run_dir / f"checkpoint-{step}"
        checkpoint.mkdir(parents=True)
        save_file({"w": torch.full((4,), value)}, str(checkpoint / "model.safetensors"), metadata={"format": "pt"})
        config = {"d_model": 8, "vocab_size": 40, **configs.get(checkpoint.name, {})}
        (checkpoint / "config.json").write_text(json.dumps(config), encoding="utf-8")
    save_file({"w": torch.zeros(4)}, str(run_dir / "model.safetensors"), metadata={"format": "pt"})
    (run_dir / "config.json").write_text('{"d_model": 8}', encoding="utf-8")
    return run_dir


@pytest.mark.parametrize("target", ["run", "checkpoint", "checkpoint-link", "run-dotdot", "finished"])
def test_average_checkpoints_never_writes_over_a_model(tmp_path, capsys, target):
    run_dir = write_run(tmp_path / "run")
    (tmp_path / "link").symlink_to(run_dir / "checkpoint-2", target_is_directory=True)
    finished = tmp_path / "finished"
    finished.mkdir()
    save_file({"w": torch.ones(4)}, str(finished / "model.safetensors"))
    out = {
        "run": run_dir,
        "checkpoint": run_dir / "checkpoint-1",
        "checkpoint-link": tmp_path / "link",
        "run-dotdot": run_dir / "checkpoint-1" / "..",
        "finished": finished,
    }[target]
    before = snapshot(tmp_path)
    line = refused(capsys, ["average-checkpoints", run_dir, "--last", "2", "--output_dir", out], out)
    assert str(run_dir) in line or "model.safetensors" in line, line
    assert snapshot(tmp_path) == before


def test_average_checkpoints_into_a_new_folder_of_the_run_works(tmp_path, capsys):
    run_dir = write_run(tmp_path / "run")
    status, err = run(capsys, ["average-checkpoints", run_dir, "--last", "2", "--output_dir", run_dir / "averaged"])
    assert status == 0, err
    assert load_file(str(run_dir / "averaged" / "model.safetensors"))["w"].tolist() == [2.0] * 4


def test_average_checkpoints_force_replaces_an_earlier_average_only(tmp_path, capsys):
    """A rerun (the recipes') replaces its own earlier average with --force; without it, or where the directory holds
    a model this command did not write, it is refused."""
    run_dir = write_run(tmp_path / "run")
    argv = ["average-checkpoints", run_dir, "--last", "1", "--output_dir", tmp_path / "avg"]
    assert run(capsys, argv)[0] == 0
    refused(capsys, argv, tmp_path / "avg")
    argv[3] = "2"
    assert run(capsys, [*argv, "--force"])[0] == 0
    assert load_file(str(tmp_path / "avg" / "model.safetensors"))["w"].tolist() == [2.0] * 4
    for finished in (run_dir, run_dir / "checkpoint-1"):  # a model this command did not write, --force or not
        before = snapshot(tmp_path)
        refused(capsys, [*argv[:5], finished, "--force"], finished)
        assert snapshot(tmp_path) == before


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_average_checkpoints_refuses_non_finite_weights(tmp_path, capsys, bad):
    run_dir = write_run(tmp_path / "run", values=(1.0, bad))
    refused(
        capsys,
        ["average-checkpoints", run_dir, "--last", "2", "--output_dir", tmp_path / "avg"],
        run_dir / "checkpoint-2" / "model.safetensors",
        "tensor w",
        "non-finite",
    )
    assert not (tmp_path / "avg" / "model.safetensors").exists()


def test_average_checkpoints_refuses_checkpoints_of_different_models(tmp_path, capsys):
    run_dir = write_run(tmp_path / "run", **{"checkpoint-1": {"vocab_size": 50}})
    refused(
        capsys,
        ["average-checkpoints", run_dir, "--last", "2", "--output_dir", tmp_path / "avg"],
        "checkpoint-1/config.json",
        "vocab_size",
    )
    assert not (tmp_path / "avg").exists()


def test_average_checkpoints_names_a_missing_run_as_a_directory(tmp_path, capsys):
    refused(
        capsys,
        ["average-checkpoints", tmp_path / "nope", "--output_dir", tmp_path / "avg"],
        "no such directory",
        tmp_path / "nope",
    )


# ------------------------------------------------------------------------------------------ file commands


@pytest.fixture
def translator(tmp_path):
    return save_translator(tmp_path / "de-en", ("de", "en"))


def test_translate_output_over_its_input_is_refused(translator, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("ab cd\n", encoding="utf-8")
    (tmp_path / "alias.txt").symlink_to(source)
    os.link(source, tmp_path / "hard.txt")
    for output in (source, tmp_path / "alias.txt", tmp_path / "hard.txt", tmp_path / "x" / ".." / "in.txt"):
        refused(capsys, ["translate", translator, "--input", source, "--output", output], source)
    refused(
        capsys,
        ["translate", translator, "--input", source, "--output", translator / "config.json"],
        translator / "config.json",
    )
    assert source.read_text(encoding="utf-8") == "ab cd\n"
    assert (translator / "config.json").read_text(encoding="utf-8").startswith("{")


def test_translate_writes_to_a_device_as_before(translator, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("ab cd\n", encoding="utf-8")
    status, err = run(
        capsys, ["translate", translator, "--input", source, "--output", os.devnull, "--quiet", "--max_new_tokens", "2"]
    )
    assert status == 0, err


def test_tag_score_and_ner_report_outputs_over_inputs_are_refused(tmp_path, capsys):
    text = tmp_path / "text.txt"
    text.write_text("ab cd\n", encoding="utf-8")
    before = snapshot(tmp_path)
    refused(capsys, ["tag", tmp_path / "no-model", "--input", text, "--output", text], text)
    refused(capsys, ["score", text, text, "--output", text], text)
    refused(capsys, ["ner-report", text, "--train_file", text, "--json", f"{tmp_path}//text.txt"], text)
    refused(
        capsys, ["tune-decoding", tmp_path / "no-model", "--source", text, "--reference", text, "--output", text], text
    )
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("penalty", ["nan", "inf", "-inf"])
def test_tune_decoding_saves_no_non_finite_length_penalty(translator, tmp_path, capsys, penalty):
    text = tmp_path / "text.txt"
    text.write_text("ab cd\n", encoding="utf-8")
    before = snapshot(translator)
    refused(
        capsys,
        ["tune-decoding", translator, "--source", text, "--reference", text, f"--length_penalty={penalty}", "--save"],
        "--length_penalty",
        "not a finite number",
    )
    assert snapshot(translator) == before


# ------------------------------------------------------------------------------------------ ensembles agree


def test_translate_ensemble_of_opposite_directions_is_refused(translator, tmp_path, capsys):
    reverse = save_translator(tmp_path / "en-de", ("en", "de"), seed=1)
    source = tmp_path / "in.txt"
    source.write_text("ab cd\n", encoding="utf-8")
    refused(
        capsys,
        ["translate", translator, "--ensemble_with", reverse, "--input", source, "--engine", "pytorch"],
        "en->de",
        "de->en",
        reverse,
    )


def test_translate_ensemble_of_other_tokenizers_is_refused(translator, tmp_path, capsys):
    other = save_translator(tmp_path / "other", ("de", "en"), texts=["xy zw", "zw xy uv"])
    refused(
        capsys,
        ["translate", translator, "--ensemble_with", other, "--input", os.devnull, "--engine", "pytorch"],
        "tokenizer",
        other,
    )


def test_translate_ensemble_of_one_direction_runs(translator, tmp_path, capsys):
    twin = save_translator(tmp_path / "twin", ("de", "en"), seed=3)
    source = tmp_path / "in.txt"
    source.write_text("ab cd\n", encoding="utf-8")
    status, err = run(
        capsys,
        [
            "translate",
            translator,
            "--ensemble_with",
            twin,
            "--input",
            source,
            "--output",
            tmp_path / "out.txt",
            "--engine",
            "pytorch",
            "--quiet",
            "--max_new_tokens",
            "2",
        ],
    )
    assert status == 0, err


def test_tag_ensemble_with_a_translator_is_refused(tmp_path, capsys):
    tagger = tmp_path / "tagger"
    VanillaTransformerForTokenClassification(
        VanillaTransformerConfig.from_preset("tiny", vocab_size=40)
    ).save_pretrained(tagger)
    train_tokenizer(TEXTS, vocab_size=40).save_pretrained(tagger)
    translator = save_translator(tmp_path / "mt", vocab_size=40)
    refused(capsys, ["tag", tagger, "--ensemble_with", translator, "--input", os.devnull], "not a tagger", translator)


# ------------------------------------------------------------------------------------------ a path is a path


@pytest.mark.parametrize(
    "command",
    [
        ["translate", "{p}", "--input", os.devnull],
        ["translate", "{m}", "--ensemble_with", "{p}", "--input", os.devnull],
        ["tag", "{p}", "--input", os.devnull],
        ["export-ctranslate2", "{p}", "{o}"],
    ],
)
@pytest.mark.parametrize("path", ["missing", "a file", "trailing space", "owner/name "])
def test_a_local_path_is_named_as_a_path(translator, tmp_path, capsys, command, path):
    (tmp_path / "file").write_text("x", encoding="utf-8")
    given_path = {
        "missing": str(tmp_path / "missing"),
        "a file": str(tmp_path / "file"),
        "trailing space": f"{translator} ",
        "owner/name ": "owner/name ",
    }[path]
    argv = [a.format(p=given_path, m=translator, o=tmp_path / "out") for a in command]
    line = refused(capsys, argv, "no such directory", repr(given_path))
    assert "repo id" not in line.lower() and "repo_name" not in line


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20))
def test_what_cannot_be_a_hub_id_is_a_local_path(text):
    """Any name the Hub would refuse as a repository id is taken as a path (and named as one when missing)."""
    from huggingface_hub.utils import validate_repo_id

    from vanilla_transformer.loading import looks_local

    try:
        validate_repo_id(text)
    except ValueError:
        assert looks_local(text)


# ------------------------------------------------------------------------------------------ exports and training


def test_exports_refuse_non_finite_weights_and_their_own_input(tmp_path, capsys):
    pytest.importorskip("ctranslate2")
    model = save_translator(tmp_path / "mt")
    state = load_file(str(model / "model.safetensors"))
    name = next(k for k in state if k.endswith("fc1.weight"))
    state[name][0, 0] = float("nan")
    save_file(state, str(model / "model.safetensors"), metadata={"format": "pt"})
    refused(capsys, ["export-ctranslate2", model, tmp_path / "ct2"], name, "non-finite")
    assert not (tmp_path / "ct2").exists()
    export = tmp_path / "export"
    export.mkdir()
    (export / "model.bin").write_bytes(b"an earlier export")
    inner = save_translator(export / "saved")  # the model to export lies inside the directory --force replaces
    refused(capsys, ["export-ctranslate2", inner, export, "--force"], export, inner)
    assert (export / "model.bin").read_bytes() == b"an earlier export" and (inner / "config.json").exists()


def test_onnx_export_refuses_non_finite_weights(tmp_path, capsys):
    pytest.importorskip("onnx")
    tagger = tmp_path / "tagger"
    model = VanillaTransformerForTokenClassification(VanillaTransformerConfig.from_preset("tiny", vocab_size=40))
    with torch.no_grad():
        model.classifier.bias[1] = float("nan")
    model.save_pretrained(tagger)
    train_tokenizer(TEXTS, vocab_size=40).save_pretrained(tagger)
    refused(capsys, ["export-onnx", tagger, tmp_path / "onnx"], "classifier.bias", "non-finite")
    assert not (tmp_path / "onnx").exists()


def test_training_refuses_an_output_dir_that_is_its_data_folder(tmp_path, capsys):
    from conftest import translation_args, write_parallel

    data = write_parallel(tmp_path)
    before = snapshot(tmp_path)
    for out in (tmp_path, f"{tmp_path}/", tmp_path / "x" / ".."):
        refused(
            capsys, ["train-translation", *translation_args(data, out, "--overwrite_output_dir", "true")], out, "train"
        )
    assert snapshot(tmp_path) == before


def test_overwrite_output_dir_deletes_nothing_it_did_not_make(tmp_path, capsys):
    from conftest import translation_args, write_parallel

    (tmp_path / "data").mkdir()
    data = write_parallel(tmp_path / "data")
    out = tmp_path / "out"
    (out / "checkpoint-7").mkdir(parents=True)
    (out / "checkpoint-7" / "notes.txt").write_text("mine", encoding="utf-8")  # named like a checkpoint, not one
    (out / "config.json").write_text("{}", encoding="utf-8")
    refused(
        capsys,
        ["train-translation", *translation_args(data, out, "--overwrite_output_dir", "true")],
        out / "checkpoint-7",
        "trainer_state.json",
    )
    assert (out / "checkpoint-7" / "notes.txt").read_text(encoding="utf-8") == "mine"
    (out / "checkpoint-7" / "trainer_state.json").write_text("{}", encoding="utf-8")
    model = save_translator(out / "checkpoint-7" / "model")  # the model this run starts from, in a checkpoint
    args = translation_args(data, out, "--overwrite_output_dir", "true", "--model_name_or_path", model)
    refused(
        capsys,
        ["train-translation", *[a for a in args if a not in ("--config_name", "tiny")]],
        out / "checkpoint-7",
        model,
    )
    before = snapshot(model)
    args = translation_args(data, model, "--overwrite_output_dir", "true", "--model_name_or_path", f"{model}/")
    refused(capsys, ["train-translation", *[a for a in args if a not in ("--config_name", "tiny")]], model)
    assert snapshot(model) == before  # fine-tuning a model into its own directory would replace it


def test_a_run_whose_weights_became_non_finite_saves_nothing():
    from transformers import TrainerControl, TrainerState

    from vanilla_transformer.training.checkpoints import FiniteWeights

    model = VanillaTransformerForTokenClassification(VanillaTransformerConfig.from_preset("tiny"))
    state, control = TrainerState(global_step=12), TrainerControl(should_save=True)
    FiniteWeights().on_step_end(None, state, control, model=model)  # finite: nothing to say
    with torch.no_grad():
        model.classifier.weight[0, 0] = float("inf")
    for event in ("on_step_end", "on_train_end"):
        with pytest.raises(ValueError, match=r"step 12.*classifier\.weight holds 1 non-finite"):
            getattr(FiniteWeights(), event)(None, state, control, model=model)


def test_a_descriptor_path_is_written_through_never_replaced(tmp_path):
    """/dev/stdout, /dev/fd/1, /proc/self/fd/1, /proc/PID/fd/1 and a link to one, where stdout is appended to a log:
    the text is added to the log, whose earlier lines stay (a replacement would wipe them); likewise a command's
    --output /dev/stdout."""
    import subprocess
    import sys

    log, link = tmp_path / "log.txt", tmp_path / "out"
    link.symlink_to("/dev/stdout")
    log.write_text("earlier\n", encoding="utf-8")
    script = (
        "import os; from vanilla_transformer.files import write_text as w; print('a', flush=True); "
        "w('/dev/stdout', 'b\\n'); w('/dev/fd/1', 'c\\n'); w('/proc/self/fd/1', 'd\\n'); "
        f"w({str(link)!r}, 'e\\n'); w(f'/proc/{{os.getpid()}}/fd/1', 'f\\n'); print('g')"
    )
    with open(log, "a", encoding="utf-8") as out:
        subprocess.run([sys.executable, "-c", script], stdout=out, check=True, timeout=120)
    assert log.read_text(encoding="utf-8") == "earlier\na\nb\nc\nd\ne\nf\ng\n"
    hypotheses = tmp_path / "h.txt"
    hypotheses.write_text("ab cd\n", encoding="utf-8")
    with open(log, "a", encoding="utf-8") as out:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "vanilla_transformer.cli",
                "score",
                hypotheses,
                hypotheses,
                "--output",
                "/dev/stdout",
            ],
            stdout=out,
            check=True,
            timeout=120,
        )
    assert log.read_text(encoding="utf-8").startswith("earlier\na\n") and '"sacrebleu"' in log.read_text()


def test_a_file_output_never_replaces_a_models_or_checkpoints_files(translator, tmp_path, capsys):
    """An output file that exists in a finished model's directory or in a checkpoint of a run is refused, naming the
    file and the model: score/translate/tag/tune-decoding --output, ner-report --json."""
    text = tmp_path / "text.txt"
    text.write_text("ab cd\n", encoding="utf-8")
    run_dir = tmp_path / "run"
    checkpoint = save_translator(run_dir / "checkpoint-4")
    (run_dir / "checkpoint-2").mkdir()
    (run_dir / "checkpoint-2" / "optimizer.pt").write_bytes(b"x")  # (no model file: a run's checkpoint all the same)
    before = snapshot(tmp_path)
    for target, model in (
        (translator / "model.safetensors", translator),
        (translator / "config.json", translator),
        (translator / "tokenizer.json", translator),
        (checkpoint / "model.safetensors", checkpoint),
        (run_dir / "checkpoint-2" / "optimizer.pt", run_dir),
    ):
        refused(capsys, ["score", text, text, "--output", target], target, model)
    output = checkpoint / "config.json"
    refused(capsys, ["translate", run_dir / "checkpoint-4", "--input", text, "--output", output], output, checkpoint)
    refused(capsys, ["tag", tmp_path / "no-model", "--input", text, "--output", output], output, checkpoint)
    refused(
        capsys,
        ["tune-decoding", tmp_path / "no-model", "--source", text, "--reference", text, "--output", output],
        output,
        checkpoint,
    )
    refused(capsys, ["ner-report", text, "--train_file", text, "--json", output], output, checkpoint)
    assert snapshot(tmp_path) == before
    for _ in range(2):  # a new file beside the model, then that earlier output written again (a recipe rerun): fine
        status, err = run(capsys, ["score", text, text, "--output", translator / "bleu.json"])
        assert status == 0 and (translator / "bleu.json").is_file(), err


def test_an_evaluation_run_never_writes_into_another_finished_model(translator, tmp_path, capsys):
    """Evaluation only (no training): an --output_dir holding another finished model is refused before anything
    loads, naming it; the loaded model's own directory stays allowed (what the reproducer ran)."""
    from conftest import translation_args, write_parallel

    (tmp_path / "data").mkdir()
    data = write_parallel(tmp_path / "data")
    other = save_translator(tmp_path / "other", seed=1)
    before = snapshot(tmp_path)
    for stages in (["--do_train", "false", "--do_eval", "true"], ["--do_train", "false", "--do_predict", "true"]):
        args = translation_args(data, other, "--model_name_or_path", translator, *stages)
        refused(
            capsys,
            ["train-translation", *[a for a in args if a not in ("--config_name", "tiny")]],
            other,
            "config.json",
        )
    assert snapshot(tmp_path) == before
    from vanilla_transformer.commands import train_translation

    args = translation_args(data, translator, "--model_name_or_path", f"{translator}/", "--do_train", "false")
    assert train_translation.parse([a for a in args if a not in ("--config_name", "tiny")])[2].do_eval


def test_average_checkpoints_into_a_folder_of_the_users_files_is_refused(tmp_path, capsys):
    """A non-empty --output_dir that is no earlier average (the user's card and tokenizer, no model) is refused, with
    --force too, naming it; an empty one is fine."""
    run_dir, mine = write_run(tmp_path / "run"), tmp_path / "mine"
    mine.mkdir()
    (mine / "README.md").write_text("# my card\n", encoding="utf-8")
    (mine / "tokenizer.json").write_text("{}", encoding="utf-8")
    before = snapshot(tmp_path)
    for extra in ([], ["--force"]):
        refused(
            capsys, ["average-checkpoints", run_dir, "--last", "2", "--output_dir", mine, *extra], mine, "README.md"
        )
    assert snapshot(tmp_path) == before
    (tmp_path / "empty").mkdir()
    assert run(capsys, ["average-checkpoints", run_dir, "--last", "2", "--output_dir", tmp_path / "empty"])[0] == 0
