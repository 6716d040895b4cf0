"""Texts through a model in batches, the blank ones left out and the outputs put back in input order: the one rule of
the file commands (`translators.translate_lines`, `taggers.Tagger`) and the HTTP server's routes (`server.dispatch`).
It imports nothing of the package, so that both can import it."""

from collections.abc import Callable, Sequence


def nonblank_batches(texts: Sequence, blank, cut: "int | Callable[[list[int]], list[tuple[int, int]]] | None" = None):
    """(batches, scatter): the texts that are not blank (a string of whitespace only, an empty list of words), in
    batches; `scatter(outputs)` puts the batches' outputs (one list per batch, one output per text) back as one
    output per text of `texts`, in input order, `blank` for each blank text, which no batch holds. `cut` None: one
    batch, in input order (a server's batcher forms the engine's batches); else the texts sorted by length (less
    padding), cut into batches of at most `cut` texts, or at the (start, end) spans `cut(their ascending lengths)`
    gives."""
    todo = [i for i, text in enumerate(texts) if (text.strip() if isinstance(text, str) else text)]
    if cut is None:
        spans = [(0, len(todo))] if todo else []
    else:
        todo.sort(key=lambda i: len(texts[i]))
        spans = (
            cut([len(texts[i]) for i in todo])
            if callable(cut)
            else [(start, start + cut) for start in range(0, len(todo), cut)]
        )
    chunks = [todo[start:end] for start, end in spans]

    def scatter(outputs: list[list]) -> list:
        answers = [blank] * len(texts)
        for chunk, done in zip(chunks, outputs):
            for i, answer in zip(chunk, done):
                answers[i] = answer
        return answers

    return [[texts[i] for i in chunk] for chunk in chunks], scatter
