"""`vanilla-transformer serve MODEL_DIR [--ner TAGGER_DIR]`: a translation model and/or a tagger behind HTTP, with
dynamic batching.

Endpoints:
- `POST /translate`, `GET /languages`: LibreTranslate's API (JSON or form bodies), so its clients work unchanged;
- `POST /v1/translate`: `{"sentences": [...], "num_beams": 1, "max_new_tokens": null}` -> `{"translations": [...]}`;
- `POST /v1/ner` (a tagger as MODEL_DIR, or `--ner`): `{"sentences": [...]}` -> `{"entities": [[...], ...]}`, each
  text's entities as `vanilla-transformer tag` writes them;
- `GET /health`: 200 once the models are loaded, 503 before; `GET /metrics`: Prometheus text format.

One batcher per model groups the sentences of concurrent requests into engine batches of at most `--max_batch_tokens`
source tokens, waiting at most `--max_wait_ms` for a batch to fill, and runs `--workers` of them at once; each
sentence keeps its own future, so a request gets back exactly its own translations. FastAPI on uvicorn (the `serve` extra): typed request bodies with clear 422
errors, graceful shutdown on SIGTERM (in-flight requests finish first), and the stack the demo page already uses.
"""

import argparse
import asyncio
import copy
import gc
import hmac
import json
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

logger = logging.getLogger("vanilla_transformer.serve")

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class ServeError(Exception):
    """An error answered as JSON `{"error": message}` with `status` (and `headers`)."""

    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


# ---------------------------------------------------------------------------------------------------- metrics


