"""Checkpoints that are whole or absent: staged under a temporary name and renamed into place, checked before
resuming, and the one to resume from."""

import copy
import os
import shutil

from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint, rotate_checkpoints

from ..files import read_json, run_checkpoints


def last_checkpoint(training_args):
    """The checkpoint to resume from: `--resume_from_checkpoint` (a path, or 'true' for the latest in output_dir)."""
    resume = training_args.resume_from_checkpoint
    if resume is None or str(resume).lower() == "false":
        return None
    if str(resume).lower() == "true":
        found = get_last_checkpoint(training_args.output_dir) if os.path.isdir(training_args.output_dir) else None
        if found is None:
            raise ValueError(f"--resume_from_checkpoint true: no checkpoint-* directory in {training_args.output_dir}.")
        resume = found
    if not os.path.isdir(resume):
        raise ValueError(f"--resume_from_checkpoint {resume!r} is not a directory.")
    check_checkpoint_files(resume)
    return resume


# The arguments of the training commands that name something the run reads: a saved model, a tokenizer, a config, data
# files (a parallel-text prefix too), a local dataset directory, ensemble members.
INPUT_FIELDS = (
    "model_name_or_path",
    "tokenizer_name",
    "config_name",
    "dataset_name",
    "train_file",
    "validation_file",
    "test_file",
    "train_conll_file",
    "ensemble_with",
)
MODEL_FIELDS = ("model_name_or_path", "tokenizer_name", "config_name", "ensemble_with")


def run_inputs(*argument_sets) -> tuple[list[str], list[str]]:
    """(the local models a run reads, the folders of its local data), from its argument dataclasses."""
    from ..loading import looks_local

    models, data = [], []
    for arguments in argument_sets:
        for name in INPUT_FIELDS:
            value = getattr(arguments, name, None)
            for path in value if isinstance(value, (list, tuple)) else [value]:
                if not path or not str(path).strip():
                    continue
                if name in MODEL_FIELDS:
                    if looks_local(path) and (name != "config_name" or os.path.exists(path)):  # (else a Hub id, preset)
                        models.append(path)
                elif name == "dataset_name":
                    if os.path.isdir(path):  # (else a Hub dataset)
                        data.append(path)
                else:  # a file, or a prefix of files (data/train -> data/train.de): the folder holding them
                    data.append(os.path.dirname(os.path.abspath(path)))
    return models, data


def check_output_dir(training_args, resume_from, *argument_sets) -> None:
    """A training run never writes over a finished model or another run's checkpoints by surprise (transformers'
    examples' rule): an --output_dir holding either is refused, naming how to replace them or to resume, unless the
    run resumes there; with --overwrite_output_dir the old checkpoints are deleted first, so that the directory holds
    one run's (what `average-checkpoints` averages), and nothing else is ever deleted: a `checkpoint-N` folder that
    holds no trainer_state.json is no checkpoint and is refused. Whatever the flags, --output_dir is never a folder the
    run reads (`argument_sets`: its other argument dataclasses): not the folder of its data files, and when it trains
    not a model it loads, nor a folder holding one in a checkpoint to delete; a run that does not train never writes
    into another finished model's directory (`refuse_other_model`). An empty --output_dir is refused: it would be the
    current directory."""
    from ..files import is_within, refuse_overwriting, same_path

    output_dir = training_args.output_dir
    if not str(output_dir).strip():
        raise ValueError("--output_dir is empty: give the directory to write the model to.")
    models, data = run_inputs(*argument_sets)
    refuse_overwriting([output_dir], data)  # (predictions, results and the model would land among the data)
    if not training_args.do_train:
        refuse_other_model(output_dir, [getattr(arguments, "model_name_or_path", None) for arguments in argument_sets])
    if not training_args.do_train or resume_from is not None or not os.path.isdir(output_dir):
        return
    refuse_overwriting([output_dir], models)
    found = [name for name in ("config.json", "model.safetensors") if os.path.isfile(os.path.join(output_dir, name))]
    checkpoints = run_checkpoints(output_dir)
    if not found and not checkpoints:
        return
    if not training_args.overwrite_output_dir:
        names = found + [os.path.basename(c) for c in checkpoints]
        what = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
        raise ValueError(
            f"--output_dir {output_dir} holds a finished model or checkpoints of another run ({what}): "
            "pass --overwrite_output_dir true to replace them, --resume_from_checkpoint true to continue "
            "that run, or another --output_dir."
        )
    for checkpoint in checkpoints:
        if not os.path.isfile(os.path.join(checkpoint, "trainer_state.json")):
            raise ValueError(
                f"--overwrite_output_dir deletes the checkpoints of an earlier run, and {checkpoint} is "
                "none (it holds no trainer_state.json): move it out of --output_dir first."
            )
        for path in models + data:
            if is_within(path, checkpoint) or same_path(path, checkpoint):
                raise ValueError(
                    f"--overwrite_output_dir would delete {checkpoint}, which holds what this run reads "
                    f"({path}): copy it out of --output_dir first, or give another --output_dir."
                )
    if training_args.should_save:  # (the main process)
        for checkpoint in checkpoints:
            shutil.rmtree(checkpoint)


