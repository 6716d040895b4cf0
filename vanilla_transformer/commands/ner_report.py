"""`vanilla-transformer ner-report PREDICTIONS --train_file TRAIN`: precision, recall and F1 per entity type for all
entities, those whose words were all seen in training and those with a word never seen (ner/analysis.py).

    vanilla-transformer ner-report outputs/conll/predictions_validation.txt --train_file conll2003/train.txt

PREDICTIONS holds `token gold predicted` a line, a blank line between sentences, as the training command writes;
`--json` writes the report to a file too.
"""

import argparse
import json

from ..console import output_path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("predictions", help="A predictions file (token gold predicted).")
    parser.add_argument("--train_file", required=True, help="The CoNLL file the tagger was trained on.")
    parser.add_argument("--json", type=output_path, default=None, help="Also write the report to this JSON file.")
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    from ..files import refuse_overwriting, write_lines
    from ..ner.analysis import format_report, seen_unseen_report

    refuse_overwriting([args.json], [args.predictions, args.train_file])
    report = seen_unseen_report(args.predictions, args.train_file)
    print(format_report(report))
    if args.json:
        write_lines(args.json, [json.dumps(report, indent=2)])
