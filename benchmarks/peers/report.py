"""The peers' table and plot from their runs' `scores.json` (score.py): for each system, training tokens/s, the minutes
to validation BLEU 35 / 38 / 40 (the first checkpoint at or above it) and the best BLEU within `--minutes`; and the
BLEU of every checkpoint against the minutes since the run's start, in one PNG.

    python benchmarks/peers/report.py outputs/peers/ours outputs/peers/opennmt --out docs/images/peers.png

Training tokens/s (source + target, padding excluded): vanilla-transformer's `train_results.json`; OpenNMT-py's own
report (`N/M tok/s` lines of train.log: source / target tokens per second), averaged over the run.
"""

import argparse
import json
import os
import re

THRESHOLDS = (35, 38, 40)


def tokens_per_second(run: str) -> float | None:
    results = os.path.join(run, "train_results.json")
    if os.path.isfile(results):
        with open(results) as f:
            return json.load(f).get("train_tokens_per_second")
    log = os.path.join(run, "train.log")
    if not os.path.isfile(log):
        return None
    with open(log, encoding="utf-8", errors="replace") as f:
        rates = [int(src) + int(tgt) for src, tgt in re.findall(r"(\d+)/\s*(\d+) tok/s", f.read())]
    return sum(rates) / len(rates) if rates else None


def summary(run: str, minutes: float) -> dict:
    with open(os.path.join(run, "scores.json")) as f:
        scores = json.load(f)
    points = [(c["minutes"], c["bleu"]) for c in scores["checkpoints"]]
    within = [bleu for minute, bleu in points if minute <= minutes]
    return dict(
        system=scores["system"],
        points=points,
        tokens_per_second=tokens_per_second(run),
        best=max(within) if within else None,
        reached={t: next((minute for minute, bleu in points if bleu >= t), None) for t in THRESHOLDS},
    )


def markdown(rows: list[dict], minutes: float) -> str:
    lines = [
        "| system | training tokens/s | "
        + " | ".join(f"minutes to BLEU {t}" for t in THRESHOLDS)
        + f" | best BLEU within {minutes:g} min |",
        "| --- " * (3 + len(THRESHOLDS)) + "|",
    ]
    for row in rows:
        rate = f"{row['tokens_per_second']:,.0f}" if row["tokens_per_second"] else "-"
        reached = [f"{row['reached'][t]:.1f}" if row["reached"][t] is not None else "not reached" for t in THRESHOLDS]
        best = f"{row['best']:.2f}" if row["best"] is not None else "-"
        lines.append(f"| {row['system']} | {rate} | " + " | ".join(reached) + f" | {best} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="Run folders holding scores.json")
    parser.add_argument("--minutes", type=float, default=60, help="The time budget of the best-BLEU column")
    parser.add_argument("--out", default=None, help="Also draw the curves into this PNG (needs matplotlib)")
    args = parser.parse_args(argv)
    for run in args.runs:
        if not os.path.isfile(os.path.join(run, "scores.json")):
            raise SystemExit(f"error: {run}/scores.json not found: score the run first (score.py)")
    rows = [summary(run, args.minutes) for run in args.runs]
    print(markdown(rows, args.minutes))
    if args.out:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.5))
        for row in rows:
            ax.plot(*zip(*row["points"]), "o-", label=row["system"])
        for t in THRESHOLDS:
            ax.axhline(t, color="grey", linewidth=0.6, linestyle=":")
        ax.set_xlabel("minutes since the start of the run"), ax.set_ylabel("validation BLEU (sacreBLEU, beam 4)")
        ax.set_ylim(bottom=0), ax.grid(alpha=0.3), ax.legend()
        fig.tight_layout()
        fig.savefig(args.out, dpi=110)
        print(args.out)


if __name__ == "__main__":
    main()