def refuse_other_model(output_dir, loaded) -> None:
    """A run that does not train (evaluation, prediction) writes its results into --output_dir: refused where that
    holds a finished model or checkpoints other than the model it loads (`loaded`), whose results it would mix into
    another model's records."""
    from ..files import finished_model, same_path

    held = finished_model(output_dir)
    if held and not any(path and same_path(output_dir, path) for path in loaded):
        what = ", ".join(held[:4]) + (", ..." if len(held) > 4 else "")
        raise ValueError(
            f"--output_dir {output_dir} holds another finished model or checkpoints ({what}): this run "
            "would write its results among them; give another --output_dir, or the model's own "
            "directory as --model_name_or_path."
        )


def check_checkpoint_files(checkpoint: str) -> None:
    """A damaged checkpoint file (trainer state, weights) is an error naming it, before training starts."""
    state = os.path.join(checkpoint, "trainer_state.json")
    if not os.path.isfile(state):
        raise ValueError(f"{state} is missing: {checkpoint} is not a whole checkpoint.")
    try:
        read_json(state, mapping=True)
    except OSError as error:
        raise ValueError(str(error)) from None
    weights = os.path.join(checkpoint, "model.safetensors")
    if os.path.isfile(weights):
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(weights, framework="pt"):  # checks the header and that the file holds every tensor
                pass
        except (SafetensorError, OSError, ValueError) as error:
            raise ValueError(f"{weights} is truncated or corrupted ({error}).") from None


class AtomicCheckpoints(TrainerCallback):
    """Checkpoints appear atomically: each is written into `OUTPUT_DIR/.staging/checkpoint-N` and renamed to
    `OUTPUT_DIR/checkpoint-N` only when complete, so a process killed while saving leaves every visible checkpoint
    loadable and `--resume_from_checkpoint true` picks a whole one. The Trainer writes a checkpoint into
    `args.output_dir`: this callback points that at the staging folder from the moment a save is decided (the end of a
    step or an epoch, or an evaluation under `--save_strategy best`) until `on_save`, where the folder is renamed and
    the output directory restored."""

    def __init__(self, accelerator):
        self.accelerator = accelerator
        self.run_dir = None  # the real output directory while args.output_dir points at the staging folder

    def stage(self, args) -> None:
        if self.run_dir is not None:
            return
        self.run_dir = args.output_dir
        staging = os.path.join(self.run_dir, ".staging")
        if args.should_save and os.path.isdir(staging):
            shutil.rmtree(staging)  # left over by a killed save
        self.accelerator.wait_for_everyone()
        args.output_dir = staging

    def unstage(self, args) -> None:
        if self.run_dir is not None:
            args.output_dir, self.run_dir = self.run_dir, None

    def on_step_end(self, args, state, control, **kwargs):
        if control.should_save:
            self.stage(args)

    on_epoch_end = on_step_end

    def on_evaluate(self, args, state, control, **kwargs):
        if args.save_strategy == "best":  # the Trainer decides to save after this callback, when the metric improved
            self.stage(args)

    def on_step_begin(self, args, state, control, **kwargs):
        self.unstage(args)  # staged for a save that did not happen (no new best)

    on_train_end = on_step_begin

    def on_save(self, args, state, control, **kwargs):
        staging, run_dir = args.output_dir, self.run_dir
        self.unstage(args)
        if run_dir is None:
            return
        self.accelerator.wait_for_everyone()  # every process has written its part (RNG states)
        if args.should_save:
            name = f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
            final = os.path.join(run_dir, name)
            if os.path.isdir(final):
                shutil.rmtree(final)
            os.replace(os.path.join(staging, name), final)  # the atomic step
            if state.best_model_checkpoint:
                state.best_model_checkpoint = state.best_model_checkpoint.replace(staging, run_dir)
            rotate_checkpoints(
                output_dir=run_dir,
                save_total_limit=args.save_total_limit,
                best_model_checkpoint=state.best_model_checkpoint,
                use_mtime=False,
            )
        self.accelerator.wait_for_everyone()


class FiniteWeights(TrainerCallback):
    """No NaN or infinity is saved into a model: before each checkpoint is written, and before the trained model is
    (the end of training), the weights are checked, and a run whose weights became non-finite stops with an error
    naming the tensor and the step (`loading.check_finite`); the checkpoints saved before stay. Read only when a save
    is due: the training steps themselves never wait for the device."""

    def check(self, state, model) -> None:
        from ..loading import check_finite

        if model is not None:
            check_finite(
                model.state_dict().items(),
                f"the weights after step {state.global_step} (nothing saved at "
                "this step: lower --learning_rate or clip gradients)",
            )

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if control.should_save:
            self.check(state, model)

    on_epoch_end = on_step_end

    def on_evaluate(self, args, state, control, model=None, **kwargs):
        if args.save_strategy == "best":  # (the Trainer may save after this, as AtomicCheckpoints.on_evaluate says)
            self.check(state, model)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        self.check(state, model)


class AtomicCheckpointMixin:
    """A Trainer whose checkpoints appear atomically (AtomicCheckpoints), hold finite weights only (FiniteWeights),
    and that uploads nothing itself: it gets a copy of the arguments without `--push_to_hub` and `--hub_token` (its own
    pushes would send every file of the output directory and of each checkpoint, the pickled training_args.bin among
    them, and that pickle would hold the token).
    The command uploads the finished model by allow-list at the end (`upload.push_model_dir`)."""

    def __init__(self, *args, **kwargs):
        kwargs["args"] = copy.copy(kwargs["args"])
        kwargs["args"].push_to_hub, kwargs["args"].hub_token = False, None
        super().__init__(*args, **kwargs)
        self.add_callback(AtomicCheckpoints(self.accelerator))
        self.add_callback(FiniteWeights())
