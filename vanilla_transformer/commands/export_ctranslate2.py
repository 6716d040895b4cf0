"""`vanilla-transformer export-ctranslate2 MODEL_DIR OUTPUT_DIR`: convert a saved translation model (a directory or
Hub id) to a CTranslate2 model directory, the tokenizer included."""

import argparse
import sys

from ..console import output_path

QUANTIZATIONS = ("float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model_dir", help="Saved translation model (save_pretrained directory or Hub id).")
    parser.add_argument("output_dir", type=output_path, help="Directory to write the CTranslate2 model to.")
    parser.add_argument(
        "--quantization",
        default=None,
        choices=QUANTIZATIONS,
        help="Weight type stored in the export (default float32); int8 is the fast CPU choice.",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="Replace output_dir, whole, when it is an earlier CTranslate2 export or an empty directory; "
        "anything else is refused (a model, checkpoints, a folder that is no such export).",
    )
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    from ..deploy.ctranslate2 import export_ctranslate2

    out = export_ctranslate2(args.model_dir, args.output_dir, quantization=args.quantization, force=args.force)
    print(
        f"Exported {args.model_dir} to {out} (CTranslate2, quantization {args.quantization or 'float32'}).",
        file=sys.stderr,
    )
