"""The OpenAPI document of `serve` (`/spec`, shown by Swagger UI at `/docs` from the packaged assets of
`swagger-ui-bundle-v2`: no network): LibreTranslate's request bodies and answers as pydantic models, every status a
route can answer with LibreTranslate's error body (`ErrorResponse`), and the API key as a security scheme. The
routes read their bodies themselves (the size limit then holds for chunked bodies too), so a body is documented here
(`openapi_extra`), never declared as a parameter; an answer is documented (`responses=`), never filtered by a model.
Each route's decorator takes its keyword arguments from here (`@router.post("/translate", **openapi.TRANSLATE)`)."""

from typing import Annotated, Literal

from fastapi import FastAPI, Security
from fastapi.responses import HTMLResponse, Response
from fastapi.security import APIKeyHeader, HTTPBearer
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from .documents import DOCUMENTS
from .markup import TEXT_FORMATS
from .pdf import PDF
from .prometheus import CONTENT_TYPE

# ------------------------------------------------------------------------------------------------ request bodies


def whole(value):
    """An integer as JSON Schema's `"type": "integer"` reads one: 4 and 4.0 alike (a client's float that is whole);
    never true, "4" or 4.5 (a body validated strictly)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


WHOLE = BeforeValidator(whole)  # after the field's bounds in its `Annotated` (else pydantic documents them as "ge")

Text = Annotated[str, Field(min_length=1)]
Texts = Annotated[list[str], Field(min_length=1)]
# In a form, a list is the field repeated, and one value is a text: [""] is "" (missing), ["a"] is "a".
FormTexts = Text | Annotated[list[str], Field(min_length=2)] | Annotated[list[Text], Field(min_length=1, max_length=1)]
Digits = Annotated[str, Field(pattern=r"^\s*\+?[0-9]+\s*$")]  # (a form's number; JSON may send one too)
KEY = "API key (or the X-API-Key header), where the server has keys"
SOURCE = 'Source language code, or "auto" to detect it (`GET /languages`)'
FORMAT = "`text`: plain text; `html`: markup, only its text translated (empty: text)"
ALTERNATIVES = "How many alternative translations besides the best (at most --max_beams - 1)"


class Fields(BaseModel):
    """A LibreTranslate body: fields it does not know are ignored, as LibreTranslate ignores them. A JSON body's null
    is a field not given."""

    model_config = ConfigDict(extra="allow")


class TranslateForm(Fields):
    q: FormTexts = Field(description="Text(s) to translate: one, or the field repeated", examples=["Hallo Welt!"])
    source: Text = Field(description=SOURCE, examples=["de"])
    target: Text = Field(description="Target language code", examples=["en"])
    format: Literal[(*TEXT_FORMATS, "")] = Field("text", description=FORMAT)
    alternatives: Digits = Field("0", description=ALTERNATIVES)
    api_key: str = Field(None, description=KEY)


class TranslateBody(Fields):
    q: Text | Texts = Field(description="Text(s) to translate: one, or a list", examples=["Hallo Welt!"])
    source: Text = Field(description=SOURCE, examples=["de"])
    target: Text = Field(description="Target language code", examples=["en"])
    format: Literal[(*TEXT_FORMATS, "")] | None = Field("text", description=FORMAT)
    alternatives: Annotated[int, Field(ge=0)] | Digits | None = Field(0, description=ALTERNATIVES)
    api_key: str | None = Field(None, description=KEY)


class DetectForm(Fields):
    q: FormTexts = Field(
        description="Text to identify the language of (the field repeated: read as one text)", examples=["Hallo Welt!"]
    )
    api_key: str = Field(None, description=KEY)


class DetectBody(Fields):
    q: Text | Texts = Field(
        description="Text to identify the language of (a list: read as one text)", examples=["Hallo Welt!"]
    )
    api_key: str | None = Field(None, description=KEY)


class TranslateFileBody(Fields):
    file: bytes = Field(
        description=f"The file: .txt or .html in UTF-8, or a document ({', '.join([*DOCUMENTS, *PDF])})"
    )
    source: Text = Field(description=SOURCE, examples=["de"])
    target: Text = Field(description="Target language code", examples=["en"])
    api_key: str = Field(None, description=KEY)


class SuggestBody(Fields):
    q: str = Field(None, description="The original text")
    s: str = Field(None, description="The suggested translation")
    source: str = Field(None, description="Source language code")
    target: str = Field(None, description="Target language code")
    api_key: str = Field(None, description="API key")


FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")


def body(model: type[BaseModel], *media_types: str, form: type[BaseModel] | None = None, required: bool = True) -> dict:
    """`openapi_extra` documenting a body that the route reads itself: `model`'s schema under each media type (`form`'s
    under the form types, with it)."""
    content = {media: {"schema": model.model_json_schema()} for media in media_types}
    content.update({media: {"schema": form.model_json_schema()} for media in FORMS if form is not None})
    return {"requestBody": {"required": required, "content": content}}


def in_query(form: type[BaseModel], *left_out: str) -> dict:
    """`openapi_extra` documenting `form`'s fields as query parameters too: LibreTranslate reads the query string's
    fields as well as the body's (Flask's `request.values`); a field the body gives wins."""
    return {
        "parameters": [
            {
                "name": name,
                "in": "query",
                "required": False,
                "schema": {"type": "string"},
                "description": f"{field.description} (where the body does not give it)",
            }
            for name, field in form.model_fields.items()
            if name not in left_out
        ]
    }


def file_body() -> dict:
    """`/translate_file`'s multipart body, its file part with an example name (schemathesis sends it)."""
    documented = body(TranslateFileBody, "multipart/form-data")
    disposition = {"type": "string", "example": 'form-data; name="file"; filename="text.txt"'}
    documented["requestBody"]["content"]["multipart/form-data"]["encoding"] = {
        "file": {"headers": {"Content-Disposition": {"schema": disposition}}}
    }
    return documented


