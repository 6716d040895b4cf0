"""`vanilla-transformer score HYPOTHESES REFERENCES`: sacreBLEU (cased, detokenized, 13a: the comparable number) and the
paper's tokenized, compound-split BLEU of a translation file against its references (evaluation/paper_bleu.py).

    vanilla-transformer score HYPOTHESES REFERENCES [--lang de] [--output scores.json]
"""

import argparse
import json

from ..console import output_path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("hypotheses", help="translations, one a line (UTF-8)")
    parser.add_argument("references", help="reference translations, line i for line i")
    parser.add_argument("--lang", default="de", help="the target language, for the Moses tokenizer (default de)")
    parser.add_argument("--output", type=output_path, default=None, help="also write the scores to this JSON file")
    return parser


def main(argv=None) -> dict:
    args = build_parser().parse_args(argv)
    from ..evaluation.paper_bleu import score
    from ..files import read_lines, refuse_overwriting, write_text

    refuse_overwriting([args.output], [args.hypotheses, args.references])
    result = score(read_lines(args.hypotheses), read_lines(args.references), args.lang)
    print(json.dumps(result, indent=2))
    if args.output:
        write_text(args.output, json.dumps(result, indent=2))
    return result
