"""PNG pictures of a run and a model:

    vanilla-transformer plot curves   OUTPUT_DIR                  # loss / eval curves from trainer_state.json
    vanilla-transformer plot attention MODEL_DIR "source sentence" # encoder self, decoder self and cross attention
    vanilla-transformer plot positions [--d_model 128 --length 100] # the sinusoidal position encoding (section 3.5)
    vanilla-transformer plot quality-vs-time RUN_DIR [RUN_DIR ...]  # validation score against training minutes

Each writes PNG files (default: next to the input, or --out DIR) and prints their paths.
"""

import argparse
import math
import os

from ..attention_pictures import draw_attention, pyplot
from ..console import output_path, positive_int
from ..loading import log_history


def save_figure(fig, out_dir: str, name: str, dpi: int = 120) -> str:
    """Lay out, write OUT_DIR/NAME and close the figure (pyplot keeps every open figure alive); returns the path."""
    fig.tight_layout()
    target = os.path.join(out_dir, name)
    fig.savefig(target, dpi=dpi)
    pyplot().close(fig)
    return target


def plot_curves(run_dir: str, out_dir: str) -> list[str]:
    plt = pyplot()
    history = read_log_history(run_dir)
    train = [(h["step"], h["loss"]) for h in history if number(h.get("loss"))]
    evals = {
        k: [(h["step"], h[k]) for h in history if number(h.get(k))]
        for k in {k for h in history for k in h if k.startswith("eval_") and number(h[k])}
        if k not in ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second")
    }
    fig, axes = plt.subplots(1, 1 + bool(evals), figsize=(11 if evals else 6, 4), squeeze=False)
    ax = axes[0][0]
    if train:
        ax.plot(*zip(*train), label="train loss")
    if evals.get("eval_loss"):
        ax.plot(*zip(*evals.pop("eval_loss")), "o-", label="eval loss")
    ax.set_xlabel("step"), ax.set_ylabel("loss"), ax.set_yscale("log"), ax.legend(), ax.grid(alpha=0.3)
    if evals:
        ax = axes[0][1]
        for key, points in sorted(evals.items()):
            if points:
                ax.plot(*zip(*points), "o-", label=key)
        ax.set_xlabel("step"), ax.set_title("evaluation"), ax.legend(), ax.grid(alpha=0.3)
    return [save_figure(fig, out_dir, "curves.png")]


def number(value) -> bool:
    """A logged value that plots: a finite int or float (not a bool, a string, a NaN)."""
    return type(value) in (int, float) and math.isfinite(value)


def read_log_history(run_dir: str) -> list[dict]:
    path = os.path.join(run_dir, "trainer_state.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} not found: plot a directory a training run wrote.")
    return log_history(path)


QUALITY_METRICS = ("eval_bleu", "eval_f1")


