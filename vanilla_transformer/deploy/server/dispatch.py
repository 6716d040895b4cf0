"""From a request's sentences to the engines' outputs, shared by both APIs: the server's limits, the engine's batcher,
the request timeout, and a translation's route (one model, or two through a pivot language)."""

import functools
import ipaddress

import anyio
from fastapi import Request

from ..batches import nonblank_batches
from ..engines import Options, ServedEngine
from .errors import ServeError
from .state import ServerState

# Work on fewer characters (or bytes) than this runs on the event loop itself: a thread switch would cost more than
# the work (parsing, token counting, markup: well under a millisecond)
INLINE_SIZE = 1 << 14


def body_too_large(limit: int) -> ServeError:
    return ServeError(413, f"request body over {limit} bytes (--max_request_bytes)")


async def off_loop(size: int, work, *args):
    """`work(*args)`, CPU-bound work on a request's input of `size` characters or bytes (parsing a body, detecting a
    language, counting tokens, reading or rebuilding markup or a document): in a worker thread, so the event loop goes
    on answering other requests meanwhile (`/health` included); small work inline. The request's deadline
    (`within_deadline`) abandons a thread it no longer waits for."""
    if size < INLINE_SIZE:
        return work(*args)
    return await anyio.to_thread.run_sync(functools.partial(work, *args), abandon_on_cancel=True)


async def within_deadline(server: ServerState, answer):
    """`await answer` (a route's whole work: its body read and parsed, detection, every batch of a file, both models
    of a pivot), or a 504 once `--request_timeout` seconds have passed."""
    timeout = server.settings.request_timeout
    with anyio.move_on_after(timeout):
        return await answer
    raise ServeError(504, f"no answer within {timeout:g} s (--request_timeout)")


async def read_body(server: ServerState, request: Request) -> bytes:
    """The body, read under the size limit also when no content-length announced it (chunked)."""
    limit, body = server.settings.max_request_bytes, b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise body_too_large(limit)
    return body


def ip_address(text: str) -> str | None:
    """`text` as one canonical IP address (`2001:DB8::1` and `2001:db8::1` alike, an IPv4-mapped IPv6 address as its
    IPv4 one, a port (`1.2.3.4:80`, `[::1]:80`) and an IPv6 zone (`%eth0`) left out), or None where it is not one."""
    text = text.strip()
    if len(text) > 64:  # longer than any address written with a port: not one
        return None
    if text.startswith("["):  # [IPv6] or [IPv6]:PORT
        text, bracket, port = text[1:].partition("]")
        if not bracket or port and not (port[0] == ":" and port[1:].isascii() and port[1:].isdigit()):
            return None
    elif text.count(":") == 1:  # IPv4:PORT (an IPv6 address has two colons or more)
        text, _, port = text.partition(":")
        if not (port.isascii() and port.isdigit()):
            return None
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped or address)


def as_client(address: str) -> str:
    """A client's address as the request limits count it: an IPv6 address (`ip_address`'s form: an IPv4-mapped one is
    IPv4 already) as its /64, the network one subscriber is given (its 2**64 addresses are one client, not as many
    identities); any other as it is."""
    if ":" not in address:
        return address
    return str(ipaddress.IPv6Network((address.split("%", 1)[0], 64), strict=False))


def client_address(request: Request, trust_forwarded_for: bool) -> str:
    """Who the client is, for the request limits (an IPv6 one by its /64, `as_client`): the connection's address; with
    `--trust-forwarded-for` (a proxy in
    front), the hop that proxy added: the LAST address of X-Forwarded-For (nginx's `$proxy_add_x_forwarded_for` appends
    the address it was connected from). What the client wrote to the left of it is never believed, and no other
    header (X-Real-IP, Forwarded) is read; a last hop that is not an address (garbage, empty) counts as the
    connection's (the proxy's), never as a key the client chose. The HTTP server reads no proxy header itself
    (`serve` runs uvicorn with proxy_headers=False), so the connection's address is the peer's."""
    peer = request.client.host if request.client else "unknown"
    forwarded = request.headers.getlist("x-forwarded-for")
    if trust_forwarded_for and forwarded:
        hop = ip_address(forwarded[-1].rpartition(",")[2])  # several headers: the last one's last address
        if hop is not None:
            return as_client(hop)
    address = ip_address(peer)
    return as_client(address) if address else peer


