"""The paper's Table 3 on Multi30k: the rows `recipes/ablations.sh` trains, and the table and plot of their scores.

Each row is the Multi30k recipe's model (recipes/multi30k.sh) with one change, trained for the same fixed number of
steps and scored on the tuning split (beam 4). Beside each row, the paper's nearest row of Table 3 (base model,
newstest2013, 100K steps at its scale): the same change relative to its base, so compare the differences, not the
scores.

    python recipes/ablations.py rows              # name<TAB>config change<TAB>flags<TAB>seeds, for ablations.sh
    python recipes/ablations.py second-seeds RUNS_DIR   # the same, for rows near the noise: their second seed
    python recipes/ablations.py table RUNS_DIR [--markdown FILE] [--plot PNG]
"""

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import NamedTuple

# The paper's base model on newstest2013 (Table 3): perplexity per word piece and BLEU.
PAPER_BASE_BLEU = 25.8


class Row(NamedTuple):
    name: str  # the run's directory under RUNS_DIR
    change: str  # what differs from the recipe's model, in words
    overrides: str  # config fields added to the recipe's --config_overrides
    flags: str  # training flags added to the recipe's
    paper: str  # the paper's nearest row of Table 3 ("" where it has none)
    paper_bleu: float | None  # its BLEU on newstest2013


def heads(h: int) -> str:
    return f"encoder_attention_heads={h},decoder_attention_heads={h}"


# The recipe's model: d_model 256, 3+3 layers, 4 heads (d_k 64), d_ff 1024, pre-LN, dropout 0.2 + attention dropout
# 0.1, label smoothing 0.1, sinusoidal positions, tied and scaled embeddings. The recipe's model trains with the three
# NOISE_SEEDS, which measure the noise; every other row with the first, and a row whose difference from the recipe's
# model lies within the noise (`near_noise`) with the second too.
NOISE_SEEDS = ("42", "7", "1")
ROWS = (
    Row("recipe", "none (the recipe's model)", "", "", "base", PAPER_BASE_BLEU),
    Row("heads-1", "1 head (d_k 256)", heads(1), "", "(A) h=1, d_k=512", 24.9),
    Row("heads-2", "2 heads (d_k 128)", heads(2), "", "(A) h=4, d_k=128", 25.5),
    Row("heads-8", "8 heads (d_k 32)", heads(8), "", "(A) h=16, d_k=32", 25.8),
    Row("heads-16", "16 heads (d_k 16)", heads(16), "", "(A) h=32, d_k=16", 25.4),
    Row("layers-1", "1+1 layers", "encoder_layers=1,decoder_layers=1", "", "(C) N=2", 23.7),
    Row("layers-2", "2+2 layers", "encoder_layers=2,decoder_layers=2", "", "(C) N=4", 25.3),
    Row("layers-4", "4+4 layers", "encoder_layers=4,decoder_layers=4", "", "(C) N=8", 25.5),
    Row("d_model-128", "d_model 128 (d_k 32)", "d_model=128", "", "(C) d_model=256, d_k=32", 24.5),
    Row("d_model-512", "d_model 512 (d_k 128)", "d_model=512", "", "(C) d_model=1024, d_k=128", 26.0),
    Row("d_ff-512", "d_ff 512", "encoder_ffn_dim=512,decoder_ffn_dim=512", "", "(C) d_ff=1024", 25.4),
    Row("d_ff-2048", "d_ff 2048", "encoder_ffn_dim=2048,decoder_ffn_dim=2048", "", "(C) d_ff=4096", 26.2),
    Row(
        "dropout-0",
        "no dropout (P_drop 0, attention 0)",
        "dropout=0.0,attention_dropout=0.0",
        "",
        "(D) P_drop=0.0",
        24.6,
    ),
    Row("dropout-0.3", "P_drop 0.3", "dropout=0.3", "", "(D) P_drop=0.2", 25.5),
    Row("smoothing-0", "label smoothing 0", "", "--label_smoothing_factor 0.0", "(D) eps_ls=0.0", 25.3),
    Row("smoothing-0.2", "label smoothing 0.2", "", "--label_smoothing_factor 0.2", "(D) eps_ls=0.2", 25.7),
    Row(
        "learned-positions",
        "learned positions",
        "position_embedding_type=learned",
        "",
        "(E) positional embedding",
        25.7,
    ),
    Row("post-ln", "post-LN (the paper's)", "normalize_before=false", "", "", None),
    Row("untied", "untied embeddings", "tie_word_embeddings=false", "", "", None),
    Row("unscaled-embeddings", "embeddings not x sqrt(d_model)", "scale_embedding=false", "", "", None),
    Row("unscaled-attention", "scores not / sqrt(d_k)", "scale_attention=false", "", "", None),
)


def seeds_of(row: Row) -> tuple[str, ...]:
    return NOISE_SEEDS if row.name == "recipe" else NOISE_SEEDS[:2]


def runs_of(runs: Path, row: Row) -> list[dict]:
    """The finished runs of a row (RUNS_DIR/NAME/sSEED/all_results.json), in its seeds' order."""
    found = []
    for seed in seeds_of(row):
        path = runs / row.name / f"s{seed}" / "all_results.json"
        if path.is_file():
            found.append(json.loads(path.read_text()))
    return found


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else math.nan


