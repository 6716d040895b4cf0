"""Average the weights of the last N checkpoints of a run (the paper, section 6.1: "averaging the last 5
checkpoints") into a model directory that loads like any other.

    vanilla-transformer average-checkpoints outputs/multi30k --last 5 --output_dir outputs/multi30k/averaged

The output directory gets the averaged `model.safetensors` (written to a temporary name, then renamed) plus the config,
generation config, tokenizer and code files of the newest checkpoint.
"""

import argparse
import os
import shutil

from ..console import output_path
from ..files import read_json, replaced_atomically
from ..model_card import CARD_INFO

WEIGHTS = "model.safetensors"


def checkpoints(run_dir: str) -> list[str]:
    """The run's `checkpoint-STEP` directories that hold weights, oldest first."""
    from ..training.checkpoints import run_checkpoints

    if not os.path.isdir(run_dir):
        raise ValueError(f"{run_dir!r} is not a directory.")
    return [path for path in run_checkpoints(run_dir) if os.path.isfile(os.path.join(path, WEIGHTS))]


def check_one_run(paths: list[str]) -> None:
    """The checkpoints belong to one run: each one's logged history (trainer_state.json) is where the newest one's
    began. Checkpoints left by an earlier run in the same directory are refused, naming them."""
    histories = {}
    for path in paths:
        state = os.path.join(path, "trainer_state.json")
        if os.path.isfile(state):
            histories[path] = read_json(state, mapping=True).get("log_history", [])
    newest = histories.get(paths[-1])
    others = [path for path, history in histories.items() if newest is not None and newest[:len(history)] != history]
    if others:
        raise ValueError(f"{', '.join(others)} belong to another run than {paths[-1]} (their trainer_state.json "
                         "histories differ): average the checkpoints of one run, or give --last fewer.")


def average(paths: list[str]) -> dict:
    """Element-wise mean (in fp32, cast back to each tensor's dtype) of the checkpoints' weights: name -> tensor."""
    from safetensors.torch import load_file

    total, reference = None, None
    for path in paths:
        state = load_file(os.path.join(path, WEIGHTS))
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
    return {k: (v / len(paths)).to(reference[k]).contiguous() for k, v in total.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="a training output directory with checkpoint-* subdirectories")
    parser.add_argument("--last", type=int, default=5, help="how many of the newest checkpoints to average")
    parser.add_argument("--output_dir", type=output_path, required=True)
    args = parser.parse_args(argv)
    if args.last < 1:
        raise ValueError(f"--last must be at least 1, got {args.last}.")
    found = checkpoints(args.run_dir)
    if not found:
        raise ValueError(f"No checkpoint-* directory with {WEIGHTS} in {args.run_dir!r}.")
    if len(found) < args.last:
        raise ValueError(f"--last {args.last}: {args.run_dir} holds {len(found)} checkpoint(s) with weights "
                         f"({', '.join(os.path.basename(p) for p in found)}); pass --last {len(found)} to average "
                         "those.")
    paths = found[-args.last:]
    check_one_run(paths)
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
    print(f"Averaged {len(paths)} checkpoints ({', '.join(os.path.basename(p) for p in paths)}) -> {args.output_dir}")
    return paths
