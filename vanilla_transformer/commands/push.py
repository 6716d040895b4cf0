"""Push a saved model directory (model, code files, tokenizer, card, scores: `upload.UPLOADED`) to the Hugging Face
Hub, or create a demo Space (the page of `vanilla-transformer demo`) for models already on the Hub.

    vanilla-transformer push outputs/multi30k you/vanilla-transformer-de-en [--private]
    vanilla-transformer push --space you/vanilla-demo --translation_model you/vanilla-transformer-de-en \\
        [--ner_model you/vanilla-transformer-conll]

The Hub address comes from HF_ENDPOINT (default huggingface.co); the token from `hf auth login` or HF_TOKEN (--token
works too, but a command line is seen by other users of the computer and kept in shell histories).
"""

import argparse
import importlib.metadata
import os
import shutil
import sys
import tempfile

from ..upload import push_model_dir

PACKAGE = "vanilla-transformer"
SPACE_EXTRAS = ("demo", "ctranslate2")
SPACE_APP = '''"""The vanilla-transformer demo page (written by `vanilla-transformer push --space`)."""

from vanilla_transformer.deploy.demo_page import build_app

build_app(translation_model={translation!r}, ner_model={ner!r}).launch()
'''


def space_requirements() -> list[str]:
    """The package's requirements and its demo extras, pinned to the versions installed here (the tested set)."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    try:
        requires = importlib.metadata.requires(PACKAGE) or []
    except importlib.metadata.PackageNotFoundError:
        raise ValueError(
            f"{PACKAGE} is not installed (pip install -e '.[demo]'): its requirements pin the Space's requirements.txt."
        ) from None
    lines = []
    for text in requires:
        requirement = Requirement(text)
        if requirement.marker and not any(requirement.marker.evaluate({"extra": e}) for e in SPACE_EXTRAS):
            continue
        try:
            version = Version(importlib.metadata.version(requirement.name)).public  # 2.13.0+cpu -> 2.13.0
            lines.append(f"{requirement.name}=={version}")
        except importlib.metadata.PackageNotFoundError:
            lines.append(f"{requirement.name}{requirement.specifier}")
    return lines


def write_space(directory: str, translation_model: str | None, ner_model: str | None, space_id: str) -> None:
    """The Space's files: app.py, requirements.txt, README.md (the Space card) and this package's source."""
    from huggingface_hub import SpaceCard, SpaceCardData

    import vanilla_transformer

    from ..deploy.demo_page import require_gradio

    gradio = require_gradio()

    models = [m for m in (translation_model, ner_model) if m]
    with open(os.path.join(directory, "app.py"), "w", encoding="utf-8") as f:
        f.write(SPACE_APP.format(translation=translation_model, ner=ner_model))
    with open(os.path.join(directory, "requirements.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(space_requirements()) + "\n")
    data = SpaceCardData(
        title=space_id.split("/")[-1],
        sdk="gradio",
        sdk_version=gradio.__version__,
        app_file="app.py",
        models=models,
        license="apache-2.0",
        tags=["vanilla-transformer"],
    )
    card = SpaceCard(
        f"---\n{data.to_yaml()}\n---\n\n# {space_id.split('/')[-1]}\n\nThe demo page of the "
        f"vanilla-transformer models {', '.join(f'`{m}`' for m in models)}: translate a sentence and "
        "see its cross-attention; tag the entities of a text.\n"
    )
    card.save(os.path.join(directory, "README.md"))
    source = os.path.dirname(os.path.abspath(vanilla_transformer.__file__))
    shutil.copytree(
        source, os.path.join(directory, "vanilla_transformer"), ignore=shutil.ignore_patterns("__pycache__")
    )


def push_space(
    space_id: str,
    translation_model: str | None = None,
    ner_model: str | None = None,
    token: str | None = None,
    private: bool = False,
) -> str:
    """Create (or update) a Gradio Space showing the given Hub models; returns the new commit sha."""
    from huggingface_hub import HfApi

    if not translation_model and not ner_model:
        raise ValueError("A Space needs --translation_model and/or --ner_model (Hub ids of pushed models).")
    api = HfApi(token=token)
    api.create_repo(space_id, repo_type="space", space_sdk="gradio", private=private, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="vanilla-space-") as directory:
        write_space(directory, translation_model, ner_model, space_id)
        info = api.upload_folder(
            folder_path=directory, repo_id=space_id, repo_type="space", commit_message="Upload vanilla-transformer demo"
        )
    return info.oid


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", nargs="?", help="A saved model directory to push.")
    parser.add_argument("repo_id", nargs="?", help="The model repository, e.g. you/vanilla-transformer-de-en.")
    parser.add_argument("--space", default=None, help="Create a demo Space with this id instead of pushing a model.")
    parser.add_argument("--translation_model", default=None, help="--space: a translation model's Hub id.")
    parser.add_argument("--ner_model", default=None, help="--space: a tagger's Hub id.")
    parser.add_argument("--token", default=None)
    parser.add_argument("--private", action="store_true")
    parser.add_argument("--commit_message", default="Upload vanilla-transformer model")
    parser.add_argument(
        "--include",
        nargs="+",
        default=[],
        metavar="PATTERN",
        help="Also upload the files matching these patterns (e.g. '*.png' predictions_*.txt); by "
        "default a push sends what loading the model needs, its card and scores only.",
    )
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.space and (args.model_dir or args.repo_id):
        parser.error("--space pushes a demo for models already on the Hub; push each model first, without --space")
    if not args.space and not (args.model_dir and args.repo_id):
        parser.error("give MODEL_DIR and REPO_ID (or --space with --translation_model / --ner_model)")
    try:
        if args.space:
            sha = push_space(args.space, args.translation_model, args.ner_model, token=args.token, private=args.private)
            print(f"Pushed the demo Space {args.space} at revision {sha}")
            return 0
        sha = push_model_dir(
            args.model_dir,
            args.repo_id,
            token=args.token,
            private=args.private,
            commit_message=args.commit_message,
            include=args.include,
        )
    except (ValueError, FileNotFoundError, ImportError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"Pushed {args.model_dir} to {args.repo_id} at revision {sha}")
    return 0