def scores(runs: Path) -> dict[str, list[dict]]:
    return {row.name: runs_of(runs, row) for row in ROWS}


def noise(results: dict[str, list[dict]]) -> float:
    """The spread of the recipe's seeds: their largest minus their smallest tuning-split BLEU."""
    bleus = [run["eval_bleu"] for run in results["recipe"]]
    return max(bleus) - min(bleus) if len(bleus) > 1 else math.nan


def near_noise(delta: float, spread: float) -> bool:
    """A difference no larger than the recipe's seed spread (or unknown: the spread needs two seeds)."""
    return math.isnan(spread) or abs(delta) <= spread


def second_seeds(runs: Path) -> list[Row]:
    """The rows whose first seed's difference lies within the noise: they train with the second seed too."""
    results = scores(runs)
    base, spread = mean([run["eval_bleu"] for run in results["recipe"]]), noise(results)
    return [
        row
        for row in ROWS
        if row.name != "recipe" and results[row.name] and near_noise(results[row.name][0]["eval_bleu"] - base, spread)
    ]


def markdown(runs: Path) -> str:
    """The table: one line per row with a finished run; scores are means over the row's finished seeds."""
    results = scores(runs)
    base = mean([run["eval_bleu"] for run in results["recipe"]])
    spread = noise(results)
    lines = [
        "| change from the recipe's model | tuning split sacreBLEU (seeds) | difference | minutes | steps/s "
        "| the paper's row (Table 3) | its BLEU | its difference |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in ROWS:
        done = results[row.name]
        if not done:
            continue
        bleus = [run["eval_bleu"] for run in done]
        shown = f"{mean(bleus):.2f}" + (" (" + " / ".join(f"{b:.2f}" for b in bleus) + ")" if len(bleus) > 1 else "")
        delta = mean(bleus) - base
        near = " (noise)" if row.name != "recipe" and near_noise(delta, spread) else ""
        minutes = mean([run["train_wall_seconds"] / 60 for run in done])
        rate = mean([run["train_steps_per_second"] for run in done])
        paper_delta = "" if row.paper_bleu is None else f"{row.paper_bleu - PAPER_BASE_BLEU:+.1f}"
        lines.append(
            f"| {row.change} | {shown} | {'' if row.name == 'recipe' else f'{delta:+.2f}{near}'} | {minutes:.1f} "
            f"| {rate:.2f} | {row.paper or 'none'} | {'' if row.paper_bleu is None else row.paper_bleu} "
            f"| {'' if row.name == 'recipe' else paper_delta} |"
        )
    return "\n".join(lines) + "\n"


def plot(runs: Path, png: Path) -> None:
    """Each row's difference from the recipe's model beside the paper's, the recipe's seed spread shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = scores(runs)
    base = mean([run["eval_bleu"] for run in results["recipe"]])
    rows = [row for row in ROWS if row.name != "recipe" and results[row.name]]
    ours = [mean([run["eval_bleu"] for run in results[row.name]]) - base for row in rows]
    paper = [math.nan if row.paper_bleu is None else row.paper_bleu - PAPER_BASE_BLEU for row in rows]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(rows) + 1.5))
    y = range(len(rows))
    ax.barh([i + 0.2 for i in y], ours, height=0.4, label="Multi30k, tuning split (this recipe)")
    ax.barh([i - 0.2 for i in y], paper, height=0.4, label="the paper, newstest2013 (Table 3)")
    spread = noise(results)
    if not math.isnan(spread):
        ax.axvspan(-spread, spread, color="grey", alpha=0.2, label="the recipe's seed spread")
    ax.set_yticks(list(y), [row.change for row in rows])
    ax.invert_yaxis()
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel("BLEU difference from the base model")
    ax.legend(loc="upper left", bbox_to_anchor=(0, -0.08), ncol=2, fontsize="small")  # below the axes
    fig.savefig(png, dpi=100, bbox_inches="tight")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("rows", help="the rows, one a line: name, config change, flags, seeds (tab-separated)")
    second = commands.add_parser("second-seeds", help="the same for the rows near the noise, with their second seed")
    second.add_argument("runs", type=Path, metavar="RUNS_DIR")
    table = commands.add_parser("table", help="the table (and plot) of the finished runs under RUNS_DIR")
    table.add_argument("runs", type=Path, metavar="RUNS_DIR")
    table.add_argument("--markdown", type=Path, help="write the table here (default: print it)")
    table.add_argument("--plot", type=Path, help="draw the differences into this PNG")
    args = parser.parse_args(argv)
    if args.command in ("rows", "second-seeds"):
        second = args.command == "second-seeds"
        for row in second_seeds(args.runs) if second else ROWS:
            seeds = NOISE_SEEDS[1:2] if second else NOISE_SEEDS if row.name == "recipe" else NOISE_SEEDS[:1]
            print("\t".join((row.name, row.overrides or "-", row.flags or "-", " ".join(seeds))))
        return 0
    if not args.runs.is_dir():
        print(f"error: {args.runs}: no such directory", file=sys.stderr)
        return 2
    text = markdown(args.runs)
    if args.markdown:
        args.markdown.write_text(text)
    else:
        print(text, end="")
    if args.plot:
        plot(args.runs, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
