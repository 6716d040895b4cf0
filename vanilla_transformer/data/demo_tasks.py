"""The two generated demo tasks, deterministic given a seed: a string transduction for translation (`demo_translate`)
and CoNLL-like sentences with person, place and organisation names for tagging."""

import random

from datasets import Dataset

DEMO_SOURCE_LANG, DEMO_TARGET_LANG = "src", "tgt"
DEMO_SYMBOLS = "0123456789abcdefghijklmnopqrstuvwxyz"


def demo_translate(source: str) -> str:
    """The demo task's rule: upper-case letters, digit d -> 9 - d, reverse, double the first element.
    `123456qwer` -> `RREWQ345678`."""
    mapped = [str(9 - int(c)) if c.isdigit() else c.upper() for c in reversed(source)]
    return mapped[0] + "".join(mapped)


def make_demo_translation(num_examples: int, seed: int = 0, min_length: int = 1, max_length: int = 48) -> Dataset:
    """Random strings of `min_length`-`max_length` symbols (lengths uniform; digits and lowercase letters, skewed
    frequencies: symbol k has weight 1 / (k + 1)) and their `demo_translate` targets; deterministic given the seed."""
    if num_examples <= 0:
        raise ValueError(f"num_examples must be positive, got {num_examples}.")
    if not 1 <= min_length <= max_length:
        raise ValueError(f"Demo string lengths need 1 <= min_length <= max_length, got {min_length} and {max_length}.")
    rng = random.Random(seed)
    weights = [1.0 / (k + 1) for k in range(len(DEMO_SYMBOLS))]
    rows = []
    for _ in range(num_examples):
        source = "".join(rng.choices(DEMO_SYMBOLS, weights, k=rng.randint(min_length, max_length)))
        rows.append({DEMO_SOURCE_LANG: source, DEMO_TARGET_LANG: demo_translate(source)})
    return Dataset.from_dict({"translation": rows})


DEMO_NAMES = ["Anna", "Ben", "Clara", "David", "Eva", "Felix", "Greta", "Hugo", "Ida", "Jonas"]
DEMO_SURNAMES = ["Miller", "Schmidt", "Novak", "Rossi", "Dubois", "Berg", "Costa", "Kim"]
DEMO_PLACES = ["Berlin", "Paris", "Oslo", "Lima", "Cairo", "Tokyo", "Quebec", "Rome", "New York", "Buenos Aires"]
DEMO_ORGS = ["Acme Corp", "Globex", "Initech", "Umbrella Inc", "Stark Industries", "Wayne Enterprises"]
DEMO_WORDS = "the a met visited joined left saw from to with and in at today yesterday later".split()


def make_demo_ner(num_examples: int, seed: int = 0) -> Dataset:
    """A generated tagging task in the spirit of CoNLL: sentences of filler words with person (1-2 words), place
    and organisation names (1-2 words) in random order; tags in IOB2."""
    rng = random.Random(seed)
    tokens, tags = [], []
    for _ in range(num_examples):
        words, labels = [], []
        for _ in range(rng.randint(2, 4)):
            for _ in range(rng.randint(1, 3)):
                words.append(rng.choice(DEMO_WORDS))
                labels.append("O")
            kind = rng.choice(["PER", "LOC", "ORG"])
            if kind == "PER":
                name = [rng.choice(DEMO_NAMES)] + ([rng.choice(DEMO_SURNAMES)] if rng.random() < 0.5 else [])
            else:
                name = rng.choice(DEMO_PLACES if kind == "LOC" else DEMO_ORGS).split()
            words += name
            labels += [f"B-{kind}"] + [f"I-{kind}"] * (len(name) - 1)
        tokens.append(words)
        tags.append(labels)
    return Dataset.from_dict({"tokens": tokens, "ner_tags": tags})
