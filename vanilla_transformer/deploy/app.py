"""The HTTP application of `serve` (its endpoints: `vanilla-transformer serve --help`): a translation model and/or a
tagger behind FastAPI, with dynamic batching. The routes are module-level functions over the app's state
(`settings`, `engines`, `batchers`, `metrics`), set by `create_app`."""

import asyncio
import gc
import hmac
import json
import logging
import os
import threading
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..loading import own_tokenizer
from .batching import DynamicBatcher, ServeError
from .metrics import CONTENT_TYPE, Metrics

logger = logging.getLogger(__name__)

LANGUAGE_NAMES = {"de": "German", "en": "English", "fr": "French", "es": "Spanish", "it": "Italian", "cs": "Czech",
                  "ro": "Romanian", "ru": "Russian", "zh": "Chinese", "ja": "Japanese", "nl": "Dutch",
                  "pt": "Portuguese"}


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


# ---------------------------------------------------------------------------------------------------- the engines


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

    def start(self):
        """Load the model; returns its Rust tokenizer (`tokenizers.Tokenizer`)."""
        from .translate import make_translator

        self.translator = make_translator(self.model_dir, self.engine, self.device, compute_type=self.compute_type,
                                          threads=self.threads, workers=self.workers)
        return self.translator.backend

    def open(self) -> None:
        """Load the model; an error propagates (`serve` loads before it listens: a model that cannot load ends the
        command with one error line)."""
        self.counter = own_tokenizer(self.start())  # the request handlers' own copy
        # the libraries and the model are millions of long-lived objects: a full collection walked them all, a
        # 200+ ms pause of every request at a time (the load test's p99); frozen, a collection sees only new ones
        gc.collect()
        gc.freeze()
        self.ready.set()
        logger.info("%s %s loaded", type(self).__name__, self.model_dir)

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
    """A tagger (`deploy.tag.Tagger`, PyTorch or an ONNX export, one batch at a time): `tag(texts)` -> each text's
    entities, as `vanilla-transformer tag` writes them."""

    def __init__(self, model_dir: str, device: str = "auto"):
        super().__init__(model_dir, "auto", device)

    def start(self):
        from .tag import Tagger

        self.tagger = Tagger(self.model_dir, device=self.device)
        return self.tagger.pieces

    def tag(self, texts: list[str], *options) -> list[list[dict]]:
        from .tag import line_entities

        return line_entities(self.tagger, texts)


# ---------------------------------------------------------------------------------------------------- requests


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


async def read_body(request: Request) -> bytes:
    """The body, read under the size limit also when no content-length announced it (chunked)."""
    limit, body = request.app.state.settings.max_request_bytes, b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise body_too_large(limit)
    return body


def check_api_key(request: Request, given) -> None:
    """The key from the body (`given`) or the X-API-Key header, where the server has one."""
    expected = request.app.state.settings.api_key
    if expected is None:
        return
    given = given if given is not None else request.headers.get("x-api-key")
    if not isinstance(given, str) or not hmac.compare_digest(given.encode(), expected.encode()):
        raise ServeError(403, "Invalid API key")


def batcher_of(request: Request, kind: str) -> DynamicBatcher:
    """The batcher of the model serving `kind` ("translation" or "ner"); 404 without one, 503 while it loads."""
    served = request.app.state.engines.get(kind)
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
    settings, batcher = request.app.state.settings, batcher_of(request, kind)
    if len(texts) > settings.max_sentences:
        raise ServeError(413, f"{len(texts)} sentences in one request; at most {settings.max_sentences} "
                              "(--max_sentences)")
    todo = [i for i, text in enumerate(texts) if text.strip()]
    sent = [texts[i].strip() if strip else texts[i] for i in todo]
    tokens = request.app.state.engines[kind].count_tokens(sent) if todo else []
    for i, n in zip(todo, tokens):
        if n > settings.max_sentence_tokens:
            raise ServeError(400, f"sentence {i} has {n} tokens; at most {settings.max_sentence_tokens} "
                                  "(--max_sentence_tokens)")
    outputs = [None] * len(texts)  # empty sentences are not sent to the model
    try:
        done = await asyncio.wait_for(batcher.submit(sent, tokens, options), settings.request_timeout)
    except asyncio.TimeoutError:  # (not TimeoutError: on Python 3.10 asyncio raises its own class)
        raise ServeError(504, f"no answer within {settings.request_timeout:g} s (--request_timeout)") from None
    for i, output in zip(todo, done):
        outputs[i] = output
    return outputs


async def translate(request: Request, texts: list[str], num_beams: int, max_new_tokens: int | None) -> list[str]:
    limit = request.app.state.settings.max_beams
    if num_beams > limit:
        raise ServeError(400, f"num_beams {num_beams} is over the limit of {limit} (--max_beams)")
    outputs = await run(request, "translation", texts, (num_beams, max_new_tokens))
    return ["" if text is None else text.replace("\n", " ") for text in outputs]


class TranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sentences: list[str] = Field(min_length=1)
    num_beams: int = Field(1, ge=1)
    max_new_tokens: int | None = Field(None, ge=1, le=1024)
    api_key: str | None = None


class NerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sentences: list[str] = Field(min_length=1)
    api_key: str | None = None


async def checked_body(request: Request, model):
    """The JSON body as `model` (a 422 naming the first bad field), its API key checked."""
    try:  # read here, not by FastAPI: the size limit then holds for bodies without a content-length too
        body = model.model_validate_json(await read_body(request))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise ServeError(422, f"{where}: {first['msg']}") from None
    check_api_key(request, body.api_key)
    return body


