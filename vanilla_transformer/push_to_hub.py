"""Push a saved model directory (model, code files, tokenizer, card, results) to the Hugging Face Hub.

    python scripts/push_to_hub.py outputs/multi30k you/vanilla-transformer-de-en [--private]

The Hub address comes from HF_ENDPOINT (default huggingface.co); the token from `hf auth login` or --token.
"""

import argparse
import sys

from hub_card import push_model_dir


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir")
    parser.add_argument("repo_id")
    parser.add_argument("--token", default=None)
    parser.add_argument("--private", action="store_true")
    parser.add_argument("--commit_message", default="Upload vanilla-transformer model")
    args = parser.parse_args(argv)
    try:
        sha = push_model_dir(args.model_dir, args.repo_id, token=args.token, private=args.private,
                             commit_message=args.commit_message)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"Pushed {args.model_dir} to {args.repo_id} at revision {sha}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