class Metrics:
    """Counters and histograms in Prometheus' text exposition format (no client library needed)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.requests: dict[tuple[str, int], int] = {}
        self.histograms = {"vt_request_seconds": (LATENCY_BUCKETS, {}), "vt_batch_sentences": (BATCH_BUCKETS, {})}
        self.counters = {"vt_sentences_total": 0, "vt_engine_errors_total": 0, "vt_rejected_total": 0}
        self.queue_length = lambda: 0

    def count(self, name: str, n: int = 1) -> None:
        with self.lock:
            self.counters[name] += n

    def request(self, path: str, status: int, seconds: float) -> None:
        with self.lock:
            self.requests[path, status] = self.requests.get((path, status), 0) + 1
        self.observe("vt_request_seconds", seconds, path=path)

    def observe(self, name: str, value: float, **labels) -> None:
        buckets, series = self.histograms[name]
        key = tuple(sorted(labels.items()))
        with self.lock:
            counts = series.setdefault(key, [0] * len(buckets) + [0, 0.0])  # buckets..., count, sum
            for i, bound in enumerate(buckets):
                counts[i] += value <= bound
            counts[-2] += 1
            counts[-1] += value

    def render(self) -> str:
        lines = ["# TYPE vt_requests_total counter"]
        with self.lock:
            for (path, status), n in sorted(self.requests.items()):
                lines.append(f'vt_requests_total{{path="{path}",status="{status}"}} {n}')
            for name, value in self.counters.items():
                lines += [f"# TYPE {name} counter", f"{name} {value}"]
            lines += ["# TYPE vt_queue_sentences gauge", f"vt_queue_sentences {self.queue_length()}"]
            for name, (buckets, series) in self.histograms.items():
                lines.append(f"# TYPE {name} histogram")
                for key, counts in sorted(series.items()):
                    labels = "".join(f'{k}="{v}",' for k, v in key)
                    for bound, n in zip(buckets, counts):
                        lines.append(f'{name}_bucket{{{labels}le="{bound}"}} {n}')
                    lines.append(f'{name}_bucket{{{labels}le="+Inf"}} {counts[-2]}')
                    plain = f"{{{labels.rstrip(',')}}}" if labels else ""
                    lines += [f"{name}_count{plain} {counts[-2]}", f"{name}_sum{plain} {counts[-1]}"]
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------- batching


@dataclass
class Item:
    text: str
    tokens: int
    options: tuple  # (num_beams, max_new_tokens): only sentences with the same options share a batch
    future: asyncio.Future = field(repr=False)


class DynamicBatcher:
    """Sentences from concurrent requests -> engine batches of at most `max_batch_tokens` source tokens (and at least
    one sentence), collected for at most `max_wait` seconds after the first arrives. `translate(texts, num_beams,
    max_new_tokens)` runs in `workers` threads, one batch each (the next batch forms while they run); an exception
    fails that batch's sentences only. At most `max_queue` sentences wait: more is `ServeError(503)` with
    Retry-After."""

    def __init__(self, translate, max_batch_tokens: int, max_wait: float, max_queue: int, metrics: Metrics,
                 workers: int = 1):
        self.translate, self.max_batch_tokens, self.max_wait = translate, max_batch_tokens, max_wait
        self.max_queue, self.metrics = max_queue, metrics
        self.queue: asyncio.Queue[Item] = asyncio.Queue()
        self.held: list[Item] = []  # taken from the queue, waiting for a batch with their options
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vt-engine")
        self.free = asyncio.Semaphore(workers)  # engine threads without a batch
        self.task: asyncio.Task | None = None
        self.running: set[asyncio.Task] = set()
        metrics.queue_length = self.waiting

    def waiting(self) -> int:
        return self.queue.qsize() + len(self.held)

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, *self.running, return_exceptions=True)
        self.executor.shutdown(wait=True)

    async def submit(self, texts: list[str], tokens: list[int], options: tuple) -> list[str]:
        if self.waiting() + len(texts) > self.max_queue:
            self.metrics.count("vt_rejected_total")
            raise ServeError(503, f"the queue is full ({self.max_queue} sentences, --max_queue); try again shortly",
                             {"Retry-After": "1"})
        loop = asyncio.get_running_loop()
        items = [Item(t, n, options, loop.create_future()) for t, n in zip(texts, tokens)]
        for item in items:
            self.queue.put_nowait(item)
        try:
            return list(await asyncio.gather(*(item.future for item in items)))
        except BaseException:
            for item in items:  # cancelled (timeout, client gone) or failed: the worker skips what is left
                item.future.cancel()
            raise

    async def next_batch(self) -> list[Item]:
        first = self.held.pop(0) if self.held else await self.queue.get()
        batch, tokens = [first], first.tokens
        deadline = asyncio.get_running_loop().time() + self.max_wait
        for item in list(self.held):  # held items with these options first: they waited longest
            if item.options == first.options and tokens + item.tokens <= self.max_batch_tokens:
                self.held.remove(item)
                batch.append(item)
                tokens += item.tokens
        while tokens < self.max_batch_tokens:
            remaining = deadline - asyncio.get_running_loop().time()
            try:
                if remaining <= 0:
                    item = self.queue.get_nowait()
                else:
                    item = await asyncio.wait_for(self.queue.get(), remaining)
            except (asyncio.QueueEmpty, TimeoutError):
                break
            if item.options != first.options or tokens + item.tokens > self.max_batch_tokens:
                self.held.append(item)
                if tokens + item.tokens > self.max_batch_tokens:
                    break
                continue
            batch.append(item)
            tokens += item.tokens
        return [item for item in batch if not item.future.done()]

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self.free.acquire()  # a batch is formed only when an engine thread can take it
            batch = await self.next_batch()
            if not batch:
                self.free.release()
                continue
            task = loop.create_task(self.run_batch(batch))
            self.running.add(task)
            task.add_done_callback(self.running.discard)

    async def run_batch(self, batch: list[Item]) -> None:
        """One batch on an engine thread; its sentences' futures get their translations, or all fail with a 500."""
        num_beams, max_new_tokens = batch[0].options
        self.metrics.observe("vt_batch_sentences", len(batch))
        try:
            outputs = await asyncio.get_running_loop().run_in_executor(
                self.executor, self.translate, [i.text for i in batch], num_beams, max_new_tokens)
            if len(outputs) != len(batch):
                raise RuntimeError(f"the engine returned {len(outputs)} translations for {len(batch)} sentences")
        except Exception as error:  # noqa: BLE001 - this batch's requests fail with 500, the server goes on
            logger.exception("engine call failed for a batch of %d sentences", len(batch))
            self.metrics.count("vt_engine_errors_total")
            for item in batch:
                if not item.future.done():
                    item.future.set_exception(ServeError(500, f"the model failed: {type(error).__name__}"))
            return
        finally:
            self.free.release()
        self.metrics.count("vt_sentences_total", len(batch))
        for item, text in zip(batch, outputs):
            if not item.future.done():
                item.future.set_result(text)


