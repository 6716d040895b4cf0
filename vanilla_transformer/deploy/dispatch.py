"""From a request's sentences to the engines' outputs, shared by both APIs: the server's limits, the engine's batcher,
the request timeout, and a translation's route (one model, or two through a pivot language)."""

import asyncio

from fastapi import Request

from .batcher import ServeError
from .state import server


def body_too_large(limit: int) -> ServeError:
    return ServeError(413, f"request body over {limit} bytes (--max_request_bytes)")


async def read_body(request: Request) -> bytes:
    """The body, read under the size limit also when no content-length announced it (chunked)."""
    limit, body = server(request).settings.max_request_bytes, b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise body_too_large(limit)
    return body


def client_address(request: Request) -> str:
    """The caller's address: the first of X-Forwarded-For with `--trust-forwarded-for` (a proxy in front names the
    client it serves), else the connection's."""
    if server(request).settings.trust_forwarded_for:
        forwarded = request.headers.get("x-forwarded-for", "").split(",")[0].strip()
        if forwarded:
            return forwarded[:100]
    return request.client.host if request.client else "unknown"


async def check_access(request: Request, given) -> None:
    """The API key from the body (`given`) or the X-API-Key header where the server has keys, and the request
    limits (`access.Access`)."""
    given = given if given is not None else request.headers.get("x-api-key")
    await server(request).access.check(given, client_address(request))


def model_state(served) -> str:
    """A served engine's state: "failed" (its `error`), "ready", or "loading"."""
    return "failed" if served.error is not None else "ready" if served.ready.is_set() else "loading"


def engine_of(request: Request, name: str):
    """The served engine `name`, ready; 503 while it loads or where it failed to."""
    served = server(request).engines[name]
    state = model_state(served)
    if state == "failed":
        raise ServeError(503, f"the model could not be loaded: {served.error}")
    if state == "loading":
        raise ServeError(503, "the model is still loading", {"Retry-After": "2"})
    return served


async def skipping_blanks(texts: list[str], run, blank) -> list:
    """`await run(the texts that are not blank)`, each blank text's answer `blank` instead: the answers in order."""
    todo = [i for i, text in enumerate(texts) if text.strip()]
    answers = [blank] * len(texts)
    for i, answer in zip(todo, await run([texts[i] for i in todo])):
        answers[i] = answer
    return answers


def tagger_of(request: Request):
    if "ner" not in server(request).engines:
        raise ServeError(404, "this server has no tagger (serve ... --ner TAGGER_DIR)")
    return engine_of(request, "ner")


async def submit(request: Request, engine, texts: list[str], options: tuple) -> list:
    """`texts` (none empty) through `engine`'s batcher under the limits: each one's output, in order."""
    settings = server(request).settings
    if len(texts) > settings.max_sentences:
        raise ServeError(413, f"{len(texts)} sentences in one request; at most {settings.max_sentences} "
                              "(--max_sentences)")
    if not texts:
        return []
    tokens = engine.count_tokens(texts)
    for i, n in enumerate(tokens):
        if n > settings.max_sentence_tokens:
            raise ServeError(400, f"sentence {i} has {n} tokens; at most {settings.max_sentence_tokens} "
                                  "(--max_sentence_tokens)")
    try:
        return await asyncio.wait_for(server(request).batchers[engine.name].submit(texts, tokens, options),
                                      settings.request_timeout)
    except TimeoutError:
        raise ServeError(504, f"no answer within {settings.request_timeout:g} s (--request_timeout)") from None


async def translate(request: Request, source: str, target: str, texts: list[str], n: int = 1,
                    num_beams: int | None = None, max_new_tokens: int | None = None) -> list[list[str]]:
    """The `n` best translations of each text (none empty), best first, from `source` into `target`: through the
    pair's model, or through a pivot language (the first model's best translation is the second one's input).
    `num_beams` None: each model's own (its generation config), at least `n`."""
    limit, asked = server(request).settings.max_beams, max(num_beams or 1, n)
    if asked > limit:
        raise ServeError(400, f"num_beams {asked} is over the limit of {limit} (--max_beams)")
    route = server(request).pairs.checked_route(source, target)
    engines = [engine_of(request, engine.name) for engine in route]  # every leg ready before the first runs
    for engine in engines[:-1]:
        done = await submit(request, engine, texts, (num_beams, max_new_tokens, 1))
        texts = [best.replace("\n", " ") for best, *_ in done]
    async def last(chosen):  # (a pivot's empty translation stays empty)
        done = await submit(request, engines[-1], [text.strip() for text in chosen], (num_beams, max_new_tokens, n))
        return [[hypothesis.replace("\n", " ") for hypothesis in hypotheses] for hypotheses in done]

    return await skipping_blanks(texts, last, [""])
