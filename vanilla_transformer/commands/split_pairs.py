"""`vanilla-transformer split-pairs PREFIX OUTPUT_DIR --source_lang SRC --target_lang TGT`: hold out a tuning split of
the parallel files PREFIX.SRC and PREFIX.TGT by line pair, so that every choice is made without looking at validation.

    vanilla-transformer split-pairs multi30k/train outputs/multi30k-split --source_lang de --target_lang en

Writes OUTPUT_DIR/train.{SRC,TGT} and OUTPUT_DIR/tune.{SRC,TGT}: the same pairs for the same seed, each file in the
input's order, line i of one side the translation of line i of the other. Tune on the tune files; score validation
once, at the end.
"""

import argparse
import os

from ..console import output_path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("train", help="PREFIX of the parallel files PREFIX.SRC and PREFIX.TGT.")
    parser.add_argument("output_dir", type=output_path, help="Where the train and tune files go.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--source_lang", required=True)
    parser.add_argument("--target_lang", required=True)
    parser.add_argument(
        "--fraction",
        type=float,
        default=0.035,
        help="Share of the pairs held out (default 0.035: 1015 of Multi30k's 29000).",
    )
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    from ..data.splits import split_pairs

    counts = split_pairs(args.train, args.output_dir, args.source_lang, args.target_lang, args.fraction, args.seed)
    print(
        f"{counts['train_pairs']} pairs in {os.path.join(args.output_dir, 'train')}.*, {counts['tune_pairs']} in "
        f"{os.path.join(args.output_dir, 'tune')}.* (seed {args.seed})."
    )