# ------------------------------------------------------------------------------------------------ answers

Absent = SkipJsonSchema[None]  # a field the answer may leave out (never null)


class ErrorResponse(BaseModel):
    """LibreTranslate's error body: every answer that is not a success."""

    error: str = Field(description="What was wrong, naming the field, limit or option")


class DetectedLanguage(BaseModel):
    language: str = Field(description="Language code", examples=["de"])
    confidence: float = Field(ge=0, le=100, description="Confidence, 0-100", examples=[93.5])


class TranslateAnswer(BaseModel):
    translatedText: str | list[str] = Field(description="The translation(s): a list where q was one")
    detectedLanguage: DetectedLanguage | list[DetectedLanguage] | Absent = Field(
        None, description='With source "auto": the language detected (of each text)'
    )
    alternatives: list[str] | list[list[str]] | Absent = Field(
        None, description="With alternatives > 0: the other translations (of each text), distinct, best first"
    )


class Language(BaseModel):
    code: str = Field(examples=["de"])
    name: str = Field(examples=["German"])
    targets: list[str] = Field(description="The languages it translates into (directly or through a pivot)")


class Health(BaseModel):
    status: Literal["ok"]


class LanguageRef(BaseModel):
    code: str | None = Field(description="Language code (null: the server has no translation model)")
    name: str


class FrontendLanguages(BaseModel):
    source: LanguageRef
    target: LanguageRef


class FrontendSettings(BaseModel):
    charLimit: int = Field(description="--char-limit (-1: none)")
    frontendTimeout: int
    apiKeys: bool
    keyRequired: bool
    suggestions: bool
    filesTranslation: bool
    supportedFilesFormat: list[str]
    language: FrontendLanguages


class TranslatedFile(BaseModel):
    translatedFileUrl: str = Field(description="Where to download it, once, within --file_ttl seconds")


class Translations(BaseModel):
    translations: list[str] | list[list[str]] = Field(
        description="Each sentence's translation; with num_return_sequences > 1, each one's list of its best"
    )


class Entity(BaseModel):
    text: str
    type: str = Field(examples=["PER"])
    start: int = Field(ge=0, description="Character offset into the text as sent")
    end: int = Field(ge=0)
    score: float = Field(ge=0, le=1)


class Entities(BaseModel):
    entities: list[list[Entity]] = Field(description="Each text's entities")


class ModelHealth(BaseModel):
    model_dir: str
    status: Literal["ready", "loading", "failed"]
    error: str | Absent = Field(None, description="Why it failed to load")