async def libretranslate_fields(request: Request) -> dict:
    """LibreTranslate's fields from a JSON or form body; anything else is a 415."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = await read_body(request)
    if content_type == "application/json":
        try:
            fields = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ServeError(400, f"malformed JSON body ({exc})") from None
        except RecursionError:
            raise ServeError(400, "malformed JSON body (nested too deeply)") from None
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


def libretranslate_texts(fields: dict, settings: Settings) -> list[str]:
    """The texts of a LibreTranslate request, its fields checked as LibreTranslate checks them."""
    q, source, target = fields.get("q"), fields.get("source"), fields.get("target")
    for name, value in (("q", q), ("source", source), ("target", target)):
        if value is None:
            raise ServeError(400, f"Invalid request: missing {name} parameter")
    if not isinstance(q, (str, list)) or (isinstance(q, list) and not all(isinstance(s, str) for s in q)):
        raise ServeError(400, "Invalid request: q must be a string or a list of strings")
    for text in [q] if isinstance(q, str) else q:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:  # JSON's "\ud800": a string no tokenizer can read
            raise ServeError(400, f"Invalid request: q holds a lone surrogate (U+{ord(text[error.start]):04X}), "
                                  "which is not text") from None
    if fields.get("format", "text") != "text":
        raise ServeError(400, f"format {fields.get('format')!r} is not supported: only text")
    if source not in (settings.source_lang, "auto") or target != settings.target_lang:
        raise ServeError(400, f"{source} -> {target} is not available: this server translates "
                              f"{settings.source_lang} -> {settings.target_lang}")
    return [q] if isinstance(q, str) else q


# ---------------------------------------------------------------------------------------------------- the routes

router = APIRouter()


@router.post("/v1/translate")
async def v1_translate(request: Request):
    body = await checked_body(request, TranslateRequest)
    return {"translations": await translate(request, body.sentences, body.num_beams, body.max_new_tokens)}


@router.post("/translate")
async def libretranslate(request: Request):
    fields = await libretranslate_fields(request)
    check_api_key(request, fields.get("api_key"))
    texts = libretranslate_texts(fields, request.app.state.settings)
    outputs = await translate(request, texts, 1, None)
    return {"translatedText": outputs[0] if isinstance(fields["q"], str) else outputs}


@router.post("/v1/ner")
async def v1_ner(request: Request):
    body = await checked_body(request, NerRequest)
    # the texts as sent (entity offsets point into them); the empty ones have no entities
    found = await run(request, "ner", body.sentences, (None, None), strip=False)
    return {"entities": [[] if entities is None else entities for entities in found]}


@router.get("/languages")
async def languages(request: Request):
    settings = request.app.state.settings
    return [{"code": code, "name": LANGUAGE_NAMES.get(code, code),
             "targets": [settings.target_lang] if code == settings.source_lang else []}
            for code in (settings.source_lang, settings.target_lang)]


@router.get("/health")
async def health(request: Request):
    engines = request.app.state.engines
    for served in engines.values():
        if served.error is not None:
            return JSONResponse({"status": "failed", "error": str(served.error)}, status_code=503)
    if not all(served.ready.is_set() for served in engines.values()):
        return JSONResponse({"status": "loading"}, status_code=503, headers={"Retry-After": "2"})
    names = {"translation": "model", "ner": "ner_model"}
    return {"status": "ready", **{names[kind]: os.path.basename(os.path.normpath(served.model_dir))
                                  for kind, served in engines.items()}}


@router.get("/metrics")
async def prometheus(request: Request):
    return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE)


# ---------------------------------------------------------------------------------------------------- the app


def error_response(status: int, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def serve_error(request: Request, exc: ServeError):
    return error_response(exc.status, exc.message, exc.headers)


async def routing_error(request: Request, exc: StarletteHTTPException):  # an unknown route (404), a wrong method (405)
    return error_response(exc.status_code, str(exc.detail), getattr(exc, "headers", None))


async def unexpected(request: Request, exc: Exception):  # a bug: logged with its trace, answered without it
    logger.exception("unexpected error on %s", request.url.path)
    return error_response(500, f"internal error ({type(exc).__name__})")


@asynccontextmanager
async def lifespan(app: FastAPI):
    """One batcher per model while the app runs; an engine not yet loaded loads in a background thread."""
    state = app.state
    for kind, served in state.engines.items():
        batcher = DynamicBatcher(served.translate if kind == "translation" else served.tag,
                                 state.settings.max_batch_tokens, state.settings.max_wait_ms / 1000,
                                 state.settings.max_queue, state.metrics, served.workers)
        batcher.start()
        state.batchers[kind] = batcher
        if not served.ready.is_set():  # (the command loads before it listens)
            threading.Thread(target=served.load, name=f"vt-load-{kind}", daemon=True).start()
    yield
    for batcher in state.batchers.values():
        await batcher.stop()


def create_app(engine: Engine | None, settings: Settings, ner: TaggerEngine | None = None) -> FastAPI:
    """The FastAPI application for a translation `engine` and/or a tagger `ner`."""
    engines = {kind: e for kind, e in (("translation", engine), ("ner", ner)) if e is not None}
    if not engines:
        raise ValueError("serve needs a translation model, a tagger, or both.")
    app = FastAPI(title="vanilla-transformer", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    batchers: dict[str, DynamicBatcher] = {}
    app.state.settings, app.state.engines, app.state.batchers = settings, engines, batchers
    app.state.metrics = Metrics(queue_length=lambda: sum(b.waiting() for b in batchers.values()))
    if settings.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["*"])
    app.add_exception_handler(ServeError, serve_error)
    app.add_exception_handler(StarletteHTTPException, routing_error)
    app.add_exception_handler(Exception, unexpected)
    app.add_middleware(LimitsAndMetrics, max_request_bytes=settings.max_request_bytes, metrics=app.state.metrics)
    app.include_router(router)
    return app
