"""The words of a line of text, split as CoNLL-2003 is tokenized: the one rule by which the tagger reads text (`tag`,
`/v1/ner`) and the encoder's pretraining splits `--split_punctuation` text, so an encoder pretrained on plain text
sees the words a tagger fine-tuned from it is given."""

import re

# CoNLL-2003's tokenization: abbreviations (U.S.), numbers with separators (3.5, 1,000), an apostrophe starting a word
# ('s), hyphenated words (Sino-Japanese), and every other punctuation mark on its own
WORD = re.compile(r"(?:[^\W\d_]\.){2,}|\d+(?:[.,:/]\d+)+(?!\w)|'\w+|\w+(?:-\w+)*|[^\w\s]")


def words_of(line: str) -> list[tuple[str, int, int]]:
    """The words of `line` as (word, start, end), character offsets into the line."""
    return [(match.group(), match.start(), match.end()) for match in WORD.finditer(line)]
