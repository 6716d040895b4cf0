"""The HTTP application of `serve` (its endpoints: `vanilla-transformer serve --help`): translation models (one per
language pair) and/or a tagger behind FastAPI, each with its dynamic batcher. The routes (`libretranslate`, `v1`) are
module-level functions over the server's state (`state.ServerState`), which `create_app` builds and stores once and
each route takes as its parameter `server: state.Server`; the lifespan (`lifespan_of`) is given it."""

import asyncio
import logging
import signal
import threading
import time
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException

from ... import __version__
from ..engines import ServedEngine, ServedTranslator
from . import libretranslate, openapi, v1
from .access import Access
from .batcher import DynamicBatcher
from .dispatch import body_too_large
from .downloads import TranslatedFiles
from .errors import ServeError
from .languages import Detector, Pairs
from .prometheus import Metrics
from .settings import Settings
from .state import ServerState

logger = logging.getLogger(__name__)


class LimitsAndMetrics:
    """ASGI middleware: a body whose announced length is over the limit is answered 413 unread; every response is
    counted and timed for /metrics, by route (`label`: a path of no route counts as "other", so paths a client makes
    up do not grow the metrics). Plain ASGI rather than `@app.middleware("http")`, which runs each request through an
    extra task and a response stream."""

    def __init__(self, app, max_request_bytes: int, metrics: Metrics, label):
        self.app, self.max_request_bytes, self.metrics, self.label = app, max_request_bytes, metrics, label

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
            self.metrics.request(self.label(scope["path"]), status, time.perf_counter() - start)


def host_name(host: str) -> str:
    """A Host header's host without its port, in lower case (an IPv6 address in its brackets)."""
    host = host.strip().lower()
    return host.partition("]")[0] + "]" if host.startswith("[") else host.partition(":")[0]


class HostAndOrigin:
    """ASGI middleware, before any work: a Host header naming no host of `Settings.allowed_hosts` (where it names any)
    is answered 400 (DNS rebinding: a page of another site, its name pointed at this server's address); a request
    other than GET, HEAD or OPTIONS whose Origin is neither the server's own (the Host header's host and port, http or
    https) nor one --cors / --cors_origins allows is answered 403 (a page of another origin posting a form, which
    needs no CORS preflight); LibreTranslate's clients send no Origin. With `--trust-forwarded-for`, the scheme of
    the URLs the app writes is the last hop of X-Forwarded-Proto (http or https only: a TLS proxy in front)."""

    def __init__(self, app, settings: Settings):
        self.app, self.hosts, self.trust = app, settings.allowed_hosts, settings.trust_forwarded_for
        self.origins = {origin.lower() for origin in settings.cors_origins}

    def refusal(self, scope) -> tuple[int, str] | None:
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if self.hosts and host_name(host) not in self.hosts:
            return 400, "the Host header names no host this server answers to (--allowed-hosts)"
        origin = headers.get("origin")
        if origin is None or scope["method"] in ("GET", "HEAD", "OPTIONS") or "*" in self.origins:
            return None
        scheme, sep, authority = origin.strip().lower().partition("://")
        if origin.strip().lower() in self.origins or (
            sep and scheme in ("http", "https") and authority == host.strip().lower()
        ):
            return None
        return 403, "a page of another origin may not call this server (allow its origin with --cors_origins)"

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        refusal = self.refusal(scope)
        if refusal is not None:
            return await error_response(*refusal)(scope, receive, send)
        proto = Headers(scope=scope).getlist("x-forwarded-proto")  # (several headers: the last one's last hop)
        hop = proto[-1].rpartition(",")[2].strip().lower() if self.trust and proto else None
        await self.app({**scope, "scheme": hop} if hop in ("http", "https") else scope, receive, send)


def error_response(status: int, message: str, headers: dict | None = None) -> JSONResponse:
    """`{"error": message}`; what of a client's text the message quotes that UTF-8 cannot encode (a lone surrogate)
    written as its escape, so that every error can be answered."""
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def serve_error(request: Request, exc: ServeError):
    return error_response(exc.status, exc.message, exc.headers)


async def routing_error(request: Request, exc: StarletteHTTPException):  # an unknown route (404), a wrong method (405)
    return error_response(exc.status_code, str(exc.detail), getattr(exc, "headers", None))


async def unexpected(request: Request, exc: Exception):  # a bug: logged with its trace, answered without it
    logger.exception("unexpected error on %s", request.url.path)
    return error_response(500, f"internal error ({type(exc).__name__})")


