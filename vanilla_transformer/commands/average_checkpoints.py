"""Average the weights of the last N checkpoints of a run (the paper, section 6.1: "averaging the last 5
checkpoints") into a model directory that loads like any other.

    vanilla-transformer average-checkpoints outputs/multi30k --last 5 --output_dir outputs/multi30k/averaged

The output directory gets the averaged `model.safetensors` (written to a temporary name, then renamed), the config,
generation config, tokenizer and code files of the newest checkpoint, and `averaged_from.json` (the checkpoints
averaged). A directory holding another model is refused; `--force` replaces an earlier average only (a directory with
its `averaged_from.json`).
"""

import argparse
import json
import os
import shutil

from ..console import output_path
from ..files import read_json, refuse_overwriting, replaced_atomically, run_checkpoints, write_text
from ..loading import log_history
from ..model_card import CARD_INFO

WEIGHTS = "model.safetensors"
PROVENANCE = "averaged_from.json"  # what this command writes beside the weights: an earlier average is recognised by it


def checkpoints(run_dir: str) -> list[str]:
    """The run's `checkpoint-STEP` directories that hold weights, oldest first."""
    if not os.path.isdir(run_dir):
        raise FileNotFoundError(
            f"no such directory: {run_dir!r}" + (" (a file is there)" if os.path.exists(run_dir) else "") + "."
        )
    return [path for path in run_checkpoints(run_dir) if os.path.isfile(os.path.join(path, WEIGHTS))]


def check_one_run(paths: list[str]) -> None:
    """The checkpoints belong to one run: each one's logged history (trainer_state.json) is where the newest one's
    began. Checkpoints left by an earlier run in the same directory are refused, naming them."""
    histories = {}
    for path in paths:
        state = os.path.join(path, "trainer_state.json")
        if os.path.isfile(state):
            histories[path] = log_history(state)
    newest = histories.get(paths[-1])
    others = [path for path, history in histories.items() if newest is not None and newest[: len(history)] != history]
    if others:
        raise ValueError(
            f"{', '.join(others)} belong to another run than {paths[-1]} (their trainer_state.json "
            "histories differ): average the checkpoints of one run, or give --last fewer."
        )


# What must be equal in the checkpoints averaged: the model's config (its shapes, vocabulary size and special tokens)
# and tokenizer files. Checkpoints of one run agree; differing ones are of different models.
SAME_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
)
CONFIG_BOOKKEEPING = ("transformers_version", "_name_or_path", "dtype", "torch_dtype")


def check_same_model(paths: list[str]) -> None:
    """The checkpoints are of one model: their configs (bookkeeping aside) and tokenizer files are equal, else a
    `ValueError` naming the checkpoint and what differs."""
    first = paths[-1]
    for name in SAME_FILES:
        expected = same_file_contents(os.path.join(first, name))
        for path in paths[:-1]:
            found = same_file_contents(os.path.join(path, name))
            if found != expected:
                differ = (
                    "present in one only"
                    if None in (found, expected)
                    else ", ".join(
                        sorted(k for k in expected.keys() | found.keys() if expected.get(k) != found.get(k))[:5]
                    )
                    if isinstance(found, dict) and isinstance(expected, dict)
                    else "contents"
                )
                raise ValueError(
                    f"{os.path.join(path, name)} differs from {os.path.join(first, name)} ({differ}): "
                    "the checkpoints are of different models; average the checkpoints of one run."
                )


def same_file_contents(path: str):
    """A file's contents as compared by `check_same_model`: a JSON file's object (bookkeeping fields aside), other
    files' bytes; None where there is none."""
    if not os.path.isfile(path):
        return None
    if not path.endswith(".json"):
        with open(path, "rb") as f:
            return f.read()
    values = read_json(path)
    if isinstance(values, dict):
        for name in CONFIG_BOOKKEEPING:
            values.pop(name, None)
    return values


