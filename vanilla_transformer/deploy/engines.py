"""The models a server holds: a translation engine per language pair (PyTorch or CTranslate2) and a tagger (PyTorch or
ONNX Runtime). Each is loaded once (`open`, or `load` in a background thread), counts a text's tokens for the limits
and batching, and runs one batch at a time on an engine thread: `process(texts, options)`, the options (`Options`)
compared, never read, by the batcher. `ServedEngine` (and `ServedTranslator`) is what the HTTP server needs of an
engine: these classes, or a test's stand-in of the same shape."""

import gc
import logging
import threading
from typing import NamedTuple, Protocol

from ..loading import own_tokenizer
from ..model_dirs import ModelDir

logger = logging.getLogger(__name__)

BATCH_COUNT_CHARS = 4096  # texts of more characters than this in all are counted by the tokenizer's thread pool


class Options(NamedTuple):
    """What a sentence is decoded with, besides its text: only sentences of equal options share a batch. A tagger
    reads none of them (its sentences all have the defaults)."""

    num_beams: int | None = None  # None: the model's own (its generation config)
    max_new_tokens: int | None = None  # None: the model's own limit
    n: int = 1  # the best translations returned per sentence


class ServedEngine(Protocol):
    """What the HTTP server needs of an engine (`Engine` has it): its `name` (the batcher's key; "ner" for the
    tagger), `model_dir`, how many batches it runs at once (`workers`), `ready` once loaded or `error` why it could
    not (`load` in a background thread), `count_tokens` for the limits and the batcher, `process` a batch."""

    name: str
    model_dir: str
    workers: int
    ready: threading.Event
    error: BaseException | None

    def load(self) -> None: ...

    def count_tokens(self, texts: list[str]) -> list[int]: ...

    def process(self, texts: list[str], options: Options) -> list: ...


class ServedTranslator(ServedEngine, Protocol):
    """A served translation engine: one language pair."""

    source: str
    target: str


class Engine:
    """A model served under `name` (its batcher's key and its name in logs and /v1/health); `ready` is set once it
    has loaded, `error` holds why it could not. Subclasses give `start()` (load; return the Rust tokenizer the
    request handlers count tokens with) and `process(texts, options)`."""

    workers = 1  # batches it runs at once

    def __init__(self, name: str, model_dir: str, device: str = "auto"):
        self.name, self.model_dir, self.device = name, model_dir, device
        self.ready = threading.Event()
        self.error: BaseException | None = None

    def open(self) -> None:
        """Load the model; an error propagates (`serve` loads before it listens: a model that cannot load ends the
        command with one error line)."""
        self.counter = own_tokenizer(self.start())  # the request handlers' own copy
        # the libraries and the model are millions of long-lived objects: a full collection would walk them all,
        # pausing every request; frozen, a collection sees only new ones
        gc.collect()
        gc.freeze()
        self.ready.set()
        logger.info("%s %s loaded", self.name, self.model_dir)

    def load(self) -> None:
        """`open` in the background (an app created around an engine not yet loaded): an error is kept for /health
        and the log."""
        try:
            self.open()
        except BaseException as error:
            self.error = error
            logger.error("could not load %s: %s", self.model_dir, error)

    def count_tokens(self, texts: list[str]) -> list[int]:
        if sum(map(len, texts)) < BATCH_COUNT_CHARS:  # one by one: no thread pool for a few sentences
            return [len(self.counter.encode(text)) for text in texts]
        # many characters: `encode_batch` lets go of the GIL while it works (`encode` holds it: a long text would
        # stop the server's event loop even from a worker thread)
        return [len(encoding) for encoding in self.counter.encode_batch(texts)]


class TranslationEngine(Engine):
    """A translation model (`model_dirs.recognise`'s `ModelDir`: its path and engine) for `source` -> `target`:
    `process(texts, Options(num_beams, max_new_tokens, n))` -> each text's `n` best translations, best first."""

    def __init__(
        self,
        model: ModelDir,
        source: str,
        target: str,
        device: str = "auto",
        compute_type: str = "default",
        threads: int = 0,
        workers: int = 1,
    ):
        super().__init__(f"{source}-{target}", model.path, device)
        self.model, self.source, self.target = model, source, target
        self.compute_type, self.threads, self.workers = compute_type, threads, workers

    def start(self):
        from .translators import make_translator

        self.translator = make_translator(
            self.model, device=self.device, compute_type=self.compute_type, threads=self.threads, workers=self.workers
        )
        return self.translator.backend

    def process(self, texts: list[str], options: Options) -> list[list[str]]:
        num_beams, max_new_tokens, n = options  # (a plain tuple of the three too)
        return self.translator.hypotheses(texts, n, num_beams, max_new_tokens)


class TaggerEngine(Engine):
    """A tagger (`deploy.taggers.Tagger`, PyTorch or an ONNX export; `model_dirs.recognise`'s `ModelDir`, or its path):
    `process(texts, options)` (the options unread) -> each text's entities, as `vanilla-transformer tag` writes them."""

    def __init__(self, model: "ModelDir | str", device: str = "auto"):
        super().__init__("ner", model.path if isinstance(model, ModelDir) else model, device)
        self.model = model

    def start(self):
        from .taggers import Tagger

        self.tagger = Tagger(self.model, device=self.device)
        return self.tagger.piece_tokenizer

    def process(self, texts: list[str], options: Options) -> list[list[dict]]:
        from .taggers import line_entities

        return line_entities(self.tagger, texts)