# ---------------------------------------------------------------------------------------------------- the engine


class Engine:
    """The model, loaded by `serve` before it listens (`open`), or by the app in a background thread (`load`; `/health`
    says 503 until it is ready): `translate(texts, num_beams, max_new_tokens)` on the engine's thread, `count_tokens
    (texts)` for limits and batching."""

    def __init__(self, model_dir: str, engine: str = "auto", device: str = "auto", compute_type: str = "default",
                 threads: int = 0, workers: int = 1):
        self.model_dir, self.engine, self.device, self.compute_type = model_dir, engine, device, compute_type
        self.threads, self.workers = threads, workers
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.translator = None

    def open(self) -> None:
        """Load the model; an error propagates (`serve` loads before it listens: a model that cannot load ends the
        command with one error line)."""
        from .translate import make_translator

        self.translator = make_translator(self.model_dir, self.engine, self.device, compute_type=self.compute_type,
                                          threads=self.threads, workers=self.workers)
        # the request handlers' own copy of the Rust tokenizer: a tokenizer call sets padding / truncation on the
        # one it wraps, so one shared by two threads pads wrongly (seen under load as "Unable to create tensor")
        self.counter = copy.deepcopy(self.translator.tokenizer.backend_tokenizer)
        self.counter.no_padding()
        self.counter.no_truncation()
        # the libraries and the model are millions of long-lived objects: a full collection walked them all, a
        # 200+ ms pause of every request at a time (the load test's p99); frozen, a collection sees only new ones
        gc.collect()
        gc.freeze()
        self.ready.set()
        logger.info("model %s loaded (%s)", self.model_dir, type(self.translator).__name__)

    def load(self) -> None:
        """`open` in the background (an app created around an engine not yet loaded): an error is kept for /health
        and the log."""
        try:
            self.open()
        except BaseException as error:
            self.error = error
            logger.error("could not load %s: %s", self.model_dir, error)

    def count_tokens(self, texts: list[str]) -> list[int]:
        return [len(self.counter.encode(text)) for text in texts]  # one by one: no thread pool for a few sentences

    def translate(self, texts: list[str], num_beams: int, max_new_tokens: int | None) -> list[str]:
        return self.translator(texts, num_beams=num_beams, max_new_tokens=max_new_tokens)


class TaggerEngine(Engine):
    """A tagger (`vanilla_transformer.tag.Tagger`, PyTorch, one batch at a time): `tag(texts)` -> each text's
    entities, as `vanilla-transformer tag` writes them."""

    def __init__(self, model_dir: str, device: str = "auto"):
        super().__init__(model_dir, "pytorch", device)

    def open(self) -> None:
        from .tag import Tagger

        self.tagger = Tagger(self.model_dir, device=self.device)
        self.counter = copy.deepcopy(self.tagger.tokenizer.backend_tokenizer)  # (as Engine.open)
        self.counter.no_padding()
        self.counter.no_truncation()
        gc.collect()
        gc.freeze()
        self.ready.set()
        logger.info("tagger %s loaded", self.model_dir)

    def tag(self, texts: list[str], *options) -> list[list[dict]]:
        from .tag import line_entities

        return line_entities(self.tagger, texts)


def model_languages(model_dir: str) -> tuple[str, str] | None:
    """(source, target) from the model card's `language:` list (written by the training command), if it has one."""
    from huggingface_hub import ModelCard

    path = os.path.join(model_dir, "README.md")
    if not os.path.isfile(path):
        return None
    try:
        languages = ModelCard.load(path).data.language
    except Exception:  # noqa: BLE001 - a card without metadata: the flags decide
        return None
    if isinstance(languages, list) and len(languages) >= 2:
        return str(languages[0]), str(languages[-1])
    return None


# ---------------------------------------------------------------------------------------------------- the app


def body_too_large(limit: int) -> ServeError:
    return ServeError(413, f"request body over {limit} bytes (--max_request_bytes)")


