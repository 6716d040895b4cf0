"""`vanilla-transformer export-onnx MODEL_DIR OUTPUT_DIR`: a saved tagger's encoder and classifier as ONNX (torch's
exporter, dynamic batch and length), with its tokenizer and CRF scores, for `tag` and `serve` with ONNX Runtime.
Needs the onnx extra."""

import argparse
import sys

from ..console import output_path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model_dir", help="Saved tagger (train-ner's output directory).")
    parser.add_argument("output_dir", type=output_path, help="Directory to write the export to.")
    parser.add_argument(
        "--quantize",
        default=None,
        choices=["int8"],
        help="ONNX Runtime's dynamic int8 quantization of the weights (default: float32).",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="Replace output_dir, whole, when it is an earlier ONNX export or an empty directory; "
        "anything else is refused (a model, checkpoints, a folder that is no such export).",
    )
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    from ..deploy.onnx import export_onnx

    out = export_onnx(args.model_dir, args.output_dir, quantize=args.quantize, force=args.force)
    print(f"Exported {args.model_dir} to {out} (ONNX, {args.quantize or 'float32'}).", file=sys.stderr)
