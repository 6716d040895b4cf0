"""Pushing a saved model to the Hub: by allow-list (`UPLOADED`), so nothing but what loading it needs and its card
leaves the computer; the card rendered first."""

import os

from .model_card import CARD_INFO, render_card
from .model_dirs import ModelDir, recognise

REQUIRED_FILES = (
    "config.json",
    "model.safetensors",
    "configuration_vanilla_transformer.py",
    "modeling_vanilla_transformer.py",
    "kernels_vanilla_transformer.py",
    "ner_vanilla_transformer.py",
    "pipeline_vanilla_transformer.py",
)
# What a push uploads: what loading the model needs (weights, config, generation config, the code files, the
# tokenizer) and its card with the scores the card shows. Anything else (predictions, plots, card_info.json and
# trainer_state.json with this computer's paths, checkpoints, pickles) only when the user names it (`include`).
UPLOADED = [
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "model-*-of-*.safetensors",
    "model.safetensors.index.json",
    *REQUIRED_FILES[2:],
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "README.md",
    "all_results.json",
    "train_results.json",
    "eval_results.json",
    "predict_results.json",
]


def check_model_dir(model_dir: str) -> ModelDir:
    """A directory that can be pushed, recognised: a saved model with its code files, so trust_remote_code works from
    the Hub."""
    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f"{model_dir} is not a directory.")
    if not os.path.isfile(os.path.join(model_dir, "config.json")):
        raise ValueError(f"{model_dir} is not a saved model: config.json is missing.")
    found = recognise(model_dir)
    missing = [name for name in REQUIRED_FILES if name not in found.files]
    if missing:
        raise ValueError(
            f"{model_dir} lacks {', '.join(missing)}; save the model with save_pretrained "
            "after `import vanilla_transformer` so the code files are written next to the weights."
        )
    return found


def push_model_dir(
    model_dir: str,
    repo_id: str,
    token: str | None = None,
    private: bool = False,
    commit_message: str = "Upload vanilla-transformer model",
    include=(),
) -> str:
    """Render the card (when card_info.json is there) and upload the directory's `UPLOADED` files, plus the files
    matching the `include` patterns the user gave; returns the new commit sha."""
    from huggingface_hub import HfApi

    found = check_model_dir(model_dir)
    if CARD_INFO in found.files:
        render_card(model_dir, repo_id, found.json("config.json"))
    api = HfApi(token=token)
    api.create_repo(repo_id, private=private, exist_ok=True)
    info = api.upload_folder(
        folder_path=model_dir, repo_id=repo_id, commit_message=commit_message, allow_patterns=UPLOADED + list(include)
    )
    return info.oid
