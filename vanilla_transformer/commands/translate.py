"""`vanilla-transformer translate MODEL_DIR`: translate lines of text (a file or stdin) with a saved or exported model;
one line out per line in, in order (empty lines stay empty)."""

import argparse

from ..console import (
    add_device_argument,
    add_engine_argument,
    add_file_arguments,
    non_negative_int,
    positive_int,
    print_file_stats,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model_dir", help="Saved translation model, or a directory exported by export-ctranslate2.")
    add_file_arguments(parser, "translate", batch_size=64)
    add_engine_argument(
        parser,
        "translation",
        "auto: CTranslate2 for an exported directory, PyTorch otherwise; "
        "ctranslate2 on a saved PyTorch model converts it on the fly.",
    )
    parser.add_argument(
        "--num_beams",
        type=positive_int,
        default=None,
        help="Beam size (1: greedy; default: the model's generation config, with its length penalty).",
    )
    parser.add_argument(
        "--max_new_tokens",
        type=positive_int,
        default=None,
        help="Longest translation in tokens (default: the model's generation config; 256 for CTranslate2).",
    )
    parser.add_argument(
        "--compute_type",
        default="default",
        help="CTranslate2 only: int8, int8_float32, float32, ... (default: the export's type); on a "
        "GPU float16, int8_float16, bfloat16.",
    )
    parser.add_argument(
        "--ensemble_with",
        nargs="+",
        default=None,
        metavar="MODEL_DIR",
        help="More saved translation models (same tokenizer): translate with the ensemble of all, the "
        "members' log-probabilities averaged at each step (PyTorch engine).",
    )
    add_device_argument(parser)
    parser.add_argument(
        "--threads",
        type=non_negative_int,
        default=0,
        help="CPU threads (default 0: all cores). CTranslate2 translates that many batches at once, one thread each.",
    )
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    from ..deploy.translators import translate_file
    from ..files import files_of, refuse_overwriting
    from ..loading import no_progress_bars

    models = [args.model_dir, *(args.ensemble_with or ())]
    refuse_overwriting([args.output], [args.input, *models, *files_of(*models)])

    if args.quiet:
        no_progress_bars()
    stats = translate_file(
        args.model_dir,
        args.input,
        args.output,
        engine=args.engine,
        batch_size=args.batch_size,
        progress=not args.quiet,
        num_beams=args.num_beams,
        max_new_tokens=args.max_new_tokens,
        compute_type=args.compute_type,
        device=args.device,
        threads=args.threads,
        ensemble_with=args.ensemble_with or (),
    )
    print_file_stats(stats, args.stats)
