"""A tagger for ONNX Runtime (`vanilla-transformer export-onnx`): the encoder and classifier exported by torch's ONNX
exporter (dynamic batch and length), the tokenizer beside it, and the CRF's scores (when the head has one) in
`onnx_tagger.json`, decoded in numpy as the PyTorch head decodes them. `vanilla-transformer tag` and `serve` run such a
directory with ONNX Runtime (`deploy.taggers.OnnxTagger`; `--engine onnxruntime`, chosen by themselves for an
export)."""

import json
import os

import torch

from ..files import refuse_overwriting, replaced_atomically
from ..loading import check_finite, require
from ..model_card import copy_card
from ..model_dirs import ONNX_META, ModelDir, check_export_target, recognise


class Emissions(torch.nn.Module):
    """The tagger's per-token scores before any CRF: (input_ids, attention_mask) -> (B, T, labels)."""

    def __init__(self, tagger):
        super().__init__()
        self.tagger = tagger

    def forward(self, input_ids, attention_mask):
        hidden = self.tagger.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.tagger.classifier(hidden)


class TabulatedCharacterFeatures(torch.nn.Module):
    """The character features with the CNN's output computed once for every vocabulary entry: at inference it depends
    on the token id alone, so the export looks it up (a (vocab, F) table) instead of running the CNN on every token.
    The same numbers; the CNN and its masking were about a third of ONNX Runtime's time on the CoNLL tagger."""

    def __init__(self, features):
        super().__init__()
        self.features = features
        with torch.no_grad():
            table = features.token_features(torch.arange(features.token_chars.shape[0]))  # (vocab, F)
        self.register_buffer("table", table)

    def forward(self, input_ids):
        return self.features.pool_words(self.table[input_ids], input_ids)


def export_onnx(model, output_dir, quantize: str | None = None, force: bool = False) -> str:
    """Export a saved tagger for ONNX Runtime (`Tagger`, `tag`, `serve` run it): `vanilla-transformer export-onnx`.

    Args:
        model: a saved tagger (a path or Hub id) or its `model_dirs.ModelDir`; output_dir: where to write `model.onnx`,
            the tokenizer, `onnx_tagger.json` and the model card (whole, then renamed into place); it is returned.
        quantize: None (float32) or "int8" (ONNX Runtime's dynamic int8 quantization of the weights); force: replace
            `output_dir` if it is an earlier ONNX export or an empty directory (never anything else).

    Raises:
        ImportError: onnx is not installed (the `onnx` extra).
        OSError: no such model (FileNotFoundError), an `output_dir` it may not replace (FileExistsError), bad JSON.
        ValueError: a `quantize` out of range, not a saved tagger, an `output_dir` that holds it, non-finite weights.
    """
    require("onnx")  # the exporter needs it (and onnxscript): a clear error first

    from ..model.modeling_vanilla_transformer import VanillaTransformerForTokenClassification

    if quantize not in (None, "int8"):
        raise ValueError(f"quantize must be int8 or none, got {quantize!r}.")
    found = model if isinstance(model, ModelDir) else recognise(model, task="tagging")
    if found.format != "saved":
        raise ValueError(f"{found.path!r} is not a saved tagger but an export: export-onnx exports saved taggers.")
    model_dir = found.path
    check_export_target(output_dir, force, "export-onnx")
    refuse_overwriting([], [model_dir], replaced=[output_dir])  # (--force replaces the directory whole)
    tokenizer = found.tokenizer()
    tagger = found.load(VanillaTransformerForTokenClassification, attn_implementation="eager").eval()
    check_finite(tagger.state_dict().items(), model_dir)
    encoder = tagger.model.encoder
    if encoder.char_features is not None:
        encoder.char_features = TabulatedCharacterFeatures(encoder.char_features)
    with replaced_atomically(output_dir) as staging:  # a finished export or none: never half a directory
        os.makedirs(staging)
        ids = torch.full((2, 8), 5, dtype=torch.long)
        mask = torch.ones_like(ids)
        batch, length = torch.export.Dim("batch"), torch.export.Dim("length", max=1 << 16)
        path = os.path.join(staging, "model.onnx")
        exported = os.path.join(staging, "float32.onnx") if quantize else path
        torch.onnx.export(
            Emissions(tagger).eval(),
            (ids, mask),
            exported,
            dynamo=True,
            input_names=["input_ids", "attention_mask"],
            output_names=["logits"],
            dynamic_shapes=({0: batch, 1: length}, {0: batch, 1: length}),
        )
        if quantize == "int8":  # the int8 model holds its weights: the float32 files go
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(exported, path, weight_type=QuantType.QInt8)
            for name in os.listdir(staging):
                if name.startswith("float32.onnx"):
                    os.remove(os.path.join(staging, name))
        tokenizer.save_pretrained(staging)
        with open(os.path.join(staging, ONNX_META), "w", encoding="utf-8") as f:
            json.dump(export_meta(tagger, quantize, model_dir), f, indent=1)
        copy_card(model_dir, staging)
    return output_dir


def export_meta(tagger, quantize: str | None, model_dir: str) -> dict:
    """What `onnx_tagger.json` tells the engine beside the graph: the labels, the longest input, the CRF's scores."""
    config, crf = tagger.config, None
    if tagger.crf is not None:
        c = tagger.crf
        crf = {
            "start": (c.start_transitions + c.start_penalty).tolist(),
            "end": c.end_transitions.tolist(),
            "transitions": (c.transitions + c.transition_penalty).tolist(),
        }
    return {
        "labels": [config.id2label[i] for i in range(config.num_labels)],
        "max_position_embeddings": config.max_position_embeddings,
        "crf": crf,
        "quantization": quantize or "float32",
        "source": os.path.basename(os.path.normpath(str(model_dir))),
    }
