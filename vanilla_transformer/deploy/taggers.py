"""Tag named entities in text or CoNLL files with a trained tagger (`vanilla-transformer tag`).

Text in, one sentence (or paragraph) a line -> JSON lines out: for each input line a JSON array of its entities,
`{"text", "type", "start", "end", "score"}`, with character offsets into the line as written (`line[start:end] ==
text`) and the score the mean over the entity's words of the tagger's probability for its tag. A line is split into
words as CoNLL-2003 is tokenized (`words_of`). CoNLL in -> CoNLL out: every token line keeps its columns and gains
the predicted tag as a last column; blank lines and `-DOCSTART-` lines are kept. A sentence longer than the model's
positions is tagged whole, in windows of consecutive words that fit.
"""

import json
import os
import time

import numpy as np

from ..console import sentence_progress
from ..files import conll_sentences, file_stats, read_lines, write_lines
from ..loading import own_tokenizer, require
from ..model_dirs import ONNX_META, ModelDir, recognise, resolve_device, special_token_id
from ..ner.mentions import document_consistency, mention_spans
from ..words import words_of
from .batches import nonblank_batches

TAG_FORMATS = ("text", "conll")  # what `tag` reads and writes (--format)
CALL_COST_WORDS = 128  # a model call's fixed cost on a CPU, in words computed (benchmark.py --tasks tagging-batches)


def crf_max_marginals(emissions: np.ndarray, mask: np.ndarray, crf: dict) -> np.ndarray:
    """`VanillaTransformerCRF.max_marginals` in numpy: (B, T, L) best path score through each tag (argmax: Viterbi)."""
    start, end = np.asarray(crf["start"], np.float32), np.asarray(crf["end"], np.float32)
    transitions = np.asarray(crf["transitions"], np.float32)  # [from, to]
    mask = mask.astype(bool)
    first = mask & (np.cumsum(mask, 1) == 1)
    carry, alpha = np.zeros(emissions.shape[::2], np.float32), []
    for t in range(emissions.shape[1]):
        step = (carry[:, :, None] + transitions).max(1) + emissions[:, t]
        step = np.where(first[:, t, None], start + emissions[:, t], step)
        carry = np.where(mask[:, t, None], step, carry)
        alpha.append(carry)
    carry, beta = np.broadcast_to(end, emissions.shape[::2]), []
    for t in reversed(range(emissions.shape[1])):
        beta.append(carry)
        step = (transitions + (emissions[:, t] + carry)[:, None, :]).max(2)
        carry = np.where(mask[:, t, None], step, carry)
    return np.stack(alpha, 1) + np.stack(beta[::-1], 1)


