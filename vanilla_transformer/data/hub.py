"""Datasets named on the Hugging Face Hub (`--dataset_name`)."""

from datasets import load_dataset


def hub_dataset(name: str, config: str | None = None, **kwargs):
    """`datasets.load_dataset(name, config)` for `--dataset_name`; a dataset that needs a loading script (datasets 4
    and newer refuse those, with a trace) is a ValueError saying what to use instead."""
    try:
        return load_dataset(name, config, **kwargs)
    except RuntimeError as error:
        if "scripts are no longer supported" not in str(error):
            raise
        raise ValueError(
            f"--dataset_name {name}: this Hub dataset needs a loading script, which datasets 4 and newer "
            "refuse; give one stored as Parquet or JSON on the Hub, or its files with --train_file / "
            "--validation_file (docs/training.md)"
        ) from None
