"""`vanilla-transformer tune-decoding MODEL_DIR --source TUNE.SRC --reference TUNE.TGT`: the beam size and length
penalty that translate a tuning split best (sacreBLEU), chosen without looking at validation; `--save` writes them
into MODEL_DIR/generation_config.json, which `generate`, the pipeline, `translate` (both engines), `serve` and the
demo decode with (an export of the model carries the file: export again after saving, or tune the export itself).

    vanilla-transformer tune-decoding outputs/multi30k --source split/tune.de --reference split/tune.en \\
      --num_beams 4 --length_penalty 0.4 0.6 0.8 1.0 --save

Prints a line per setting and the choice (the best BLEU; a tie goes to the setting listed first); `--output` also
writes them as JSON.
"""

import argparse
import itertools
import json
import math
import os
from typing import TYPE_CHECKING

from ..console import add_device_argument, add_engine_argument, output_path, positive_int

if TYPE_CHECKING:
    from ..model_dirs import ModelDir


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", help="Saved translation model, or a directory exported by export-ctranslate2.")
    parser.add_argument("--source", required=True, help="The tuning split's source sentences, one a line.")
    parser.add_argument("--reference", required=True, help="Their reference translations, line for line.")
    parser.add_argument("--num_beams", type=positive_int, nargs="+", default=[4], help="Beam sizes to try (default 4).")
    parser.add_argument(
        "--length_penalty",
        type=float,
        nargs="+",
        default=[0.4, 0.6, 0.8, 1.0],
        help="Length penalties to try (default 0.4 0.6 0.8 1.0; 1: the mean log-probability per "
        "token, larger favours longer translations; above 1 the PyTorch and CTranslate2 "
        "engines translate differently).",
    )
    parser.add_argument(
        "--save",
        action="store_true",
        help="Write the choice into MODEL_DIR/generation_config.json (default: only print it).",
    )
    parser.add_argument("--output", type=output_path, default=None, help="Also write every score to this JSON file.")
    parser.add_argument("--batch_size", type=positive_int, default=64, help="Sentences per batch (default 64).")
    add_engine_argument(parser, "translation", "auto: CTranslate2 for an exported directory, PyTorch otherwise.")
    add_device_argument(parser)
    return parser


def tune(translate, sources: list[str], references: list[str], settings, batch_size: int = 64) -> list[dict]:
    """sacreBLEU of `translate` (a translator of deploy/translators.py) on `sources` for each (beams, length penalty)
    of `settings`."""
    import sacrebleu

    from ..deploy.translators import translate_lines

    scores = []
    for num_beams, length_penalty in settings:
        translate.set_decoding(num_beams, length_penalty)
        hypotheses = translate_lines(translate, sources, batch_size)
        bleu = sacrebleu.metrics.BLEU().corpus_score(hypotheses, [references]).score
        scores.append({"num_beams": num_beams, "length_penalty": length_penalty, "bleu": bleu})
        print(f"num_beams {num_beams}, length_penalty {length_penalty}: sacreBLEU {bleu:.2f}", flush=True)
    return scores


def save_decoding(model: "ModelDir", num_beams: int, length_penalty: float) -> str:
    """The choice written into the model's generation_config.json (the rest of the file, as read when the model was
    recognised, kept; written atomically)."""
    from transformers import GenerationConfig

    from ..files import write_text

    path = os.path.join(model.path, "generation_config.json")
    config = GenerationConfig.from_dict(model.json("generation_config.json"))
    config.update(num_beams=num_beams, length_penalty=length_penalty)
    config.validate(strict=True)
    write_text(path, config.to_json_string(use_diff=True))
    return path


def main(argv=None) -> dict:
    args = build_parser().parse_args(argv)
    from ..deploy.translators import make_translator
    from ..files import files_of, read_lines, refuse_overwriting, write_text
    from ..loading import is_local_dir, no_progress_bars
    from ..model_dirs import recognise

    bad = [penalty for penalty in args.length_penalty if not math.isfinite(penalty)]
    if bad:  # (never saved into a model's generation config, nor tried)
        raise ValueError(f"--length_penalty {bad[0]} is not a finite number.")
    refuse_overwriting([args.output], [args.source, args.reference, args.model_dir, *files_of(args.model_dir)])
    if args.save and not is_local_dir(args.model_dir):  # (a Hub id: nothing local to write into)
        raise ValueError(
            f"--save writes into the model's directory, and {args.model_dir!r} is none: download the "
            "model first, or leave --save out."
        )
    sources, references = read_lines(args.source), read_lines(args.reference)
    if len(sources) != len(references):
        raise ValueError(
            f"{args.source} has {len(sources)} lines but {args.reference} has {len(references)}: one reference a line."
        )
    no_progress_bars()
    found = recognise(args.model_dir, args.engine, "translation")
    translate = make_translator(found, device=args.device)
    settings = dict.fromkeys(
        (beams, penalty if beams > 1 else 1.0)  # (greedy search has no length penalty)
        for beams, penalty in itertools.product(args.num_beams, args.length_penalty)
    )
    scores = tune(translate, sources, references, settings, args.batch_size)
    best = max(scores, key=lambda s: s["bleu"])  # (the first of equal scores)
    print(
        f"chosen: num_beams {best['num_beams']}, length_penalty {best['length_penalty']} "
        f"(sacreBLEU {best['bleu']:.2f} on {args.source})"
    )
    result = {"scores": scores, "chosen": best}
    if args.save:
        print(f"written into {save_decoding(found, best['num_beams'], best['length_penalty'])}")
    if args.output:
        write_text(args.output, json.dumps(result, indent=2))
    return result