def key_reloader(state: ServerState):
    """SIGHUP re-reads `--api-keys FILE` (`Access.reload_keys`, in a worker thread: the server goes on answering);
    without a key file it is one log line. Either way the server goes on: uvicorn itself handles SIGINT and SIGTERM
    only, and SIGHUP's default (`systemctl reload`'s signal) would end it. Where the platform has SIGHUP and the app
    runs in the main thread, as `serve` runs it; what undoes it, or None."""
    hangup, path = getattr(signal, "SIGHUP", None), state.settings.api_keys_file
    if hangup is None:
        return None
    loop, running = asyncio.get_running_loop(), set()

    def reload():
        if not path:
            logger.warning("SIGHUP: no key file (--api-keys) to read again; nothing changed")
            return
        task = loop.create_task(asyncio.to_thread(state.access.reload_keys, path, state.settings.fixed_api_key))
        running.add(task)  # (held until done: the loop keeps only a weak reference to a task)
        task.add_done_callback(running.discard)

    try:
        loop.add_signal_handler(hangup, reload)
    except (RuntimeError, ValueError, NotImplementedError):  # not the main thread (a test client), or no signals
        return None
    return lambda: loop.remove_signal_handler(hangup)


def lifespan_of(state: ServerState):
    """The app's lifespan over `state`: one batcher per model while the app runs; an engine not yet loaded loads in a
    background thread; SIGHUP re-reads the key file (`key_reloader`)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        for name, served in state.engines.items():
            batcher = DynamicBatcher(
                served.process,
                state.settings.max_batch_tokens,
                state.settings.max_wait_ms / 1000,
                state.settings.max_queue,
                state.metrics,
                served.workers,
            )
            batcher.start()
            state.batchers[name] = batcher
            if not served.ready.is_set():  # (the command loads before it listens)
                threading.Thread(target=served.load, name=f"vt-load-{name}", daemon=True).start()
        state.detector.start()  # lingua's models loaded before the first request, not on it
        state.access.open()
        undo_reloader = key_reloader(state)
        yield
        if undo_reloader is not None:
            undo_reloader()
        for batcher in state.batchers.values():
            await batcher.stop()
        await state.access.close()

    return lifespan


def shared_state(translators: list[ServedTranslator], settings: Settings, tagger: ServedEngine | None) -> ServerState:
    """What the routes share (`state.ServerState`), batchers not yet started."""
    pairs, batchers = Pairs(translators), {}
    limits = {"minute": settings.req_limit, "hour": settings.hourly_req_limit, "day": settings.daily_req_limit}
    return ServerState(
        settings=settings,
        pairs=pairs,
        batchers=batchers,
        engines={engine.name: engine for engine in [*translators, *([tagger] if tagger else [])]},
        detector=Detector(pairs.sources(), pairs.languages()),
        access=Access(settings.api_keys, limits, settings.req_flood_threshold, settings.req_limit_storage),
        files=TranslatedFiles(settings.file_ttl, settings.max_file_store_bytes),
        metrics=Metrics(queue_length=lambda: sum(b.waiting() for b in batchers.values())),
    )


def create_app(translators: list[ServedTranslator], settings: Settings, tagger: ServedEngine | None = None) -> FastAPI:
    """The FastAPI application for `translators` (`engines.TranslationEngine`s, one per language pair) and/or a
    `tagger` (`engines.TaggerEngine`)."""
    if not translators and tagger is None:
        raise ValueError("serve needs a translation model, a tagger, or both.")
    state = shared_state(translators, settings, tagger)
    app = FastAPI(
        title="vanilla-transformer",
        version=__version__,
        lifespan=lifespan_of(state),
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )  # (the document is `/spec`, its page `/docs`: under the url prefix)
    app.state.server = state  # (read by the routes' dependency alone: `state.server_state`)
    if settings.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["*"],
        )
    app.add_exception_handler(ServeError, serve_error)
    app.add_exception_handler(StarletteHTTPException, routing_error)
    app.add_exception_handler(Exception, unexpected)
    prefix = settings.url_prefix
    app.include_router(libretranslate.router, prefix=prefix)
    app.include_router(v1.router, prefix=prefix)
    openapi.add_docs(app, prefix)  # (LibreTranslate shows it with --disable-web-ui too)
    if prefix:  # LibreTranslate's: the root sends a browser to the prefix
        app.add_api_route("/", lambda: RedirectResponse(prefix + "/", status_code=301), include_in_schema=False)
    app.add_middleware(HostAndOrigin, settings=settings)  # (inside LimitsAndMetrics: its refusals are counted too)
    app.add_middleware(
        LimitsAndMetrics,
        max_request_bytes=settings.max_request_bytes,
        metrics=state.metrics,
        label=route_label(
            {prefix + route.path for router in (libretranslate.router, v1.router) for route in router.routes}, prefix
        ),
    )
    return app


def route_label(paths: set[str], prefix: str = ""):
    """The metrics label of a request path: the route's own path ("/download_file/{filename}" for every download),
    "other" where no route matches."""

    def label(path: str) -> str:
        if path in paths:
            return path
        return prefix + "/download_file/{filename}" if path.startswith(prefix + "/download_file/") else "other"

    return label
