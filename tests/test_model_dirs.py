"""A model directory is recognised once (`model_dirs.recognise` -> `ModelDir`) and then passed on: every command that
takes one opens each of the directory's JSON files at most once in the package's own code (what transformers, the
tokenizers and the engines read for themselves aside), a saved model and each export alike."""

import builtins
import collections
import contextlib
import inspect
import os

import pytest

from conftest import ROOT
from vanilla_transformer.cli import main as cli
from vanilla_transformer.model_dirs import ModelDir, recognise

PACKAGE = os.path.join(ROOT, "vanilla_transformer") + os.sep


@contextlib.contextmanager
def json_opens(monkeypatch, *directories):
    """directory -> Counter of its JSON files' names opened by the package's code while inside."""
    folders = {os.path.realpath(d): collections.Counter() for d in directories}
    real = builtins.open

    def counting(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and os.fspath(file).endswith(".json"):
            counts = folders.get(os.path.realpath(os.path.dirname(os.path.abspath(file))))
            caller = inspect.currentframe().f_back.f_code.co_filename
            if counts is not None and os.path.realpath(caller).startswith(PACKAGE):
                counts[os.path.basename(file)] += 1
        return real(file, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(builtins, "open", counting)
        yield {d: folders[os.path.realpath(d)] for d in directories}


def assert_once(counts: dict, *read):
    """Every JSON file opened at most once, and `read` (what recognising reads) opened: the count is real."""
    for directory, counted in counts.items():
        assert all(n == 1 for n in counted.values()), (directory, counted)
        assert set(read) <= set(counted), (directory, counted)


@pytest.fixture(scope="module")
def ct2_export(translator, tmp_path_factory):
    pytest.importorskip("ctranslate2")
    out = tmp_path_factory.mktemp("ct2") / "export"
    assert cli(["export-ctranslate2", translator, str(out)]) == 0
    return str(out)


@pytest.fixture(scope="module")
def onnx_export(tagger, tmp_path_factory):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    out = tmp_path_factory.mktemp("onnx") / "export"
    assert cli(["export-onnx", tagger, str(out)]) == 0
    return str(out)


@pytest.fixture(scope="module")
def translator(small_demo_model):
    return str(small_demo_model)


@pytest.fixture(scope="module")
def tagger(small_ner_model):
    return str(small_ner_model)


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("ein kleines haus\n\nzwei katzen schlafen\n", encoding="utf-8")
    return str(path)


def test_recognised_once_as_what_it_holds(translator, tagger, ct2_export, monkeypatch):
    with json_opens(monkeypatch, translator, tagger, ct2_export) as counts:
        found = [recognise(translator), recognise(tagger), recognise(ct2_export)]
    assert [(m.task, m.format, m.engine) for m in found] == [
        ("translation", "saved", "pytorch"),
        ("tagging", "saved", "pytorch"),
        ("translation", "ctranslate2", "ctranslate2"),
    ]
    assert found[0].architectures == ("VanillaTransformerForConditionalGeneration",)
    assert found[2].languages == found[0].languages and "model.bin" in found[2].files
    assert_once(counts, "config.json")
    with pytest.raises(ValueError, match="not a tagger"):
        found[0].holding("tagging")
    assert isinstance(found[0], ModelDir) and found[0].json("config.json")["architectures"] == list(
        found[0].architectures
    )


def test_translate_opens_each_json_file_once(translator, ct2_export, text, tmp_path, monkeypatch):
    for model, engine in ((translator, "pytorch"), (translator, "ctranslate2"), (ct2_export, "auto")):
        with json_opens(monkeypatch, model) as counts:
            assert (
                cli(
                    [
                        "translate",
                        model,
                        "--engine",
                        engine,
                        "--input",
                        text,
                        "--output",
                        str(tmp_path / "out.txt"),
                        "--quiet",
                        "--max_new_tokens",
                        "8",
                    ]
                )
                == 0
            )
        assert_once(counts, "config.json", "tokenizer_config.json")
        assert len((tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()) == 3


def test_tag_opens_each_json_file_once(tagger, onnx_export, text, tmp_path, monkeypatch):
    for model, read in ((tagger, "config.json"), (onnx_export, "onnx_tagger.json")):
        with json_opens(monkeypatch, model) as counts:
            assert cli(["tag", model, "--input", text, "--output", str(tmp_path / "out.jsonl"), "--quiet"]) == 0
        assert_once(counts, read, "tokenizer_config.json")


def test_exports_open_each_json_file_once(translator, tagger, tmp_path, monkeypatch):
    pytest.importorskip("ctranslate2")
    with json_opens(monkeypatch, translator) as counts:
        assert cli(["export-ctranslate2", translator, str(tmp_path / "ct2")]) == 0
    assert_once(counts, "config.json", "generation_config.json")
    pytest.importorskip("onnxscript")
    with json_opens(monkeypatch, tagger) as counts:
        assert cli(["export-onnx", tagger, str(tmp_path / "onnx")]) == 0
    assert_once(counts, "config.json")


def test_serve_opens_each_json_file_once(translator, tagger, ct2_export, monkeypatch):
    pytest.importorskip("fastapi")
    from vanilla_transformer.commands import serve

    for model in (translator, ct2_export):
        with json_opens(monkeypatch, model, tagger) as counts:
            args = serve.parse_args([model, "--ner", tagger], environ={})
            translators, ner, _ = serve.served_models(args)
            for engine in [*translators, ner]:
                engine.open()
        assert_once(counts, "config.json")
        assert all(engine.ready.is_set() for engine in [*translators, ner]) and len(translators) == 1


def test_plot_tune_and_demo_open_each_json_file_once(translator, tagger, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    with json_opens(monkeypatch, translator) as counts:
        assert cli(["plot", "attention", translator, "ein haus", "--out", str(tmp_path / "plots")]) == 0
    assert_once(counts, "config.json")
    with json_opens(monkeypatch, translator) as counts:
        (tmp_path / "tune.txt").write_text("ein haus\nzwei katzen\n", encoding="utf-8")
        tune = str(tmp_path / "tune.txt")
        assert (
            cli(
                [
                    "tune-decoding",
                    translator,
                    "--source",
                    tune,
                    "--reference",
                    tune,
                    "--num_beams",
                    "1",
                    "--output",
                    str(tmp_path / "tuned.json"),
                ]
            )
            == 0
        )
    assert_once(counts, "config.json")
    from vanilla_transformer.deploy.demo_page import NerDemo, TranslationDemo

    with json_opens(monkeypatch, translator, tagger) as counts:
        TranslationDemo(translator)
        NerDemo(tagger)
    assert_once(counts, "config.json")


def test_push_opens_each_json_file_once(translator, tmp_path, monkeypatch):
    """`push` recognises the directory once and renders its card from the config read then (the upload itself is
    huggingface_hub's, faked here: the loopback Hub round trip is tests/test_hub.py's)."""
    import shutil
    from types import SimpleNamespace

    from huggingface_hub import HfApi

    model = str(tmp_path / "model")
    shutil.copytree(translator, model)  # (push writes the card into the directory it pushes)
    uploaded = []
    monkeypatch.setattr(HfApi, "create_repo", lambda self, repo_id, **kwargs: None)
    monkeypatch.setattr(
        HfApi, "upload_folder", lambda self, **kwargs: uploaded.append(kwargs) or SimpleNamespace(oid="0" * 40)
    )
    with json_opens(monkeypatch, model) as counts:
        assert cli(["push", model, "me/model"]) == 0
    assert_once(counts, "config.json", "card_info.json")
    assert uploaded[0]["folder_path"] == model and "config.json" in uploaded[0]["allow_patterns"]
