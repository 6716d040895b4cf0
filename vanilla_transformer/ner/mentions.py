"""Entity mentions in IOB2 tags, and the post-processing of a tagger's predictions across a document."""


def mention_spans(tags: list[str]) -> list[tuple[int, int, str]]:
    """IOB2 tags -> entity mentions (start, end, type), end exclusive."""
    spans = []
    for i, tag in enumerate(tags):
        continues = spans and spans[-1][1] == i and spans[-1][2] == tag[2:]
        if tag.startswith("B-") or (tag.startswith("I-") and not continues):
            spans.append((i, i + 1, tag[2:]))
        elif tag.startswith("I-"):
            spans[-1] = (spans[-1][0], i + 1, spans[-1][2])
    return spans


def mention_tags(kind: str, length: int) -> list[str]:
    """A mention of `length` words -> its IOB2 tags."""
    return ["B-" + kind] + ["I-" + kind] * (length - 1)


PERSON_TYPES = ("PER", "PERSON")  # CoNLL's and OntoNotes' names for the person type


def document_consistency(tokens: list[list[str]], tags: list[list[str]], documents) -> list[list[str]]:
    """Predicted IOB2 tags made consistent within each document (label consistency, in the spirit of Krishnan &
    Manning, 2006). A word sequence predicted as a mention takes the type most of its mentions in the document were
    given (a tie keeps each mention's own); its occurrences left untagged become mentions of that type (on a tie, the
    type it was first given; longest sequences first). Then a one-word mention that is a capitalised word of a longer
    person mention (type PER or PERSON) of the document becomes a person: news names a person in full, then by one
    name ("Jeffrey Lurie ... Lurie"). A name the tagger never saw is often typed right where its context is clear and
    wrong elsewhere ("Magna was up 1/8"): the document repairs the rest."""
    tags = [list(row) for row in tags]
    by_document = {}
    for i, document in enumerate(documents):
        by_document.setdefault(document, []).append(i)
    for rows in by_document.values():
        votes = {}  # word sequence -> {type: mentions}
        for i in rows:
            for start, end, kind in mention_spans(tags[i]):
                counts = votes.setdefault(tuple(tokens[i][start:end]), {})
                counts[kind] = counts.get(kind, 0) + 1
        majority = {words: max(counts, key=counts.get) for words, counts in votes.items()}
        longest_first = sorted(majority, key=len, reverse=True)
        for i in rows:
            row, words = tags[i], tokens[i]
            for start, end, kind in mention_spans(row):
                sequence = tuple(words[start:end])
                if votes[sequence][majority[sequence]] > votes[sequence][kind]:
                    row[start:end] = mention_tags(majority[sequence], end - start)
            for sequence in longest_first:
                n = len(sequence)
                for start in range(len(row) - n + 1):
                    if tuple(words[start : start + n]) == sequence and all(t == "O" for t in row[start : start + n]):
                        row[start : start + n] = mention_tags(majority[sequence], n)
        names = {
            word: kind
            for i in rows
            for start, end, kind in mention_spans(tags[i])
            if kind in PERSON_TYPES and end - start > 1
            for word in tokens[i][start:end]
            if word[:1].isupper()
        }
        for i in rows:
            for start, end, _ in mention_spans(tags[i]):
                if end - start == 1 and tokens[i][start] in names:
                    tags[i][start] = "B-" + names[tokens[i][start]]
    return tags
