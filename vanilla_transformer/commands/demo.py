"""`vanilla-transformer demo [MODEL_DIR] [--ner_model TAGGER_DIR]`: the demo page in the browser (Gradio): translate a
sentence and see the cross-attention, tag the entities of a text.

    vanilla-transformer demo outputs/demo [--ner_model outputs/ner] [--port 7860]

Models come from a local directory or a Hub id; a tab shows only when its model is given. Input problems (empty text,
text longer than the model reads) and a model that fails to load are shown as messages in the page.
"""

import argparse
import logging
import os
import sys

from ..console import add_device_argument, port_number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vanilla-transformer demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "model_dir",
        nargs="?",
        default=None,
        help="Translation model (directory or Hub id). With no model at all: outputs/demo and "
        "outputs/demo-ner where they exist.",
    )
    parser.add_argument("--translation_model", default=None, help="The same as MODEL_DIR.")
    parser.add_argument("--ner_model", default=None, help="Named-entity tagger (directory or Hub id).")
    parser.add_argument(
        "--ctranslate2_model",
        default=None,
        help="An export of the translation model (export-ctranslate2) for the CTranslate2 engine; "
        "default: converted on first use (int8) when ctranslate2 is installed.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="Address to serve on (default: this machine only).")
    parser.add_argument("--port", type=port_number, default=7860)
    add_device_argument(parser)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.model_dir and args.translation_model and args.model_dir != args.translation_model:
        parser.error("give the translation model once: MODEL_DIR or --translation_model")
    translation_model, ner_model = args.model_dir or args.translation_model, args.ner_model
    given = bool(translation_model or ner_model)  # models named on the command line must load before serving
    from ..deploy.demo_page import DEFAULT_MODELS, build_app

    if not translation_model and not ner_model:  # what `make demo` (and train-ner --output_dir outputs/demo-ner) wrote
        translation_model, ner_model = (d if os.path.isdir(d) else None for d in DEFAULT_MODELS)
        if translation_model or ner_model:
            print(
                f"No model given: showing {' and '.join(filter(None, (translation_model, ner_model)))}.",
                file=sys.stderr,
            )
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    app = build_app(translation_model, ner_model, args.ctranslate2_model, args.device, strict=given)
    app.launch(server_name=args.host, server_port=args.port)
    return 0