class LimitsAndMetrics:
    """ASGI middleware: a body whose announced length is over the limit is answered 413 unread; every response is
    counted and timed for /metrics. Plain ASGI rather than `@app.middleware("http")`, which runs each request
    through an extra task and a response stream."""

    def __init__(self, app, max_request_bytes: int, metrics: Metrics):
        self.app, self.max_request_bytes, self.metrics = app, max_request_bytes, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        from fastapi.responses import JSONResponse

        start, status = time.perf_counter(), 500  # 500 unless a response starts: an exception went past the app

        async def send_and_note(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        length = dict(scope["headers"]).get(b"content-length")
        try:
            if length is not None and (not length.isdigit() or int(length) > self.max_request_bytes):
                error = body_too_large(self.max_request_bytes)
                response = JSONResponse({"error": error.message}, status_code=error.status)
                await response(scope, receive, send_and_note)
            else:
                await self.app(scope, receive, send_and_note)
        finally:
            self.metrics.request(scope["path"], status, time.perf_counter() - start)


@dataclass
class Settings:
    source_lang: str = "src"
    target_lang: str = "tgt"
    api_key: str | None = None
    max_request_bytes: int = 1 << 20
    max_sentences: int = 128
    max_sentence_tokens: int = 256
    max_batch_tokens: int = 4096
    max_wait_ms: float = 0.0
    max_queue: int = 1024
    max_beams: int = 8
    request_timeout: float = 60.0
    cors_origins: tuple = ()


LANGUAGE_NAMES = {"de": "German", "en": "English", "fr": "French", "es": "Spanish", "it": "Italian", "cs": "Czech",
                  "ro": "Romanian", "ru": "Russian", "zh": "Chinese", "ja": "Japanese", "nl": "Dutch",
                  "pt": "Portuguese"}


def create_app(engine: Engine | None, settings: Settings, ner: TaggerEngine | None = None):
    """The FastAPI application for a translation `engine` and/or a tagger `ner`; an engine not yet loaded loads in the
    background when the app starts."""
    from contextlib import asynccontextmanager

    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, PlainTextResponse
    from pydantic import BaseModel, ConfigDict, Field, ValidationError

    metrics = Metrics()

    engines = {kind: e for kind, e in (("translation", engine), ("ner", ner)) if e is not None}
    if not engines:
        raise ValueError("serve needs a translation model, a tagger, or both.")

    @asynccontextmanager
    async def lifespan(app):
        app.state.batchers = {}
        for kind, served in engines.items():
            run = served.translate if kind == "translation" else served.tag
            batcher = DynamicBatcher(run, settings.max_batch_tokens, settings.max_wait_ms / 1000, settings.max_queue,
                                     metrics, served.workers)
            batcher.start()
            app.state.batchers[kind] = batcher
            if not served.ready.is_set():  # (the command loads before it listens)
                threading.Thread(target=served.load, name=f"vt-load-{kind}", daemon=True).start()
        metrics.queue_length = lambda: sum(b.waiting() for b in app.state.batchers.values())
        app.state.batcher = app.state.batchers.get("translation")
        yield
        for batcher in app.state.batchers.values():
            await batcher.stop()

    app = FastAPI(title="vanilla-transformer", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    if settings.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["*"])

    def error(status: int, message: str, headers: dict | None = None):
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    @app.exception_handler(ServeError)
    async def serve_error(request, exc: ServeError):
        return error(exc.status, exc.message, exc.headers)

    @app.exception_handler(Exception)
    async def unexpected(request, exc: Exception):  # a bug: logged with its trace, answered without it
        logger.exception("unexpected error on %s", request.url.path)
        return error(500, f"internal error ({type(exc).__name__})")

    app.add_middleware(LimitsAndMetrics, max_request_bytes=settings.max_request_bytes, metrics=metrics)

    async def read_body(request: Request) -> bytes:
        body = b""
        async for chunk in request.stream():  # no content-length (chunked): counted as it comes
            body += chunk
            if len(body) > settings.max_request_bytes:
                raise body_too_large(settings.max_request_bytes)
        return body

    def check_api_key(given) -> None:
        if settings.api_key is None:
            return
        if not isinstance(given, str) or not hmac.compare_digest(given.encode(), settings.api_key.encode()):
            raise ServeError(403, "Invalid API key")

    def ready(request: Request, kind: str = "translation") -> "DynamicBatcher":
        served = engines.get(kind)
        if served is None:
            raise ServeError(404, f"this server has no {'translation model' if kind == 'translation' else 'tagger'} "
                                  f"({'serve TRANSLATION_DIR' if kind == 'translation' else 'serve ... --ner TAGGER_DIR'})")
        if served.error is not None:
            raise ServeError(503, f"the model could not be loaded: {served.error}")
        if not served.ready.is_set():
            raise ServeError(503, "the model is still loading", {"Retry-After": "2"})
        return request.app.state.batchers[kind]

    async def run(request: Request, kind: str, texts: list[str], options: tuple, strip: bool = True) -> list:
        """The limits, then each non-empty text through the kind's batcher; None for the empty ones."""
        batcher = ready(request, kind)
        if len(texts) > settings.max_sentences:
            raise ServeError(413, f"{len(texts)} sentences in one request; at most {settings.max_sentences} "
                                  "(--max_sentences)")
        todo = [i for i, text in enumerate(texts) if text.strip()]
        sent = [texts[i].strip() if strip else texts[i] for i in todo]
        tokens = engines[kind].count_tokens(sent) if todo else []
        for i, n in zip(todo, tokens):
            if n > settings.max_sentence_tokens:
                raise ServeError(400, f"sentence {i} has {n} tokens; at most {settings.max_sentence_tokens} "
                                      "(--max_sentence_tokens)")
        outputs = [None] * len(texts)  # empty sentences are not sent to the model
        try:
            done = await asyncio.wait_for(batcher.submit(sent, tokens, options), settings.request_timeout)
        except TimeoutError:
            raise ServeError(504, f"no answer within {settings.request_timeout:g} s (--request_timeout)") from None
        for i, output in zip(todo, done):
            outputs[i] = output
        return outputs

    async def translate(request: Request, texts: list[str], num_beams: int, max_new_tokens: int | None) -> list[str]:
        if num_beams > settings.max_beams:
            raise ServeError(400, f"num_beams {num_beams} is over the limit of {settings.max_beams} (--max_beams)")
        outputs = await run(request, "translation", texts, (num_beams, max_new_tokens))
        return ["" if text is None else text.replace("\n", " ") for text in outputs]

    class TranslateRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")
        sentences: list[str] = Field(min_length=1)
        num_beams: int = Field(1, ge=1)
        max_new_tokens: int | None = Field(None, ge=1, le=1024)
        api_key: str | None = None

    async def checked_body(request: Request, model):
        """The JSON body as `model` (a 422 naming the first bad field), its API key checked."""
        try:  # read here, not by FastAPI: the size limit then holds for bodies without a content-length too
            body = model.model_validate_json(await read_body(request))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "body"
            raise ServeError(422, f"{where}: {first['msg']}") from None
        check_api_key(body.api_key if body.api_key is not None else request.headers.get("x-api-key"))
        return body

    @app.post("/v1/translate")
    async def v1_translate(request: Request):
        body = await checked_body(request, TranslateRequest)
        return {"translations": await translate(request, body.sentences, body.num_beams, body.max_new_tokens)}

    async def libretranslate_fields(request: Request) -> dict:
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        body = await read_body(request)
        if content_type == "application/json":
            try:
                fields = json.loads(body)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ServeError(400, f"malformed JSON body ({exc})") from None
            if not isinstance(fields, dict):
                raise ServeError(400, "the JSON body must be an object")
            return fields
        if content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
            async def replay():  # the body, read once under the size limit, given to the form parser
                return {"type": "http.request", "body": body, "more_body": False}

            form = await Request(request.scope, replay).form()
            return {key: (form.getlist(key) if key == "q" and len(form.getlist(key)) > 1 else form[key])
                    for key in form.keys()}
        raise ServeError(415, f"unsupported content type {content_type or '(none)'!r}: send JSON or a form")

    @app.post("/translate")
    async def libretranslate(request: Request):
        fields = await libretranslate_fields(request)
        check_api_key(fields.get("api_key"))
        q, source, target = fields.get("q"), fields.get("source"), fields.get("target")
        for name, value in (("q", q), ("source", source), ("target", target)):
            if value is None:
                raise ServeError(400, f"Invalid request: missing {name} parameter")
        if not isinstance(q, (str, list)) or (isinstance(q, list) and not all(isinstance(s, str) for s in q)):
            raise ServeError(400, "Invalid request: q must be a string or a list of strings")
        if fields.get("format", "text") != "text":
            raise ServeError(400, f"format {fields.get('format')!r} is not supported: only text")
        if source not in (settings.source_lang, "auto") or target != settings.target_lang:
            raise ServeError(400, f"{source} -> {target} is not available: this server translates "
                                  f"{settings.source_lang} -> {settings.target_lang}")
        texts = [q] if isinstance(q, str) else q
        outputs = await translate(request, texts, 1, None)
        return {"translatedText": outputs[0] if isinstance(q, str) else outputs}

    class NerRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")
        sentences: list[str] = Field(min_length=1)
        api_key: str | None = None

    @app.post("/v1/ner")
    async def v1_ner(request: Request):
        body = await checked_body(request, NerRequest)
        # the texts as sent (entity offsets point into them); the empty ones have no entities
        found = await run(request, "ner", body.sentences, (None, None), strip=False)
        return {"entities": [[] if entities is None else entities for entities in found]}

    @app.get("/languages")
    async def languages():
        return [{"code": code, "name": LANGUAGE_NAMES.get(code, code),
                 "targets": [settings.target_lang] if code == settings.source_lang else []}
                for code in (settings.source_lang, settings.target_lang)]

    @app.get("/health")
    async def health():
        for served in engines.values():
            if served.error is not None:
                return JSONResponse({"status": "failed", "error": str(served.error)}, status_code=503)
        if not all(served.ready.is_set() for served in engines.values()):
            return JSONResponse({"status": "loading"}, status_code=503, headers={"Retry-After": "2"})
        names = {"translation": "model", "ner": "ner_model"}
        return {"status": "ready", **{names[kind]: os.path.basename(os.path.normpath(served.model_dir))
                                      for kind, served in engines.items()}}

    @app.get("/metrics")
    async def prometheus():
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4")

    return app


# ---------------------------------------------------------------------------------------------------- command line


def parse_args(argv=None) -> argparse.Namespace:
    from .cli import positive_int

    parser = argparse.ArgumentParser(prog="vanilla-transformer serve", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", help="Saved translation model, a directory exported by export-ctranslate2, or a "
                                          "saved tagger (then only /v1/ner is served).")
    parser.add_argument("--ner", default=None, metavar="TAGGER_DIR",
                        help="A saved tagger to serve at /v1/ner beside the translation model.")
    parser.add_argument("--engine", default="auto", choices=["auto", "pytorch", "ctranslate2"],
                        help="auto: CTranslate2 for an exported directory, PyTorch otherwise.")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--compute_type", default="default", help="CTranslate2 only (int8, float16, ...).")
    parser.add_argument("--threads", type=int, default=0,
                        help="CPU threads of the engine, shared by its --workers (default 0: all cores).")
    parser.add_argument("--workers", type=int, default=0,
                        help="Engine batches run at once, each on threads / workers threads (CTranslate2). Default 0: "
                             "on a CPU one one-thread batch per thread (docs/serving.md), else 1.")
    parser.add_argument("--host", default="127.0.0.1", help="Address to listen on (default: loopback only).")
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--api_key", default=os.environ.get("VT_API_KEY"),
                        help="Every translate call must carry this key (default: $VT_API_KEY; none: no key needed).")
    parser.add_argument("--source_lang", default=None, help="Default: the model card's first language, else 'src'.")
    parser.add_argument("--target_lang", default=None, help="Default: the model card's last language, else 'tgt'.")
    parser.add_argument("--max_batch_tokens", type=positive_int, default=4096,
                        help="Source tokens per engine batch (sentences of concurrent requests together).")
    parser.add_argument("--max_wait_ms", type=float, default=0.0,
                        help="How long a batch waits for more sentences after its first (default 0: it starts as "
                             "soon as the engine is free; what arrives meanwhile forms the next batch).")
    parser.add_argument("--max_queue", type=positive_int, default=1024,
                        help="Sentences waiting at most; more is answered 503 with Retry-After.")
    parser.add_argument("--max_sentences", type=positive_int, default=128, help="Sentences per request at most.")
    parser.add_argument("--max_sentence_tokens", type=positive_int, default=256, help="Tokens per sentence at most.")
    parser.add_argument("--max_beams", type=positive_int, default=8, help="num_beams at most.")
    parser.add_argument("--max_request_bytes", type=positive_int, default=1 << 20, help="Request body size at most.")
    parser.add_argument("--request_timeout", type=float, default=60.0, help="Seconds a request may wait (504 after).")
    parser.add_argument("--access_log", action="store_true",
                        help="Log a line for every request (default: off; /metrics counts them).")
    parser.add_argument("--cors_origins", nargs="*", default=[],
                        help="Origins a browser page may call from (default: none, CORS off).")
    args = parser.parse_args(argv)
    if args.max_wait_ms < 0 or args.request_timeout <= 0 or args.workers < 0 or args.threads < 0:
        parser.error("--max_wait_ms, --workers and --threads must be >= 0 and --request_timeout > 0")
    return args


