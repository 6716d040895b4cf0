"""The commands' inputs, hostile ones included: --force never deletes a finished model; no number a model cannot hold
is saved into one (float16 overflow, an infinite config override); a damaged file is one error line naming it; a
missing path or Hub name is named as such, for ensemble members too; a pipe is read, not called missing."""

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file
from test_user_files import TEXTS, refused, run, save_translator, snapshot, write_run

from vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForTokenClassification
from vanilla_transformer.files import DataError, read_lines, require_file
from vanilla_transformer.tokenization import train_tokenizer


def save_tagger(path):
    VanillaTransformerForTokenClassification(
        VanillaTransformerConfig.from_preset("tiny", vocab_size=40)
    ).save_pretrained(path)
    train_tokenizer(TEXTS, vocab_size=40).save_pretrained(path)
    return path


# ------------------------------------------------------------------------------------------ --force deletes no model


@pytest.mark.parametrize(
    "command,marker", [("export-ctranslate2", "shared_vocabulary.json"), ("export-onnx", "model.onnx")]
)
def test_export_force_never_deletes_a_finished_model_or_checkpoints(tmp_path, capsys, command, marker):
    """An export's file dropped into a run directory does not make it an export --force may replace."""
    source = save_translator(tmp_path / "mt") if command == "export-ctranslate2" else save_tagger(tmp_path / "tagger")
    target = write_run(tmp_path / "run")
    (target / marker).write_text("{}", encoding="utf-8")
    before = snapshot(target)
    refused(capsys, [command, source, target, "--force"], "model.safetensors", "checkpoint-1", target)
    assert snapshot(target) == before


# ------------------------------------------------------------------------------------------ no non-finite numbers


def test_a_float16_export_refuses_weights_beyond_float16(tmp_path, capsys):
    pytest.importorskip("ctranslate2")
    model = save_translator(tmp_path / "mt")
    state = load_file(str(model / "model.safetensors"))
    state[next(k for k in state if k.endswith("decoder.layers.0.ffn.fc1.weight"))][0, 0] = 1e6
    save_file(state, str(model / "model.safetensors"), metadata={"format": "pt"})
    refused(
        capsys,
        ["export-ctranslate2", model, tmp_path / "ct2", "--quantization", "float16"],
        "decoder/layer_0/ffn/linear_0/weight",
        "float16",
    )
    assert not (tmp_path / "ct2").exists()


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(["auxiliary_loss_weight", "init_std"]),
    st.sampled_from(["1e999", "-1e999", "nan", "inf", "float('nan')"]),
)
def test_non_finite_config_overrides_are_refused(field, raw):
    from vanilla_transformer.training.arguments import parse_config_overrides

    with pytest.raises(ValueError, match=field):
        parse_config_overrides(f"{field}={raw}")
    with pytest.raises(Exception, match="finite"):  # (@strict's StrictDataclassFieldValidationError)
        VanillaTransformerConfig(**{field: float(raw.removeprefix("float('").removesuffix("')"))})


# ------------------------------------------------------------------------------------------ damaged files: one line


def test_average_checkpoints_names_damaged_checkpoint_files(tmp_path, capsys):
    run_dir = write_run(tmp_path / "run")
    weights = run_dir / "checkpoint-1" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:40])
    refused(
        capsys, ["average-checkpoints", run_dir, "--last", "2", "--output_dir", tmp_path / "a"], weights, "truncated"
    )
    run_dir = write_run(tmp_path / "run2")
    state = run_dir / "checkpoint-1" / "trainer_state.json"
    state.write_text('{"log_history": 5}', encoding="utf-8")
    refused(capsys, ["average-checkpoints", run_dir, "--last", "2", "--output_dir", tmp_path / "b"], state, "damaged")


@pytest.mark.parametrize("history", [5, [1, 2], [{"loss": 1.0}], [{"step": "x"}]])
def test_plot_curves_names_a_damaged_trainer_state(tmp_path, capsys, history):
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": history}), encoding="utf-8")
    refused(capsys, ["plot", "curves", tmp_path], "trainer_state.json", "damaged")


def test_plot_positions_refuses_a_table_beyond_memory_up_front(tmp_path, capsys):
    refused(
        capsys,
        ["plot", "positions", "--length", "100000000", "--d_model", "100000", "--out", tmp_path],
        "--length 100000000",
        "--d_model 100000",
    )


@pytest.mark.parametrize("damaged", [b"", b"\x08\x07garbage" * 10])
def test_a_damaged_onnx_export_is_named_with_the_advice_to_export_again(tmp_path, damaged):
    pytest.importorskip("onnxruntime")
    from vanilla_transformer.deploy.taggers import OnnxTagger
    from vanilla_transformer.model_dirs import recognise

    (tmp_path / "model.onnx").write_bytes(damaged)
    (tmp_path / "onnx_tagger.json").write_text('{"labels": ["O"], "crf": null}', encoding="utf-8")
    (tmp_path / "tokenizer.json").write_text("{}", encoding="utf-8")
    with pytest.raises(OSError, match="model.onnx is truncated or corrupted .*export-onnx"):
        OnnxTagger(recognise(tmp_path))


# ------------------------------------------------------------------------------------------ a path is a path


@pytest.mark.parametrize("name", ["nosuch/dir", "nosuchdir"])
def test_every_model_path_missing_here_and_on_the_hub_is_named(tmp_path, capsys, name):
    translator, tagger = save_translator(tmp_path / "mt"), save_tagger(tmp_path / "tagger")
    for argv in (
        ["translate", translator, "--ensemble_with", name, "--input", os.devnull],
        ["tag", tagger, "--ensemble_with", name, "--input", os.devnull],
        ["export-onnx", name, tmp_path / "out"],
    ):
        refused(capsys, argv, f"no such directory: {name!r}", "Hub")


# ------------------------------------------------------------------------------------------ pipes are read


def pipe_path(text: str) -> str:
    """A /dev/fd/N path reading `text` from a pipe, as the shell's `<(echo ...)` gives."""
    read, write = os.pipe()
    os.write(write, text.encode())
    os.close(write)
    return f"/dev/fd/{read}"


@pytest.mark.skipif(not os.path.isdir("/dev/fd"), reason="no /dev/fd")
def test_a_pipe_is_read_once_or_named_as_a_pipe(tmp_path, capsys):
    assert read_lines(pipe_path("a b\nc\n")) == ["a b", "c"]
    status, err = run(capsys, ["score", pipe_path("a b c\n"), pipe_path("a b c\n")])
    assert status == 0 and "Traceback" not in err, err
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(DataError, match="is a pipe or device"):
        require_file(str(tmp_path / "fifo"))
    with pytest.raises(DataError, match="is a directory"):
        require_file(str(tmp_path))
