"""`vanilla-transformer export-onnx` and ONNX Runtime behind `tag` and `serve`: the export tags as PyTorch does
(softmax and CRF heads, the CRF decoded in numpy), int8 quantization, and the mistakes named."""

import json

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime", reason="the onnx extra: pip install -e '.[onnx]'")
pytest.importorskip("onnxscript", reason="the onnx extra: pip install -e '.[onnx]'")

from vanilla_transformer import VanillaTransformerForTokenClassification  # noqa: E402
from vanilla_transformer.cli import main as cli  # noqa: E402
from vanilla_transformer.data import make_demo_ner  # noqa: E402
from vanilla_transformer.deploy.onnx import export_onnx  # noqa: E402
from vanilla_transformer.deploy.taggers import Tagger, line_entities  # noqa: E402
from vanilla_transformer.tokenization import load_tokenizer  # noqa: E402

SENTENCES = make_demo_ner(200, seed=11)["tokens"]


@pytest.fixture(scope="module")
def exports(small_ner_model, tmp_path_factory):
    """The demo tagger exported in float32 and int8, and a CRF tagger (random scores) with character features and
    relative positions (the CoNLL recipe's encoder options; random weights for both), with its export."""
    out = tmp_path_factory.mktemp("onnx")
    crf_dir = out / "crf"
    tagger = VanillaTransformerForTokenClassification.from_pretrained(small_ner_model)
    config = tagger.config
    config.use_crf, config.char_cnn_dim, config.relative_attention_max_distance = True, 16, 4
    torch.manual_seed(0)
    crf = VanillaTransformerForTokenClassification(config)
    crf.load_state_dict(tagger.state_dict(), strict=False)
    crf.set_token_characters(load_tokenizer(small_ner_model))
    with torch.no_grad():
        for param in crf.crf.parameters():
            param.normal_(0, 2.0)  # transitions that decide: the Viterbi path differs from each token's argmax
    crf.save_pretrained(crf_dir)
    load_tokenizer(small_ner_model).save_pretrained(crf_dir)
    return {
        "float32": export_onnx(small_ner_model, out / "fp32"),
        "int8": export_onnx(small_ner_model, out / "int8", quantize="int8"),
        "crf": crf_dir,
        "crf-onnx": export_onnx(crf_dir, out / "crf-onnx"),
    }


def tags(tagger, sentences=SENTENCES):
    return [t for t, _ in tagger(sentences)]


def test_the_export_tags_as_pytorch(small_ner_model, exports):
    """Float32: every word's tag of 200 sentences equal PyTorch's, probabilities within 1e-4; the CRF head decoded
    in numpy gives PyTorch's Viterbi paths (which differ from the tokens' own argmax somewhere)."""
    pytorch, onnx = Tagger(small_ner_model, device="cpu"), Tagger(exports["float32"])
    assert onnx.onnx is not None and pytorch.onnx is None
    options = onnx.onnx.session.get_session_options()  # no busy-waiting threads taking the cores from the process
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    ours, theirs = pytorch(SENTENCES), onnx(SENTENCES)
    assert [t for t, _ in theirs] == [t for t, _ in ours]
    np.testing.assert_allclose(np.concatenate([p for _, p in theirs]), np.concatenate([p for _, p in ours]), atol=1e-4)
    crf_pytorch, crf_onnx = Tagger(exports["crf"], device="cpu"), Tagger(exports["crf-onnx"])
    assert json.loads((exports["crf-onnx"] / "onnx_tagger.json").read_text())["crf"] is not None
    assert tags(crf_onnx) == tags(crf_pytorch)
    assert tags(crf_pytorch) != tags(pytorch)  # the CRF's scores decide somewhere


def test_the_export_looks_up_the_character_features(exports):
    """The character CNN's output per vocabulary entry is computed at export time: the graph holds a table lookup,
    no convolution (and the tags above are PyTorch's, which runs the CNN)."""
    import onnx

    graph = onnx.load(str(exports["crf-onnx"] / "model.onnx")).graph
    assert not [node.op_type for node in graph.node if "Conv" in node.op_type]
    assert any(node.op_type == "Gather" for node in graph.node)


def test_int8_quantization_keeps_the_tags(exports):
    """Dynamic int8 weights: at least 99% of the words keep the float32 export's tag (measured: all of them on the
    demo tagger), and the export is self-contained (no float32 weight file left beside it)."""
    full, int8 = tags(Tagger(exports["float32"])), tags(Tagger(exports["int8"]))
    words = sum(len(t) for t in full)
    same = sum(a == b for x, y in zip(full, int8) for a, b in zip(x, y))
    assert same / words >= 0.99, same / words
    # the int8 weights replace the float32 ones; the model card travels with the export
    assert sorted(p.name for p in exports["int8"].iterdir()) == [
        "README.md",
        "model.onnx",
        "onnx_tagger.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]


@pytest.mark.parametrize("missing", ["model.onnx", "onnx_tagger.json"])
def test_an_export_missing_a_file_is_one_error_line_naming_it(exports, tmp_path, capsys, missing):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(exports["float32"], broken)
    (broken / missing).unlink()
    text = tmp_path / "in.txt"
    text.write_text("Anna Novak visited Oslo\n", encoding="utf-8")
    argv = ["tag", str(broken), "--input", str(text)] + (["--engine", "onnxruntime"] if missing != "model.onnx" else [])
    assert cli(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vanilla-transformer tag: error: ") and missing in err[0], err


def test_tag_and_serve_take_the_export(small_ner_model, exports, tmp_path, capsys):
    """`tag` picks ONNX Runtime for an export by itself and writes what PyTorch writes; `serve` answers /v1/ner from
    an export; the mistakes end with one error line."""
    text = tmp_path / "in.txt"
    text.write_text("yesterday Anna Novak visited Acme Corp in Oslo\n", encoding="utf-8")
    outputs = {}
    for name, model in (("pytorch", small_ner_model), ("onnx", exports["float32"])):
        assert cli(["tag", str(model), "--input", str(text), "--output", str(tmp_path / name), "--quiet"]) == 0
        outputs[name] = [
            [(e["text"], e["type"], e["start"]) for e in json.loads(line)]
            for line in (tmp_path / name).read_text().splitlines()
        ]
    assert outputs["onnx"] == outputs["pytorch"] and len(outputs["onnx"][0]) == 3
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from vanilla_transformer.deploy.engines import TaggerEngine
    from vanilla_transformer.deploy.server.app import Settings, create_app

    with TestClient(create_app([], Settings(), TaggerEngine(str(exports["float32"]), "cpu"))) as client:
        for _ in range(200):
            if client.get("/health").status_code == 200:
                break
        answer = client.post("/v1/ner", json={"sentences": [text.read_text().strip()]}).json()["entities"]
    assert [[(e["text"], e["type"], e["start"]) for e in found] for found in answer] == outputs["pytorch"]
    expected = line_entities(Tagger(small_ner_model, device="cpu"), [text.read_text().strip()])
    assert [e["type"] for e in answer[0]] == [e["type"] for e in expected[0]]
    for argv, named in (
        (["tag", str(exports["float32"]), "--input", str(text), "--engine", "pytorch"], "is an ONNX export"),
        (["tag", str(small_ner_model), "--input", str(text), "--engine", "onnxruntime"], "is not an ONNX export"),
        (["export-onnx", str(small_ner_model), str(exports["float32"])], "exists"),
        (["export-onnx", str(tmp_path), str(tmp_path / "x")], "has no config.json"),
    ):
        capsys.readouterr()
        assert cli(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and ": error:" in err[0] and named in err[0], err
