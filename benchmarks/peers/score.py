"""Scores a system's checkpoints: each one's translation of the validation set (beam 4) scored with sacreBLEU (cased,
13a, as vanilla-transformer's `eval_bleu`), against the minutes from the run's start (`start_time`, seconds since the
epoch) to the checkpoint being written. Two layouts: OpenNMT-py's `model_step_N.pt` with its translation in pieces,
`model_step_N.hyp` (detokenized here), and vanilla-transformer's `checkpoint-N/` with its text, `checkpoint-N.hyp`
(`--text`). Writes `scores.json` in the run folder.

    python benchmarks/peers/score.py outputs/peers/opennmt outputs/peers/data/validation.en --system "OpenNMT-py 3.5.1"
"""

import argparse
import glob
import json
import os
import re

import sacrebleu
from prepare import detokenize


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="The run folder: start_time, *_step_N.pt checkpoints and their *_step_N.hyp")
    parser.add_argument("references", help="The validation references, one a line")
    parser.add_argument("--system", required=True, help="The system's name and version, for the report")
    parser.add_argument("--text", action="store_true", help="The translations are text, not pieces")
    args = parser.parse_args(argv)
    with open(os.path.join(args.run, "start_time")) as f:
        start = float(f.read())
    with open(args.references, encoding="utf-8") as f:
        references = f.read().splitlines()
    rows = []
    for hyp in glob.glob(os.path.join(args.run, "*.hyp")):
        step = int(re.search(r"(?:_step_|checkpoint-)(\d+)\.hyp$", hyp).group(1))
        with open(hyp, encoding="utf-8") as f:
            hypotheses = [line if args.text else detokenize(line) for line in f.read().splitlines()]
        if len(hypotheses) != len(references):
            raise SystemExit(f"error: {hyp} has {len(hypotheses)} lines for {len(references)} references")
        checkpoint = hyp[: -len(".hyp")]
        written = (
            checkpoint + ".pt" if os.path.isfile(checkpoint + ".pt") else os.path.join(checkpoint, "model.safetensors")
        )
        rows.append(
            {
                "step": step,
                "minutes": (os.path.getmtime(written) - start) / 60,
                "bleu": sacrebleu.corpus_bleu(hypotheses, [references]).score,
            }
        )
    rows.sort(key=lambda row: row["step"])
    with open(os.path.join(args.run, "scores.json"), "w") as f:
        json.dump({"system": args.system, "checkpoints": rows}, f, indent=1)
    for row in rows:
        print(f"{args.system}: step {row['step']:>6}, {row['minutes']:6.1f} min, BLEU {row['bleu']:5.2f}")


if __name__ == "__main__":
    main()
