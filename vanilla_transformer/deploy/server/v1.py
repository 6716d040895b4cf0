"""Our own routes: `/v1/translate`, `/v1/ner` (typed JSON bodies, a 422 naming the first bad field), `/v1/health`
(each model's readiness) and `/metrics` (Prometheus)."""

import hmac
from typing import Annotated

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import openapi
from .dispatch import (
    check_access,
    model_state,
    off_loop,
    read_body,
    skipping_blanks,
    submit,
    tagger_of,
    translate,
    within_deadline,
)
from .errors import ServeError
from .prometheus import CONTENT_TYPE
from .state import server

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


async def checked_body(request: Request, model):
    """The JSON body as `model` (a 422 naming the first bad field), the caller's access checked. JSON's own types,
    strictly: `true` is not the number 1, nor `"4"` a number of beams (4.0 is 4, as JSON Schema's integers go). A
    large body is parsed off the event loop."""
    data = await read_body(request)  # read here, not by FastAPI: the size limit then holds without a content-length too
    try:
        body = await off_loop(len(data), lambda: model.model_validate_json(data, strict=True))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise ServeError(422, f"{where}: {first['msg']}") from None
    await check_access(request, body.api_key)
    return body


def default_pair(request: Request, source: str | None, target: str | None) -> tuple[str, str]:
    """The pair asked for; a server with one pair takes it for what is not given."""
    pairs = list(server(request).pairs.direct)
    if not pairs:
        raise ServeError(404, "this server has no translation model (serve TRANSLATION_DIR)")
    if source is None or target is None:
        if len(pairs) > 1:
            raise ServeError(422, f"source and target: this server translates {len(pairs)} pairs "
                                  f"({', '.join('-'.join(pair) for pair in pairs)}); name one")
        source, target = source or pairs[0][0], target or pairs[0][1]
    return source, target


@router.post("/v1/translate", **openapi.sentences_route(TranslateRequest))
async def v1_translate(request: Request):
    """`{"sentences": [...], "source", "target", "num_beams", "num_return_sequences", "max_new_tokens"}` ->
    `{"translations": [...]}` (with `num_return_sequences` > 1, each sentence's list of its best ones)."""
    return await within_deadline(request, v1_translate_answer(request))


async def v1_translate_answer(request: Request) -> dict:
    body = await checked_body(request, TranslateRequest)
    source, target = default_pair(request, body.source, body.target)
    n = body.num_return_sequences
    outputs = await skipping_blanks(  # blank sentences are not sent
        body.sentences, lambda chosen: translate(request, source, target, [text.strip() for text in chosen], n,
                                                 body.num_beams, body.max_new_tokens), [""] * n)
    return {"translations": [hypotheses[0] for hypotheses in outputs] if n == 1 else outputs}


@router.post("/v1/ner", **openapi.entities_route(NerRequest))
async def v1_ner(request: Request):
    """`{"sentences": [...]}` -> `{"entities": [[...], ...]}`, each text's entities as `vanilla-transformer tag`
    writes them."""
    return await within_deadline(request, ner_answer(request))


async def ner_answer(request: Request) -> dict:
    body = await checked_body(request, NerRequest)
    engine = tagger_of(request)
    # the texts as sent (entity offsets point into them); the blank ones have no entities
    entities = await skipping_blanks(body.sentences, lambda chosen: submit(request, engine, chosen, ()), [])
    return {"entities": entities}


@router.get("/v1/health", **openapi.V1_HEALTH)
async def v1_health(request: Request):
    """200 once every model has loaded, 503 before (or where one failed), with each model's state."""
    models = {}
    for name, served in server(request).engines.items():
        state = model_state(served)
        models[name] = {"model_dir": served.model_dir, "status": state,
                        **({"error": str(served.error)} if served.error is not None else {})}
    states = {model["status"] for model in models.values()}
    status = "failed" if "failed" in states else "loading" if "loading" in states else "ready"
    return JSONResponse({"status": status, "models": models}, status_code=200 if status == "ready" else 503,
                        headers={"Retry-After": "2"} if status == "loading" else None)


@router.get("/metrics", **openapi.METRICS)
async def prometheus(request: Request):
    """Prometheus' text format, with `--metrics` (else 404); with `--metrics-auth-token`, for the requests that carry
    it as `Authorization: Bearer TOKEN` (else 401)."""
    settings = server(request).settings
    if not settings.metrics:
        raise ServeError(404, "Not Found (the server runs without --metrics)")
    if settings.metrics_auth_token:
        given = request.headers.get("authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {settings.metrics_auth_token}".encode()):
            raise ServeError(401, "Unauthorized")
    return Response(server(request).metrics.render(), media_type=CONTENT_TYPE)