class ModelsHealth(BaseModel):
    status: Literal["ready", "loading", "failed"]
    models: dict[str, ModelHealth]


RETRY_AFTER = {"description": "Seconds to wait before trying again", "schema": {"type": "integer", "minimum": 1}}

ERRORS = {
    400: "Invalid request: a field missing or malformed, a language not served, a text over a limit",
    401: "Unauthorized",
    403: "Invalid API key, or banned after too many request limit violations (--req-flood-threshold)",
    404: "Not found",
    413: "The body is over --max_request_bytes, or the sentences over --max_sentences",
    415: "Neither JSON nor a form",
    422: "A field of the JSON body is invalid (named in the error)",
    429: "Slowdown: over a request limit (--req-limit, --hourly-req-limit, --daily-req-limit, a key's own)",
    500: "The model failed on this input",
    503: "The model is loading or could not be loaded, the queue is full, or the request limit storage cannot be "
    "reached",
    504: "No answer within --request_timeout",
}
RETRIED = {429: True, 503: False}  # statuses sent with Retry-After: always (True) or where waiting helps (False)


def answers(ok: dict | type[BaseModel] | None, statuses: tuple, **descriptions: str) -> dict:
    """`responses=`: 200 with `ok` (a model, or an OpenAPI response) and each of `statuses` with `ErrorResponse`,
    described by `ERRORS` or by this route's own `descriptions` (`e404="..."`)."""
    responses: dict = {}
    if ok is not None:
        responses[200] = ok if isinstance(ok, dict) else {"model": ok}
    for status in dict.fromkeys((*statuses, 413)):  # (413: the size limit answers it on any route: LimitsAndMetrics)
        responses[status] = {"model": ErrorResponse, "description": descriptions.get(f"e{status}", ERRORS[status])}
        if status in RETRIED:
            responses[status]["headers"] = {"Retry-After": {**RETRY_AFTER, "required": RETRIED[status]}}
    return responses


# ------------------------------------------------------------------------------------------------ security

API_KEY = APIKeyHeader(
    name="X-API-Key",
    scheme_name="ApiKey",
    auto_error=False,
    description="Where the server has keys (--api_key, --api-keys): the key in this header or in "
    "the api_key field (body or query string)",
)
METRICS_TOKEN = HTTPBearer(
    scheme_name="MetricsToken", auto_error=False, description="--metrics-auth-token, where the server has one"
)


def route(
    summary: str, tags: list[str], responses: dict, request_body: dict | None = None, scheme=None, **options
) -> dict:
    """One route's decorator keyword arguments. `scheme`: the security scheme it names, which a request may leave out
    (`{}`: the server may have no keys, or the key may be in the body): the route checks the key itself, the
    dependency (which refuses nothing: `auto_error=False`) only puts the scheme in the document."""
    extra = {**(request_body or {})}
    kwargs: dict = {"summary": summary, "tags": tags, "responses": responses, **options}
    if scheme is not None:
        kwargs["dependencies"] = [Security(scheme)]
        extra["security"] = [{}]  # (FastAPI's deep merge appends it to the scheme's requirement)
    if extra:
        kwargs["openapi_extra"] = extra
    return kwargs


REFUSED = (400, 403, 413, 415, 429)  # what every route reading LibreTranslate's fields may answer
RUN = (500, 503, 504)  # what running a model may answer

