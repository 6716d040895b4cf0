"""The peers' data: Multi30k de-en cut into the pieces of the joint BPE vanilla-transformer trains for its recipe (8000
tokens, `tokenization.train_tokenizer` on the training pairs), so every system sees the same subwords.

    python benchmarks/peers/prepare.py ../shared/data/multi30k outputs/peers/data

writes train.{de,en}.bpe and validation.{de,en}.bpe (pieces separated by spaces, "▁" marking a word start) and
validation.en (the reference). `detokenize` turns a system's pieces back into text for sacreBLEU."""

import argparse
import os


def read(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def detokenize(line: str) -> str:
    """Pieces separated by spaces -> text: the pieces joined, each "▁" a space (the tokenizer's Metaspace decoder)."""
    return "".join(line.split()).replace("▁", " ").strip()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", help="Folder holding train.{de,en} and validation.{de,en}")
    parser.add_argument("out", help="Folder for the pieces")
    parser.add_argument("--vocab_size", type=int, default=8000)
    args = parser.parse_args(argv)
    from vanilla_transformer.tokenization import train_tokenizer  # here: score.py imports detokenize without torch

    train = {lang: read(os.path.join(args.data, f"train.{lang}")) for lang in ("de", "en")}
    tokenizer = train_tokenizer([s for pair in zip(train["de"], train["en"]) for s in pair], args.vocab_size)
    os.makedirs(args.out, exist_ok=True)
    tokenizer.save_pretrained(os.path.join(args.out, "tokenizer"))
    for split in ("train", "validation"):
        for lang in ("de", "en"):
            lines = train[lang] if split == "train" else read(os.path.join(args.data, f"{split}.{lang}"))
            with open(os.path.join(args.out, f"{split}.{lang}.bpe"), "w", encoding="utf-8") as f:
                # runs of whitespace (a few lines hold tabs) as one space: no piece may hold whitespace
                f.writelines(" ".join(tokenizer.tokenize(" ".join(line.split()))) + "\n" for line in lines)
    with open(os.path.join(args.out, "validation.en"), "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in read(os.path.join(args.data, "validation.en")))
    print(f"{args.out}: {len(train['de']):,} training pairs in pieces of a {len(tokenizer):,}-token joint BPE")


if __name__ == "__main__":
    main()