def default_workers(pytorch: bool, device: str, threads: int) -> int:
    """`--workers 0`: CTranslate2 on a CPU runs one one-thread batch per thread (as `translate` does; two one-thread
    batches outran one two-thread batch at 8 to 128 clients: docs/serving.md); PyTorch and GPUs one batch at a time."""
    import torch

    from .translate import resolve_device

    if pytorch or resolve_device(device, "ctranslate2") != "cpu":
        return 1
    return threads or torch.get_num_threads()


def main(argv=None) -> int:
    try:
        import uvicorn
    except ImportError:
        raise ImportError("serve needs FastAPI and uvicorn: pip install 'vanilla-transformer[serve]'") from None
    from .tag import TAGGER, is_tagger_dir
    from .tokenization import check_translation_model_dir
    from .translate import resolve_engine

    args = parse_args(argv)
    if args.ner is not None and not is_tagger_dir(args.ner):
        raise ValueError(f"--ner {args.ner!r} is not a saved tagger ({TAGGER}: a config.json naming it).")
    if is_tagger_dir(args.model_dir):  # a tagger alone: /v1/ner only
        if args.ner is not None:
            raise ValueError("MODEL_DIR is a tagger already: give a translation model as MODEL_DIR with --ner.")
        return listen(args, None, TaggerEngine(args.model_dir, args.device), Settings(**limits(args)))
    check_translation_model_dir(args.model_dir)  # a wrong path is an error now, not a failed /health later
    pytorch = resolve_engine(args.model_dir, args.engine) == "pytorch"
    if args.workers > 1 and pytorch:
        raise ValueError("--workers: several batches at once need the CTranslate2 engine (an exported directory, or "
                         "--engine ctranslate2); the PyTorch engine runs one.")
    workers = args.workers or default_workers(pytorch, args.device, args.threads)
    source, target = model_languages(args.model_dir) or ("src", "tgt")
    settings = Settings(source_lang=args.source_lang or source, target_lang=args.target_lang or target,
                        **limits(args))
    engine = Engine(args.model_dir, args.engine, args.device, args.compute_type, args.threads, workers)
    ner = TaggerEngine(args.ner, args.device) if args.ner else None
    return listen(args, engine, ner, settings)


