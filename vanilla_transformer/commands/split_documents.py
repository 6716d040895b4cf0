"""`vanilla-transformer split-documents TRAIN_FILE OUTPUT_DIR`: hold out a tuning split of a CoNLL training file by
document, so that every choice is made without looking at validation.

    vanilla-transformer split-documents conll2003/train.txt outputs/conll-split --fraction 0.1 --seed 0

Writes OUTPUT_DIR/train.txt and OUTPUT_DIR/tune.txt: whole documents (`-DOCSTART-` blocks), the same ones for the same
seed, each file in the input's order. Tune on tune.txt; score validation once, at the end.
"""

import argparse
import os

from ..console import output_path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("train", help="A CoNLL file with -DOCSTART- lines.")
    parser.add_argument("output_dir", type=output_path, help="Where the train and tune files go.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fraction", type=float, default=0.1, help="Share of the documents held out (default 0.1).")
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    from ..data.splits import split_documents

    counts = split_documents(args.train, args.output_dir, args.fraction, args.seed)
    print(
        f"{counts['train_documents']} documents in {os.path.join(args.output_dir, 'train.txt')}, "
        f"{counts['tune_documents']} in {os.path.join(args.output_dir, 'tune.txt')} (seed {args.seed})."
    )
