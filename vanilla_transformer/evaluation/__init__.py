"""`evaluate` metric modules shipped inside the package: `load_metric("bleu_chrf")`, `load_metric("seqeval_f1")`."""

import os

METRICS_DIR = os.path.dirname(os.path.abspath(__file__))


def load_metric(name: str, **kwargs):
    import evaluate

    path = os.path.join(METRICS_DIR, name)
    if not os.path.isfile(os.path.join(path, f"{name}.py")):
        available = sorted(
            d for d in os.listdir(METRICS_DIR) if os.path.isfile(os.path.join(METRICS_DIR, d, f"{d}.py"))
        )
        raise ValueError(f"Unknown metric {name!r}; shipped metrics: {available}.")
    return evaluate.load(path, **kwargs)
