"""Attention as pictures: matplotlib's pyplot set up to draw into files (`pyplot`), and the one heatmap of attention
weights (`draw_attention`) that `vanilla-transformer plot attention` saves and the demo page shows. Its rows are the
tokens a position produced (row i: where the model looked while producing token i), its columns the tokens it looked
at; each token is named on its axis where they fit."""

MOST_NAMED = 50  # tokens on an axis at most for each to be named (more would overlap)
SMALL_PRINT = 25  # tokens on an axis above which their names are printed smaller


def pyplot():
    """matplotlib.pyplot drawing into files (the Agg backend), imported when first drawn with: it takes a second."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw_attention(
    ax, weights, rows: list[str], cols: list[str], title: str, names: tuple[str, str] = ("output token", "source token")
) -> None:
    """Draw `weights` (rows x cols, each row summing to 1) on the matplotlib axes `ax`: `rows` the tokens produced,
    `cols` the tokens attended to, `names` what the two axes hold (rows, columns)."""
    ax.imshow(weights, cmap="viridis", vmin=0, aspect="auto")
    longest = max(len(rows), len(cols))
    if longest <= MOST_NAMED:
        size = 8 if longest <= SMALL_PRINT else 6
        ax.set_xticks(range(len(cols)), cols, rotation=90, fontsize=size)
        ax.set_yticks(range(len(rows)), rows, fontsize=size)
    ax.set_ylabel(names[0]), ax.set_xlabel(names[1])
    ax.set_title(title, fontsize=10)