def limits(args) -> dict:
    """The Settings fields every server takes from the command line."""
    return dict(api_key=args.api_key or None, max_request_bytes=args.max_request_bytes,
                max_sentences=args.max_sentences, max_sentence_tokens=args.max_sentence_tokens,
                max_batch_tokens=args.max_batch_tokens, max_wait_ms=args.max_wait_ms, max_queue=args.max_queue,
                max_beams=args.max_beams, request_timeout=args.request_timeout, cors_origins=tuple(args.cors_origins))


def listen(args, engine: Engine | None, ner: TaggerEngine | None, settings: Settings) -> int:
    """Load the models, then serve them until SIGTERM / Ctrl-C."""
    import uvicorn

    from .loading import no_progress_bars

    no_progress_bars()

    for served in (engine, ner):
        if served is None:
            continue
        try:
            served.open()  # before listening: a model that cannot load is an error line, not a server answering 503
        except (OSError, ValueError) as error:
            raise OSError(f"could not load the model in {served.model_dir}: {error}") from error
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    served = [f"{engine.model_dir} ({settings.source_lang} -> {settings.target_lang}, {engine.workers} engine "
              "batch(es) at once)"] if engine else []
    served += [f"the tagger {ner.model_dir} at /v1/ner"] if ner else []
    logger.info("serving %s on http://%s:%d%s", " and ".join(served), args.host, args.port,
                " with an API key" if settings.api_key else "")
    uvicorn.run(create_app(engine, settings, ner), host=args.host, port=args.port, log_level="info",
                access_log=args.access_log, timeout_graceful_shutdown=settings.request_timeout)
    return 0