class OnnxTagger:
    """A tagger written by `export-onnx`, run in ONNX Runtime on the CPU, without torch or transformers.

    It gives the scores a tagger's words are tagged from; `Tagger` (with `engine="onnxruntime"`, or "auto" on such a
    directory) uses it and adds the tokenizing, the windows and the tags. `scores(input_ids, attention_mask)` takes
    numpy arrays of shape (batch, length) and returns (batch, length, labels): the logits of a softmax head,
    or for a CRF head its max-marginals (computed in numpy from the CRF's weights in onnx_tagger.json), as the PyTorch
    model's `logits` in eval mode. `meta` holds onnx_tagger.json (the labels, the positions, the CRF's weights).

    Args:
        export: the recognised export (`model_dirs.recognise` of an `export-onnx` directory).
        threads: ONNX Runtime's intra-op threads; 0 (the default) lets ONNX Runtime choose.

    Raises:
        ImportError: onnxruntime is not installed (the `onnx` extra).
        OSError: model.onnx (or model.onnx.data) is truncated or corrupted.

    Example:
        ```python
        from vanilla_transformer.deploy.taggers import OnnxTagger
        from vanilla_transformer.model_dirs import recognise

        onnx = OnnxTagger(recognise("outputs/conll-onnx", task="tagging"))
        onnx.meta["labels"]  # ["O", "B-PER", ...]
        ```
    """

    def __init__(self, export: ModelDir, threads: int = 0):
        ort = require("onnxruntime", "onnx")
        self.meta = export.json(ONNX_META)
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        # no busy-waiting between operators: in `serve` (the HTTP stack, another model) and in `tag` (tokenizing, the
        # CRF in numpy) spinning threads would take the cores from the rest of the process
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        weights = [
            os.path.join(export.path, name) for name in ("model.onnx", "model.onnx.data") if name in export.files
        ]
        try:
            self.session = ort.InferenceSession(weights[0], options, providers=["CPUExecutionProvider"])
        except Exception as error:  # (ONNX Runtime's own classes: InvalidProtobuf, Fail, ...; none of them public)
            reason = " ".join(str(error).split())[:300]
            raise OSError(f"{' or '.join(weights)} is truncated or corrupted ({reason}){export.advice}.") from None

    def scores(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        """The tag scores of a batch of token ids.

        Args:
            input_ids: (batch, length) token ids, padded.
            attention_mask: (batch, length), 1 at a token and 0 at padding.

        Returns:
            (batch, length, labels): the logits, or a CRF head's max-marginals (their argmax is the Viterbi path).
        """
        logits = self.session.run(
            None, {"input_ids": input_ids.astype(np.int64), "attention_mask": attention_mask.astype(np.int64)}
        )[0]
        if self.meta["crf"] is not None:
            return crf_max_marginals(logits, attention_mask, self.meta["crf"])
        return logits


def first_pieces(word_ids: np.ndarray) -> np.ndarray:
    """(B, T) word index of each piece (NaN: a special or padding token) -> (B, T) True at each word's first piece."""
    before = np.concatenate([np.full((len(word_ids), 1), np.nan), word_ids[:, :-1]], 1)
    return ~np.isnan(word_ids) & (word_ids != before)


class Tagger:
    """A saved tagger (softmax or CRF head), or an ensemble with `ensemble_with` (the members' mean, as `train-ner
    --ensemble_with`), tagging lists of words: an IOB2 tag and its probability per word. CRF heads are decoded by
    Viterbi (the argmax of their max-marginals, whose softmax is the score). `engine` "onnxruntime" (or "auto" on a
    directory written by `export-onnx`) runs an ONNX export on the CPU instead of PyTorch, without loading torch or
    transformers. `sentences` counts the sentences tagged, `engine_seconds` the time spent in the model's calls.

    Args:
        model: a saved tagger or its ONNX export (a path or Hub id), or its recognised `model_dirs.ModelDir`.
        ensemble_with: more saved taggers (the same tokenizer and labels) tagging with it as one.
        device: "cpu", "cuda" or "auto"; batch_size: sentences per model call at most.
        engine: "auto", "pytorch" or "onnxruntime".

    Raises:
        FileNotFoundError: no such directory, or an incomplete export.
        ValueError: not a tagger, an engine that cannot run it, or members that disagree.

    Example:
        ```python
        from vanilla_transformer.deploy.taggers import Tagger, line_entities

        tagger = Tagger("outputs/conll")
        line_entities(tagger, ["Anna Novak lives in Berlin."])  # [[{"text": "Anna Novak", "type": "PER", ...}, ...]]
        ```
    """

    def __init__(self, model, ensemble_with=(), device: str = "auto", batch_size: int = 32, engine: str = "auto"):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
        self.batch_size, self.sentences, self.engine_seconds, self.onnx = batch_size, 0, 0.0, None
        # a `ModelDir` recognised by the caller is not inspected again; a path is, once
        found = model.holding("tagging") if isinstance(model, ModelDir) else recognise(model, engine, "tagging")
        if found.engine == "onnxruntime":
            if ensemble_with:
                raise ValueError("--ensemble_with runs the taggers in PyTorch: give their saved directories.")
            self.device = resolve_device(device, found.engine)
            self.onnx = OnnxTagger(found)
            self.scores, self.labels = self.onnx.scores, self.onnx.meta["labels"]
            self.piece_tokenizer, settings = found.export_tokenizer()
            self.pad = special_token_id(self.piece_tokenizer, settings, "pad_token", "<pad>") or 0
            self.window = self.onnx.meta["max_position_embeddings"] - self.special_tokens()
            self.call_words = CALL_COST_WORDS
            return
        self.load_pytorch(found, ensemble_with, device)

    def load_pytorch(self, found: ModelDir, ensemble_with, device: str) -> None:
        import torch

        from ..model.modeling_vanilla_transformer import VanillaTransformerForTokenClassification
        from ..ner.ensemble import ensemble_of

        tokenizer = found.tokenizer()
        model = found.load(VanillaTransformerForTokenClassification)
        if ensemble_with:
            model = ensemble_of(model, tokenizer, ensemble_with)
        self.device = resolve_device(device, "pytorch")
        model = model.to(self.device).eval()

        @torch.inference_mode()
        def scores(input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
            batch = {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(attention_mask)}
            return model(**{k: v.to(self.device) for k, v in batch.items()}).logits.float().cpu().numpy()

        self.scores, self.model, self.tokenizer = scores, model, tokenizer
        self.labels = [model.config.id2label[i] for i in range(model.config.num_labels)]
        # the same pieces as the tokenizer's own calls give, on a copy that `tag` alone uses (`tag_windows` pads)
        self.piece_tokenizer, self.pad = own_tokenizer(tokenizer.backend_tokenizer), tokenizer.pad_token_id or 0
        self.window = model.config.max_position_embeddings - self.special_tokens()  # word pieces a window holds
        self.call_words = CALL_COST_WORDS if self.device == "cpu" else None

    def special_tokens(self) -> int:
        encode = self.piece_tokenizer.encode
        return len(encode("a").ids) - len(encode("a", add_special_tokens=False).ids)

    def windows(self, words: list[str]) -> list[tuple[int, int]]:
        """Spans of consecutive words whose pieces fit the model's positions, covering `words`."""
        if sum(len(word.encode()) + 1 for word in words) <= self.window:  # a piece holds a byte at least (+ a marker)
            return [(0, len(words))]  # (fits for sure: no tokenizer pass)
        pieces = [max(1, len(e.ids)) for e in self.piece_tokenizer.encode_batch(words, add_special_tokens=False)]
        spans, start, used = [], 0, 0
        for i, n in enumerate(pieces):
            if used + n > self.window and i > start:
                spans.append((start, i))
                start, used = i, 0
            used += n
        return spans + [(start, len(words))]

    def tag_windows(self, windows: list[list[str]]) -> list[tuple[list[str], list[float]]]:
        """(tags, probabilities) of each window's words, from each word's first piece; the windows in one batch."""
        encodings = self.piece_tokenizer.encode_batch(windows, is_pretokenized=True)
        length = max(len(e.ids) for e in encodings)
        input_ids = np.full((len(windows), length), self.pad, np.int64)  # (B, T)
        attention_mask = np.zeros((len(windows), length), np.int64)
        word_ids = np.full((len(windows), length), np.nan)
        for row, e in enumerate(encodings):
            input_ids[row, : len(e.ids)], attention_mask[row, : len(e.ids)] = e.ids, 1
            word_ids[row, : len(e.ids)] = np.array(e.word_ids, np.float64)  # None -> NaN
        start = time.perf_counter()
        scores = self.scores(input_ids, attention_mask)  # (B, T, labels)
        self.engine_seconds += time.perf_counter() - start
        best = scores.argmax(-1)  # (B, T)
        probs = 1 / np.exp(scores - scores.max(-1, keepdims=True)).sum(-1)  # (B, T): the softmax at the argmax
        first = first_pieces(word_ids)
        labels = np.asarray(self.labels, dtype=object)[best[first]].tolist()  # the rows' first pieces, row after row
        probs, words = np.round(probs[first].astype(np.float64), 4).tolist(), word_ids[first].astype(int).tolist()
        out, at = [], 0
        for window, count in zip(windows, first.sum(1).tolist()):
            tags, scored = ["O"] * len(window), [1.0] * len(window)  # a word of no piece (none seen): "O"
            for word, label, prob in zip(words[at : at + count], labels[at : at + count], probs[at : at + count]):
                tags[word], scored[word] = label, prob
            out.append((tags, scored))
            at += count
        return out

    def batches(self, lengths: list[int]) -> list[tuple[int, int]]:
        """Ascending window lengths (in words) -> (start, end) of consecutive batches of at most `batch_size`: full
        ones where `call_words` is None (a GPU), else the cut that minimizes the words computed, padding included, plus
        `call_words` for every model call (an exact dynamic program). On a CPU a server's batch of sentences of all
        lengths then runs as a few batches of similar lengths, faster than one padded to its longest
        (`scripts/benchmark.py --tasks tagging-batches`, docs/serving.md)."""
        n = len(lengths)
        if self.call_words is None:
            return [(start, min(start + self.batch_size, n)) for start in range(0, n, self.batch_size)]
        cost, cut = [0] + [None] * n, [0] * (n + 1)  # the cheapest split of the first `end` windows, its last cut
        for end in range(1, n + 1):
            for start in range(max(0, end - self.batch_size), end):
                spent = cost[start] + self.call_words + (end - start) * lengths[end - 1]
                if cost[end] is None or spent < cost[end]:
                    cost[end], cut[end] = spent, start
        spans, end = [], n
        while end:
            spans.append((cut[end], end))
            end = cut[end]
        return spans[::-1]

    def __call__(self, sentences: list[list[str]], progress: bool = False) -> list[tuple[list[str], list[float]]]:
        """(tags, probabilities) per word of each sentence; sentences longer than a window in several windows. The
        windows are batched by length (`batches`: similar lengths together, less padding); an empty sentence's one
        window is empty and tagged by no model call."""
        jobs = [(i, start, end) for i, words in enumerate(sentences) for start, end in self.windows(words)]
        batches, scatter = nonblank_batches([sentences[i][a:b] for i, a, b in jobs], ([], []), self.batches)
        self.sentences += sum(1 for words in sentences if words)
        done = []
        with sentence_progress(sum(map(len, batches)), progress) as bar:
            for batch in batches:
                done.append(self.tag_windows(batch))
                bar.update(len(batch))
        results = [([], []) for _ in sentences]
        for (i, _, _), (tags, probs) in zip(jobs, scatter(done)):  # (a sentence's windows in order)
            results[i][0].extend(tags)
            results[i][1].extend(probs)
        return results


def entities(line: str, words: list[tuple[str, int, int]], tags: list[str], probs: list[float]) -> list[dict]:
    """The entities of one line: text, type, character offsets, mean probability of their words' tags."""
    return [
        {
            "text": line[words[start][1] : words[end - 1][2]],
            "type": kind,
            "start": words[start][1],
            "end": words[end - 1][2],
            "score": round(sum(probs[start:end]) / (end - start), 4),
        }
        for start, end, kind in mention_spans(tags)
    ]


def line_entities(
    tagger: Tagger, lines: list[str], consistent: bool = False, progress: bool = False
) -> list[list[dict]]:
    """The named entities of each line of text.

    Each line is split into words as CoNLL-2003 is tokenized, tagged, and its IOB2 tags read as entities.

    Args:
        tagger: the `Tagger` to tag with.
        lines: the text, one sentence (or paragraph) a line; a blank line has no entities.
        consistent: document consistency (`train-ner --document_consistency`) within each paragraph, paragraphs being
            separated by blank lines; False (the default) tags every line on its own.
        progress: a progress bar on stderr.

    Returns:
        One list per line of its entities, each a dict: "text" (as written), "type" ("PER", ...), "start" and "end"
        (character offsets into the line: `line[start:end] == text`) and "score" (the mean over the entity's words of
        the probability of their tags, rounded to 4 decimals).

    Example:
        ```python
        from vanilla_transformer.deploy.taggers import Tagger, line_entities

        tagger = Tagger("outputs/conll")
        line_entities(tagger, ["Anna Novak lives in Berlin.", ""])  # [[{"text": "Anna Novak", ...}, ...], []]
        ```
    """
    spans = [words_of(line) for line in lines]
    sentences = [[word for word, _, _ in words] for words in spans]
    tagged = tagger(sentences, progress)
    tags = [t for t, _ in tagged]
    if consistent:
        documents = [sum(1 for earlier in lines[:i] if not earlier.strip()) for i in range(len(lines))]
        tags = document_consistency(sentences, tags, documents)
    return [entities(line, words, t, p) for line, words, t, (_, p) in zip(lines, spans, tags, tagged)]


def read_conll(lines: list[str], name: str):
    """CoNLL lines -> (sentences as lists of line numbers, their words, the document of each sentence)."""
    sentences = conll_sentences(lines, name)
    words = [[parts[0] for parts in rows] for _, rows, _ in sentences]
    return [numbers for numbers, _, _ in sentences], words, [document for _, _, document in sentences]


def tag_lines(
    tagger: Tagger,
    lines: list[str],
    form: str = "text",
    consistent: bool = False,
    progress: bool = False,
    name: str = "<stdin>",
) -> list[str]:
    """Tag lines of text or CoNLL into the lines `vanilla-transformer tag` writes.

    Args:
        tagger: the `Tagger` to tag with.
        lines: the input lines, without their line ends.
        form: "text" (the default: one sentence a line; each output line the JSON array of its entities, as
            `line_entities` gives them) or "conll" (token lines, the word first; each output line the input line
            with the predicted tag added as a last column, separated by a tab where the line has tabs, else a
            space; blank and `-DOCSTART-` lines kept).
        consistent: document consistency (`train-ner --document_consistency`); documents are a text's paragraphs
            (blank lines between them) or CoNLL's `-DOCSTART-` sections.
        progress: a progress bar on stderr.
        name: the input's name in errors.

    Returns:
        One output line per input line, in input order.

    Raises:
        ValueError: a `form` other than "text" or "conll".
        DataError: (a `ValueError`) a CoNLL token line with another number of columns than the first, naming `name`
            and the line.

    Example:
        ```python
        from vanilla_transformer.deploy.taggers import Tagger, tag_lines

        tagger = Tagger("outputs/conll")
        tag_lines(tagger, ["Anna Novak lives in Berlin ."])  # ['[{"text": "Anna Novak", ...}, ...]']
        tag_lines(tagger, ["Berlin NNP", "is VBZ"], form="conll")  # ["Berlin NNP B-LOC", "is VBZ O"]
        ```
    """
    if form not in TAG_FORMATS:
        raise ValueError(f"format must be one of {TAG_FORMATS}, got {form!r}.")
    if form == "text":
        return [json.dumps(found, ensure_ascii=False) for found in line_entities(tagger, lines, consistent, progress)]
    rows, sentences, documents = read_conll(lines, name)
    tags = [t for t, _ in tagger(sentences, progress)]
    if consistent:
        tags = document_consistency(sentences, tags, documents)
    out = list(lines)
    for numbers, sentence_tags in zip(rows, tags):
        for number, tag in zip(numbers, sentence_tags):
            out[number] = out[number].rstrip() + ("\t" if "\t" in out[number] else " ") + tag
    return out


def tag_file(
    model_dir,
    input_path=None,
    output_path=None,
    form: str = "text",
    batch_size: int = 32,
    document_consistency: bool = False,
    ensemble_with=(),
    device: str = "auto",
    progress: bool = True,
    engine: str = "auto",
) -> dict:
    """Tag a text or CoNLL file into another: what `vanilla-transformer tag` runs.

    Args:
        model_dir: as `Tagger`'s `model`: a saved tagger or its ONNX export (a path or Hub id), or its `ModelDir`.
        input_path: the file to read (None or "-": stdin); output_path: the file to write, atomically (None or "-":
            stdout).
        form: "text" or "conll", as `tag_lines`'s; batch_size: sentences per model call at most (default `32`).
        document_consistency: as `tag_lines`'s `consistent`.
        ensemble_with, device, engine: as `Tagger`'s.
        progress: a progress bar on stderr (reading a file, not stdin).

    Returns:
        The counts and speed: sentences, lines, seconds, sentences per second, the engine's seconds.

    Raises:
        FileNotFoundError: no such model directory, or an incomplete export.
        ValueError: not a tagger, an engine that cannot run it, a `form` or `batch_size` out of range.
        DataError: (a `ValueError`) an input file that is missing or not UTF-8, or a CoNLL line of the wrong columns.

    Example:
        ```python
        from vanilla_transformer.deploy.taggers import tag_file

        tag_file("outputs/conll", "news.txt", "news.entities.jsonl")  # {"sentences": ..., "lines": ..., ...}
        ```
    """
    tagger = Tagger(model_dir, ensemble_with, device, batch_size, engine)
    lines = read_lines(input_path, allow_empty=True)  # no lines in, none out
    start = time.perf_counter()
    out = tag_lines(
        tagger, lines, form, document_consistency, progress and input_path not in (None, "-"), input_path or "<stdin>"
    )
    seconds = time.perf_counter() - start
    write_lines(output_path, out)
    return file_stats(tagger.sentences, len(lines), seconds, tagger.engine_seconds)
