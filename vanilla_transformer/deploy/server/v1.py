"""Our own routes: `/v1/translate`, `/v1/ner` (typed JSON bodies, a 422 naming the first bad field), `/v1/health`
(each model's readiness) and `/metrics` (Prometheus)."""

import hmac
from typing import Annotated

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..engines import Options
from . import openapi
from .dispatch import check_access, off_loop, read_body, readiness, submit, tagger_of, translate, within_deadline
from .errors import ServeError
from .prometheus import CONTENT_TYPE
from .state import Server, ServerState

router = APIRouter()


class TranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sentences: list[str] = Field(min_length=1)
    source: str | None = None
    target: str | None = None
    num_beams: Annotated[int, Field(ge=1), openapi.WHOLE] | None = None  # (WHOLE: 4.0 is JSON Schema's integer 4)
    num_return_sequences: Annotated[int, Field(ge=1, le=1024), openapi.WHOLE] = 1  # (<= --max_beams: a bound first)
    max_new_tokens: Annotated[int, Field(ge=1, le=1024), openapi.WHOLE] | None = None
    api_key: str | None = None


class NerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sentences: list[str] = Field(min_length=1)
    api_key: str | None = None


async def checked_body(server: ServerState, request: Request, model):
    """The JSON body as `model` (a 422 naming the first bad field), the caller's access checked. JSON's own types,
    strictly: `true` is not the number 1, nor `"4"` a number of beams (4.0 is 4, as JSON Schema's integers go). A
    large body is parsed off the event loop."""
    # read here, not by FastAPI: the size limit then holds without a content-length too
    data = await read_body(server, request)
    try:
        body = await off_loop(len(data), lambda: model.model_validate_json(data, strict=True))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise ServeError(422, f"{where}: {first['msg']}") from None
    await check_access(server, request, body.api_key)
    return body


def default_pair(server: ServerState, source: str | None, target: str | None) -> tuple[str, str]:
    """The pair asked for; a server with one pair takes it for what is not given."""
    pairs = list(server.pairs.direct)
    if not pairs:
        raise ServeError(404, "this server has no translation model (serve TRANSLATION_DIR)")
    if source is None or target is None:
        if len(pairs) > 1:
            raise ServeError(
                422,
                f"source and target: this server translates {len(pairs)} pairs "
                f"({', '.join('-'.join(pair) for pair in pairs)}); name one",
            )
        source, target = source or pairs[0][0], target or pairs[0][1]
    return source, target


@router.post("/v1/translate", **openapi.sentences_route(TranslateRequest))
async def v1_translate(server: Server, request: Request):
    """`{"sentences": [...], "source", "target", "num_beams", "num_return_sequences", "max_new_tokens"}` ->
    `{"translations": [...]}` (with `num_return_sequences` > 1, each sentence's list of its best ones)."""
    return await within_deadline(server, v1_translate_answer(server, request))


async def v1_translate_answer(server: ServerState, request: Request) -> dict:
    body = await checked_body(server, request, TranslateRequest)
    source, target = default_pair(server, body.source, body.target)
    n = body.num_return_sequences
    outputs = await translate(server, source, target, body.sentences, n, body.num_beams, body.max_new_tokens)
    return {"translations": [hypotheses[0] for hypotheses in outputs] if n == 1 else outputs}


@router.post("/v1/ner", **openapi.entities_route(NerRequest))
async def v1_ner(server: Server, request: Request):
    """`{"sentences": [...]}` -> `{"entities": [[...], ...]}`, each text's entities as `vanilla-transformer tag`
    writes them."""
    return await within_deadline(server, ner_answer(server, request))


async def ner_answer(server: ServerState, request: Request) -> dict:
    body = await checked_body(server, request, NerRequest)
    engine = tagger_of(server)
    # the texts as sent (entity offsets point into them); the blank ones have no entities
    return {"entities": await submit(server, engine, body.sentences, Options(), [])}


@router.get("/v1/health", **openapi.V1_HEALTH)
async def v1_health(server: Server):
    """200 once every model has loaded, 503 before (or where one failed), with each model's state (`readiness`)."""
    status, states = readiness(server)
    models = {
        name: {
            "model_dir": served.model_dir,
            "status": states[name],
            **({"error": str(served.error)} if served.error is not None else {}),
        }
        for name, served in server.engines.items()
    }
    return JSONResponse(
        {"status": status, "models": models},
        status_code=200 if status == "ready" else 503,
        headers={"Retry-After": "2"} if status == "loading" else None,
    )


@router.get("/metrics", **openapi.METRICS)
async def prometheus(server: Server, request: Request):
    """Prometheus' text format, with `--metrics` (else 404); with `--metrics-auth-token`, for the requests that carry
    it as `Authorization: Bearer TOKEN` (else 401)."""
    settings = server.settings
    if not settings.metrics:
        raise ServeError(404, "Not Found (the server runs without --metrics)")
    if settings.metrics_auth_token:
        given = request.headers.get("authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {settings.metrics_auth_token}".encode()):
            raise ServeError(401, "Unauthorized")
    return Response(server.metrics.render(), media_type=CONTENT_TYPE)