async def check_access(server: ServerState, request: Request, given) -> None:
    """The API key from the body (`given`) or the X-API-Key header where the server has keys, and the request
    limits (`access.Access`)."""
    if given is not None and not isinstance(given, str):  # (a JSON number, a list, a form's file: never a key)
        raise ServeError(400, "Invalid request: api_key must be a string")
    given = given if given is not None else request.headers.get("x-api-key")
    await server.access.check(given, client_address(request, server.settings.trust_forwarded_for))


def model_state(served: ServedEngine) -> str:
    """A served engine's state: "failed" (its `error`), "ready", or "loading"."""
    return "failed" if served.error is not None else "ready" if served.ready.is_set() else "loading"


def readiness(server: ServerState) -> tuple[str, dict[str, str]]:
    """The server's state, what both APIs' health routes answer by: "failed" where a model could not load, else
    "loading" while one loads, else "ready"; and each model's (`model_state`), by name."""
    states = {name: model_state(served) for name, served in server.engines.items()}
    found = set(states.values())
    return ("failed" if "failed" in found else "loading" if "loading" in found else "ready"), states


def engine_of(server: ServerState, name: str) -> ServedEngine:
    """The served engine `name`, ready; 503 while it loads or where it failed to."""
    served = server.engines[name]
    state = model_state(served)
    if state == "failed":
        raise ServeError(503, f"the model could not be loaded: {served.error}")
    if state == "loading":
        raise ServeError(503, "the model is still loading", {"Retry-After": "2"})
    return served


def tagger_of(server: ServerState) -> ServedEngine:
    if "ner" not in server.engines:
        raise ServeError(404, "this server has no tagger (serve ... --ner TAGGER_DIR)")
    return engine_of(server, "ner")


async def submit(server: ServerState, engine: ServedEngine, texts: list[str], options: Options, blank) -> list:
    """Each text's output through `engine`'s batcher under the limits, in order; a blank text's is `blank`, the
    model never sees it (`batches.nonblank_batches`), nor counts it against the limits."""
    batches, scatter = nonblank_batches(texts, blank)
    return scatter([await submit_batch(server, engine, batch, options) for batch in batches])


async def submit_batch(server: ServerState, engine: ServedEngine, texts: list[str], options: Options) -> list:
    """`texts` (none blank) through `engine`'s batcher under the limits: each one's output, in order."""
    settings = server.settings
    if len(texts) > settings.max_sentences:
        raise ServeError(
            413, f"{len(texts)} sentences in one request; at most {settings.max_sentences} (--max_sentences)"
        )
    if not texts:
        return []
    tokens = await off_loop(sum(map(len, texts)), engine.count_tokens, texts)
    for i, n in enumerate(tokens):
        if n > settings.max_sentence_tokens:
            raise ServeError(
                400, f"sentence {i} has {n} tokens; at most {settings.max_sentence_tokens} (--max_sentence_tokens)"
            )
    # (no timeout of its own: the route's deadline, `within_deadline`, bounds the request as a whole)
    return await server.batchers[engine.name].submit(texts, tokens, options)


async def translate(
    server: ServerState,
    source: str,
    target: str,
    texts: list[str],
    n: int = 1,
    num_beams: int | None = None,
    max_new_tokens: int | None = None,
) -> list[list[str]]:
    """The `n` best translations of each text (its surrounding whitespace left out), best first, from `source` into
    `target`: through the pair's model, or through a pivot language (the first model's best translation is the
    second one's input). A blank text (or a pivot's empty translation) is `n` empty translations, sent to no model.
    `num_beams` None: each model's own (its generation config), at least `n`. `source` and `target` name served
    languages as LibreTranslate matches codes (`Pairs.served`); where they name the same one, each text comes back,
    `n` times, translated by no model (both APIs alike)."""
    limit, asked = server.settings.max_beams, max(num_beams or 1, n)
    if asked > limit:
        raise ServeError(400, f"num_beams {asked} is over the limit of {limit} (--max_beams)")
    source, target = server.pairs.served(source), server.pairs.served(target)  # (PT-br: the served pt-BR)
    if source == target:
        return [[text.strip()] * n for text in texts]
    route = server.pairs.checked_route(source, target)
    engines = [engine_of(server, engine.name) for engine in route]  # every leg ready before the first runs
    for leg, engine in enumerate(engines, 1):
        k = n if leg == len(engines) else 1  # (a pivot's first model: its best translation)
        done = await submit(
            server, engine, [text.strip() for text in texts], Options(num_beams, max_new_tokens, k), [""] * k
        )
        done = [[hypothesis.replace("\n", " ") for hypothesis in hypotheses] for hypotheses in done]
        texts = [best for best, *_ in done]
    return done
