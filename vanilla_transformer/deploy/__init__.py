"""Serving trained models: the file commands (`translate`, `tag`), the exports (CTranslate2, ONNX Runtime) and the HTTP
server (`serve`: the app factory in `app`, LibreTranslate's routes in `libretranslate`, ours in `v1`, the models in
`engines`, the dynamic batcher in `batcher`, the metrics in `prometheus`). Engines are chosen from a directory
by `vanilla_transformer.loading.resolve_engine`.

    from vanilla_transformer.deploy import translate_file, tag_file, export_ctranslate2, export_onnx, Tagger
"""

import importlib

# public name -> the module of this package that defines it (imported when first asked for: torch, CTranslate2,
# ONNX Runtime and FastAPI load only for what is used)
NAMES = {"translate_file": "translate", "translate_lines": "translate", "make_translator": "translate",
         "tag_file": "tag", "tag_lines": "tag", "Tagger": "tag", "export_ctranslate2": "ctranslate2",
         "export_onnx": "onnx", "OnnxTagger": "tag", "create_app": "app", "Settings": "settings",
         "TranslationEngine": "engines", "TaggerEngine": "engines", "DynamicBatcher": "batcher"}
__all__ = list(NAMES)


def __getattr__(name: str):
    if name not in NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{NAMES[name]}", __name__), name)
