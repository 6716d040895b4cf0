"""`vanilla-transformer tag MODEL_DIR`: the named entities of text (a file or stdin) with a trained tagger.
--format text: one sentence or paragraph a line in, a JSON array of its entities a line out ({text, type, start, end,
score}, character offsets into the line). --format conll: CoNLL columns in, the same lines with the predicted tag
appended out."""

import argparse

from ..console import add_device_argument, add_engine_argument, add_file_arguments, print_file_stats
from ..deploy.taggers import TAG_FORMATS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model_dir", help="Saved tagger (train-ner's output directory or a Hub id).")
    add_file_arguments(parser, "tag", batch_size=32)
    parser.add_argument("--format", default="text", choices=TAG_FORMATS, help="Input and output format.")
    parser.add_argument(
        "--document_consistency",
        action="store_true",
        help="Make tags consistent within each document (text: paragraphs between blank lines; "
        "CoNLL: -DOCSTART- sections), as train-ner --document_consistency.",
    )
    parser.add_argument(
        "--ensemble_with",
        nargs="+",
        default=None,
        metavar="TAGGER",
        help="More saved taggers (same labels and tokenizer): tag with the ensemble of all.",
    )
    add_device_argument(parser)
    add_engine_argument(
        parser, "tagging", "auto: ONNX Runtime for a directory written by export-onnx, PyTorch otherwise."
    )
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    from ..deploy.taggers import tag_file
    from ..files import files_of, refuse_overwriting
    from ..loading import no_progress_bars

    models = [args.model_dir, *(args.ensemble_with or ())]
    refuse_overwriting([args.output], [args.input, *models, *files_of(*models)])

    if args.quiet:
        no_progress_bars()
    stats = tag_file(
        args.model_dir,
        args.input,
        args.output,
        form=args.format,
        batch_size=args.batch_size,
        document_consistency=args.document_consistency,
        ensemble_with=args.ensemble_with or (),
        device=args.device,
        progress=not args.quiet,
        engine=args.engine,
    )
    print_file_stats(stats, args.stats)
