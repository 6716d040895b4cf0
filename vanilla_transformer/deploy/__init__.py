"""Serving trained models: the file commands' engines (`translators`, `taggers`), the exports (`ctranslate2`, `onnx`),
the demo page (`demo_page`) and the HTTP server (the app factory in `app`, LibreTranslate's routes in
`libretranslate`, ours in `v1`, the models in `engines`, language pairs and detection in `languages`, the dynamic
batcher in `batcher`, the metrics in `prometheus`). Engines are chosen from a directory by
`vanilla_transformer.model_dirs.resolve_engine`."""