def plot_quality_vs_time(run_dirs: list[str], out_dir: str, metric: str | None = None) -> list[str]:
    """The validation score of each evaluation against the training minutes before it (evaluations excluded), one
    line per run (runs that evaluated during training, e.g. --eval_strategy epoch)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for run_dir in run_dirs:
        history = [h for h in read_log_history(run_dir) if "train_minutes" in h]
        key = metric or next((k for k in QUALITY_METRICS if any(k in h for h in history)), None)
        points = [(h["train_minutes"], h[key]) for h in history if number(h.get(key)) and number(h["train_minutes"])]
        if not points:
            raise ValueError(
                f"{run_dir}: no evaluation with training minutes ({metric or ' or '.join(QUALITY_METRICS)}"
                ") in trainer_state.json; train with --eval_strategy epoch."
            )
        ax.plot(*zip(*points), "o-", label=os.path.basename(os.path.normpath(run_dir)))
        metric = key
    ax.set_xlabel("training minutes (evaluations excluded)")
    ax.set_ylabel(f"validation {metric.removeprefix('eval_')}")
    ax.grid(alpha=0.3), ax.legend()
    return [save_figure(fig, out_dir, "quality_vs_time.png", dpi=110)]


def plot_attention(model_dir: str, text: str, out_dir: str) -> list[str]:
    import torch

    from ..model.modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration
    from ..model_dirs import recognise

    found = recognise(model_dir, task="translation")  # a missing or other kind of model named before anything loads
    if found.format != "saved":
        raise ValueError(f"{found.path!r} is an export: the attention is drawn from the saved model.")
    tokenizer = found.tokenizer()
    model = found.load(VanillaTransformerForConditionalGeneration, attn_implementation="eager").eval()
    enc = tokenizer([text], return_tensors="pt", return_token_type_ids=False)
    with torch.no_grad():
        generated = model.generate(**enc, max_new_tokens=64, num_beams=1)
        # one teacher-forced pass over the translation: row i is where the decoder looked while producing token i
        out = model(**enc, decoder_input_ids=generated[:, :-1], output_attentions=True)
    src = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    seen, produced = (tokenizer.convert_ids_to_tokens(ids) for ids in (generated[0, :-1], generated[0, 1:]))
    plt, paths = pyplot(), []
    for name, maps, rows, cols, names in (
        ("encoder_self", out.encoder_attentions, src, src, ("source token", "source token")),
        ("decoder_self", out.decoder_attentions, produced, seen, ("output token", "decoder input token")),
        ("cross", out.cross_attentions, produced, src, ("output token", "source token")),
    ):
        fig, axes = plt.subplots(1, len(maps), figsize=(4 * len(maps), 4), squeeze=False)
        for i, attn in enumerate(maps):  # (1, H, T, S): average the heads
            draw_attention(axes[0][i], attn[0].mean(0).float().numpy(), rows, cols, f"{name} layer {i + 1}", names)
        paths.append(save_figure(fig, out_dir, f"attention_{name}.png"))
    return paths


MAX_POSITION_CELLS = 10_000_000  # --length x --d_model drawn: 40 MB of table, more than a picture's pixels


def plot_positions(d_model: int, length: int, out_dir: str) -> list[str]:
    if length * d_model > MAX_POSITION_CELLS:  # refused before any memory is taken
        raise ValueError(
            f"--length {length} x --d_model {d_model} is {length * d_model:,} values, more than the "
            f"{MAX_POSITION_CELLS:,} a picture shows: give smaller ones."
        )
    plt = pyplot()
    from ..model.modeling_vanilla_transformer import VanillaTransformerPositionalEmbedding

    table = VanillaTransformerPositionalEmbedding.sinusoidal_table(length, d_model)
    fig, ax = plt.subplots(figsize=(8, 4))
    image = ax.imshow(table.numpy(), aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
    ax.set_xlabel("dimension"), ax.set_ylabel("position"), ax.set_title("sinusoidal position encoding")
    fig.colorbar(image)
    return [save_figure(fig, out_dir, "positions.png")]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("curves")
    p.add_argument("run_dir")
    p = sub.add_parser("attention")
    p.add_argument("model_dir")
    p.add_argument("text")
    p = sub.add_parser("quality-vs-time")
    p.add_argument("run_dirs", nargs="+")
    p.add_argument("--metric", default=None, help="Logged metric (default: eval_bleu or eval_f1).")
    p = sub.add_parser("positions")
    p.add_argument("--d_model", type=positive_int, default=128)
    p.add_argument("--length", type=positive_int, default=100)
    for p in sub.choices.values():
        p.add_argument("--out", type=output_path, default=None, help="Directory for the PNG files")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    out = (
        args.out
        or getattr(args, "run_dir", None)
        or getattr(args, "model_dir", None)
        or (getattr(args, "run_dirs", None) or ["."])[0]
    )
    if args.out:  # the default is an input directory: never created here (a mistyped one is named as missing)
        os.makedirs(out, exist_ok=True)
    if args.what == "curves":
        paths = plot_curves(args.run_dir, out)
    elif args.what == "quality-vs-time":
        paths = plot_quality_vs_time(args.run_dirs, out, args.metric)
    elif args.what == "attention":
        paths = plot_attention(args.model_dir, args.text, out)
    else:
        paths = plot_positions(args.d_model, args.length, out)
    print("\n".join(paths))
    return 0