def average(paths: list[str]) -> dict:
    """Element-wise mean (in fp32, cast back to each tensor's dtype) of the checkpoints' weights: name -> tensor. A
    checkpoint holding a NaN or an infinity is refused, naming the tensor: no such number is saved into a model."""
    from ..loading import check_finite, load_weights

    total, reference = None, None
    for path in paths:
        state = load_weights(os.path.join(path, WEIGHTS))
        check_finite(state.items(), os.path.join(path, WEIGHTS))
        if total is None:
            reference = {k: v.dtype for k, v in state.items()}
            total = {k: v.float().clone() for k, v in state.items()}
            continue
        if state.keys() != total.keys():
            raise ValueError(f"{path} holds different weights ({sorted(state.keys() ^ total.keys())[:3]}...).")
        for key, value in state.items():
            if value.shape != total[key].shape:
                raise ValueError(f"{path}: {key} has shape {tuple(value.shape)}, not {tuple(total[key].shape)}.")
            total[key] += value.float()
    averaged = {k: (v / len(paths)).to(reference[k]).contiguous() for k, v in total.items()}
    check_finite(averaged.items(), "the averaged weights")  # (a mean beyond a half-precision dtype's range)
    return averaged


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="a training output directory with checkpoint-* subdirectories")
    parser.add_argument("--last", type=int, default=5, help="how many of the newest checkpoints to average")
    parser.add_argument("--output_dir", type=output_path, required=True)
    parser.add_argument(
        "--force",
        action="store_true",
        help=f"replace an earlier average in --output_dir (a directory holding its {PROVENANCE}); "
        "any other model there is still refused",
    )
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.last < 1:
        raise ValueError(f"--last must be at least 1, got {args.last}.")
    found = checkpoints(args.run_dir)
    if not found:
        raise ValueError(f"No checkpoint-* directory with {WEIGHTS} in {args.run_dir!r}.")
    if len(found) < args.last:
        raise ValueError(
            f"--last {args.last}: {args.run_dir} holds {len(found)} checkpoint(s) with weights "
            f"({', '.join(os.path.basename(p) for p in found)}); pass --last {len(found)} to average "
            "those."
        )
    paths = found[-args.last :]
    # the output is never the run, one of its checkpoints, or any other finished model: it would replace its weights
    earlier_average = args.force and os.path.isfile(os.path.join(args.output_dir, PROVENANCE))
    refuse_overwriting(
        [args.output_dir],
        [args.run_dir, *run_checkpoints(args.run_dir)],
        model_dirs=[] if earlier_average else [args.output_dir],
    )
    held = sorted(os.listdir(args.output_dir)) if os.path.isdir(args.output_dir) else []
    if held and not os.path.isfile(os.path.join(args.output_dir, PROVENANCE)):  # (the user's card, tokenizer, ...)
        raise ValueError(
            f"--output_dir {args.output_dir} holds files of its own ({', '.join(held[:4])}"
            f"{', ...' if len(held) > 4 else ''}) that the average would replace; give a new or empty "
            "directory."
        )
    check_one_run(paths)
    check_same_model(paths)
    averaged = average(paths)
    os.makedirs(args.output_dir, exist_ok=True)
    newest = paths[-1]
    for name in os.listdir(newest):  # config, generation config, tokenizer, code (not optimizer/scheduler/RNG state)
        if name.endswith((".json", ".py", ".txt", ".model")) and not name.startswith(("trainer_state", "rng_state")):
            shutil.copy2(os.path.join(newest, name), os.path.join(args.output_dir, name))
    for name in ("README.md", CARD_INFO):  # the run's model card: its languages, data and terms stay with the model
        if os.path.isfile(os.path.join(args.run_dir, name)):
            shutil.copy2(os.path.join(args.run_dir, name), os.path.join(args.output_dir, name))
    from safetensors.torch import save_file

    with replaced_atomically(os.path.join(args.output_dir, WEIGHTS)) as temporary:
        save_file(averaged, temporary, metadata={"format": "pt"})
    write_text(
        os.path.join(args.output_dir, PROVENANCE),
        json.dumps({"run_dir": args.run_dir, "checkpoints": [os.path.basename(p) for p in paths]}, indent=2),
    )
    print(f"Averaged {len(paths)} checkpoints ({', '.join(os.path.basename(p) for p in paths)}) -> {args.output_dir}")
    return paths