TRANSLATE = route(
    "Translate text",
    ["translate"],
    answers(TranslateAnswer, (*REFUSED, *RUN)),
    body(TranslateBody, "application/json", form=TranslateForm) | in_query(TranslateForm),
    API_KEY,
)
DETECT = route(
    "Detect the language of a text",
    ["translate"],
    answers(
        list[DetectedLanguage],
        (*REFUSED, 404, 503, 504),
        e404="This server has no translation model",
        e503="The request limit storage is unavailable (Redis down, read-only, full or refusing)",
    ),
    body(DetectBody, "application/json", form=DetectForm) | in_query(DetectForm),
    API_KEY,
)
LANGUAGES = route("The languages served", ["translate"], answers(list[Language], ()))
HEALTH = route(
    "Whether every model has loaded",
    ["status"],
    answers(Health, (503,), e503="A model is still loading (with Retry-After) or could not be loaded"),
)
FRONTEND_SETTINGS = route(
    "What the web page asks a server before it shows", ["frontend"], answers(FrontendSettings, ())
)
SPEC = route(
    "This OpenAPI document",
    ["status"],
    answers({"description": "OpenAPI 3.1", "content": {"application/json": {"schema": {"type": "object"}}}}, ()),
)
SUGGEST = route(
    "Suggest a translation (disabled on this server)",
    ["feedback"],
    answers(None, (403,), e403="Suggestions are disabled on this server"),
    body(SuggestBody, "application/json", *FORMS, required=False),
    status_code=403,
)
TRANSLATE_FILE = route(
    "Translate a file",
    ["translate"],
    answers(
        TranslatedFile,
        (*REFUSED, *RUN),
        e403=f"{ERRORS[403]}, or files translation is disabled (--disable-files-translation)",
    ),
    file_body() | in_query(TranslateFileBody, "file"),
    API_KEY,
)
DOWNLOAD_FILE = route(
    "Download a translated file (once)",
    ["translate"],
    answers(
        {
            "description": "The translated file",
            "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
            "headers": {"Content-Disposition": {"schema": {"type": "string"}, "required": True}},
        },
        (403, 404),
        e403="Files translation is disabled (--disable-files-translation)",
        e404="No such translated file (each is given once, within --file_ttl seconds)",
    ),
    response_class=Response,
)

V1_REFUSED = (400, 403, 404, 413, 422, 429)
V1_HEALTH = route(
    "Each model's readiness",
    ["status"],
    answers(ModelsHealth, ())
    | {
        503: {
            "model": ModelsHealth,
            "description": "A model is still loading (with Retry-After) or could not be loaded",
            "headers": {"Retry-After": {**RETRY_AFTER, "required": False}},
        }
    },
)
METRICS = route(
    "Prometheus metrics (with --metrics)",
    ["status"],
    answers(
        {"description": "Prometheus' text format", "content": {CONTENT_TYPE: {"schema": {"type": "string"}}}},
        (401, 404),
        e401="No or a wrong token (--metrics-auth-token)",
        e404="The server runs without --metrics",
    ),
    scheme=METRICS_TOKEN,
    response_class=Response,
)


def sentences_route(model: type[BaseModel]) -> dict:
    """`/v1/translate`'s decorator keyword arguments, its JSON body from its pydantic model (`v1.TranslateRequest`)."""
    return route(
        "Translate sentences",
        ["v1"],
        answers(Translations, (*V1_REFUSED, *RUN), e404="This server has no translation model"),
        body(model, "application/json"),
        API_KEY,
    )


def entities_route(model: type[BaseModel]) -> dict:
    """`/v1/ner`'s, its JSON body from `v1.NerRequest`."""
    return route(
        "Tag named entities",
        ["v1"],
        answers(Entities, (*V1_REFUSED, *RUN), e404="This server has no tagger"),
        body(model, "application/json"),
        API_KEY,
    )


# ------------------------------------------------------------------------------------------------ /docs


def add_docs(app: FastAPI, prefix: str = "") -> None:
    """Swagger UI at `{prefix}/docs` on `{prefix}/spec`, as LibreTranslate serves it (with or without its web page),
    its scripts and styles from the `swagger-ui-bundle-v2` package at `{prefix}/docs/assets/`: a page that needs no
    network, and no request leaves for a validator."""
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.staticfiles import StaticFiles

    from ...loading import require

    assets = prefix + "/docs/assets"
    app.mount(
        assets, StaticFiles(directory=str(require("swagger_ui_bundle", "serve").swagger_ui_path)), name="swagger-ui"
    )

    async def docs():
        return get_swagger_ui_html(
            openapi_url=prefix + "/spec",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{assets}/swagger-ui-bundle.js",
            swagger_css_url=f"{assets}/swagger-ui.css",
            swagger_favicon_url=f"{assets}/favicon-32x32.png",
            swagger_ui_parameters={"validatorUrl": None},
        )

    app.add_api_route(prefix + "/docs", docs, methods=["GET"], include_in_schema=False, response_class=HTMLResponse)
