"""Serving trained models, the engines apart from the HTTP server: the engines behind the file commands and `serve`
(`translators`: PyTorch or CTranslate2; `taggers`: PyTorch or ONNX Runtime), an engine as the server holds it
(`engines`), the exports (`ctranslate2`, `onnx`), the demo page (`demo_page`), and the HTTP server in `server/`. Each
takes a model directory recognised once, `vanilla_transformer.model_dirs.ModelDir`, which also names its engine."""
