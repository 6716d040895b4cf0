"""The server's OpenAPI document (`/spec`) against the server: schemathesis generates requests from the document,
valid and invalid, for every operation, and checks each answer: no 5xx, every status, content type, header and body
as documented (LibreTranslate's error body for every error). A short run by default; `VT_FUZZ_EXAMPLES=200` runs
that many examples per operation. And the document itself (every body, status and the key), and Swagger UI at `/docs`
with its assets served by the server itself."""

import os
import re

import pytest

from conftest import FakeEngine

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is not installed (the [test] extra)")
pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from vanilla_transformer.deploy.server.app import Settings, create_app  # noqa: E402

EXAMPLES = int(os.environ.get("VT_FUZZ_EXAMPLES") or 10)  # (set: a longer run, of random cases; else fixed ones)


class FakeTagger(FakeEngine):
    """A tagger's interface without a model: each text's first word is a PER entity."""

    def __init__(self):
        super().__init__()
        self.name = "ner"

    def process(self, texts, options):
        found = [re.search(r"\S+", text) for text in texts]
        return [
            [{"text": m.group(), "type": "PER", "start": m.start(), "end": m.end(), "score": 0.9}] if m else []
            for m in found
        ]


def fuzzed_app(**settings):
    """A server of every route: a de->en translator and a tagger, metrics on."""
    return create_app([FakeEngine(source="de", target="en")], Settings(metrics=True, **settings), FakeTagger())


def served_languages(node, sources: list, targets: list):
    """The document with every body's `source` and `target` narrowed to what the server serves (null kept where
    allowed): the document names no language (that depends on the server), and a valid request should reach the
    models more often than "xx is not supported"."""
    if isinstance(node, list):
        return [served_languages(item, sources, targets) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: served_languages(value, sources, targets) for key, value in node.items()}
    for media in out.get("requestBody", {}).get("content", {}).values():
        properties = media["schema"]["properties"]
        for name, codes in (("source", sources), ("target", targets)):
            if name in properties:
                nullable = {"type": "null"} in properties[name].get("anyOf", [])
                narrowed = {"type": "string", "enum": codes}
                properties[name] = {"anyOf": [narrowed, {"type": "null"}]} if nullable else narrowed
    return out


CONFIG = {
    "checks": {
        # A valid request may still be over a limit of the server's own (--max_sentences, --max_beams,
        # --max_sentence_tokens) or name a pair it does not translate: a documented 400 / 413, never a 415 or 422.
        "positive_data_acceptance": {"expected-statuses": ["2xx", "400", "403", "404", "413", "429"]},
    },
    "output": {"sanitization": {"enabled": False}},  # (the fuzzed api_key values are no secrets)
}


def fuzzed_schema(config: dict, **settings):
    app = fuzzed_app(**settings)
    document = TestClient(app).get("/spec").json()
    schema = schemathesis.openapi.from_dict(
        served_languages(document, ["de", "auto"], ["en", "de"]), config=schemathesis.Config.from_dict(config)
    )
    schema.app = app  # (requests go to the app in this process; its lifespan starts with the first)
    return schema


schema = fuzzed_schema(CONFIG)
# A server with a key, a request limit and files translation off: the 403s and 429s (Retry-After) as documented.
keyed = fuzzed_schema(
    {**CONFIG, "auth": {"openapi": {"ApiKey": {"api_key": "k"}, "MetricsToken": {"bearer": "t"}}}},
    api_keys={"k": None},
    req_limit=30,
    metrics_auth_token="t",
    disable_files_translation=True,
)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize="VT_FUZZ_EXAMPLES" not in os.environ,
)


@schema.parametrize()
@FUZZ
def test_every_operation_answers_as_documented(case):
    """Every check schemathesis has for a response (no 5xx; status, content type, headers and body as documented;
    valid data accepted, invalid data refused), on every operation."""
    case.call_and_validate()


@keyed.parametrize()
@FUZZ
def test_a_server_with_keys_and_limits_answers_as_documented(case):
    """The same checks where most answers are refusals: 403 (a wrong key, files translation off) and 429 (with its
    Retry-After)."""
    case.call_and_validate()


def test_spec_documents_every_body_status_and_the_key():
    """`/spec` names every route with its body (JSON and both form encodings where LibreTranslate takes them, the
    /v1 bodies from their pydantic models), every error with LibreTranslate's body `{"error": string}` (a named
    component), Retry-After where it is always sent, and the API key (header or body, optional)."""
    from vanilla_transformer import __version__
    from vanilla_transformer.deploy.server import libretranslate, v1
    from vanilla_transformer.deploy.server.v1 import NerRequest, TranslateRequest

    app = fuzzed_app()
    spec = TestClient(app).get("/spec").json()
    assert spec["info"]["version"] == __version__
    routes = {
        route.path
        for router in (libretranslate.router, v1.router)
        for route in router.routes
        if route.include_in_schema
    }
    assert routes == set(spec["paths"])
    assert spec["components"]["schemas"]["ErrorResponse"] == {
        "properties": {
            "error": {
                "type": "string",
                "title": "Error",
                "description": spec["components"]["schemas"]["ErrorResponse"]["properties"]["error"]["description"],
            }
        },
        "type": "object",
        "required": ["error"],
        "title": "ErrorResponse",
        "description": "LibreTranslate's error body: every answer that is not a success.",
    }
    forms = {"application/json", "application/x-www-form-urlencoded", "multipart/form-data"}
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            assert "413" in operation["responses"], where  # (the size limit answers any route)
            if method == "post":
                assert operation["requestBody"]["content"], where
            for status, answer in operation["responses"].items():
                if status.startswith(("4", "5")) and (path, status) not in {
                    ("/download_file/{filename}", "422"),
                    ("/v1/health", "503"),
                }:
                    assert answer["content"]["application/json"]["schema"] == {
                        "$ref": "#/components/schemas/ErrorResponse"
                    }, (where, status)
                if status == "429":
                    assert answer["headers"]["Retry-After"]["required"], where
            if "security" in operation:
                assert {} in operation["security"], where  # (the key may be in the body; a server may have none)
    paths = spec["paths"]
    for path in ("/translate", "/detect"):
        assert set(paths[path]["post"]["requestBody"]["content"]) == forms
        assert {"ApiKey": []} in paths[path]["post"]["security"]
        assert paths[path]["post"]["requestBody"]["content"]["application/json"]["schema"]["required"][0] == "q"
        assert {"q", "api_key"} <= {p["name"] for p in paths[path]["post"]["parameters"] if p["in"] == "query"}
    upload = paths["/translate_file"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert upload["properties"]["file"]["format"] == "binary" and set(upload["required"]) == {
        "file",
        "source",
        "target",
    }
    for path, model in (("/v1/translate", TranslateRequest), ("/v1/ner", NerRequest)):
        documented, own = (
            paths[path]["post"]["requestBody"]["content"]["application/json"]["schema"],
            (model.model_json_schema()),
        )  # (FastAPI's document leaves out null defaults)
        assert (set(documented["properties"]), documented["required"], documented["additionalProperties"]) == (
            set(own["properties"]),
            own["required"],
            False,
        )
    assert spec["components"]["securitySchemes"]["ApiKey"] == {
        "type": "apiKey",
        "in": "header",
        "name": "X-API-Key",
        "description": spec["components"]["securitySchemes"]["ApiKey"]["description"],
    }
    assert set(paths["/translate"]["post"]["responses"]) >= {
        "200",
        "400",
        "403",
        "413",
        "415",
        "429",
        "500",
        "503",
        "504",
    }
    assert "application/octet-stream" in paths["/download_file/{filename}"]["get"]["responses"]["200"]["content"]


@pytest.mark.parametrize("prefix, web_ui", [("", True), ("/lt", True), ("/lt", False)])
def test_docs_serves_swagger_ui_from_the_server_itself(prefix, web_ui):
    """`{prefix}/docs` is Swagger UI on `{prefix}/spec` (with --disable-web-ui too, as LibreTranslate's): every URL of
    the page is a path on the server (no CDN: it works offline), each answers, and the bundled Swagger UI reads
    OpenAPI 3.1 (major version 5 or newer)."""
    from swagger_ui_bundle import swagger_ui_path

    client = TestClient(fuzzed_app(url_prefix=prefix, disable_web_ui=not web_ui))
    page = client.get(f"{prefix}/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert client.get(f"{prefix}/").status_code == (200 if web_ui else 404)
    urls = re.findall(r"""(?:href|src)="([^"]*)"|url: '([^']*)'""", page.text)
    urls = [href or url for href, url in urls]
    assert len(urls) == 4 and "//" not in page.text  # (no scheme, no host: paths on this server)
    types = {}
    for url in urls:
        assert url.startswith(f"{prefix}/"), url
        answer = client.get(url)
        assert answer.status_code == 200 and answer.content, url
        types[url.rsplit("/", 1)[-1]] = answer.headers["content-type"].split(";")[0]
    # a script's type comes from the process's `mimetypes` table, which other libraries amend (gradio's page sets
    # .js to application/javascript): either is JavaScript to a browser
    if types.get("swagger-ui-bundle.js") == "application/javascript":
        types["swagger-ui-bundle.js"] = "text/javascript"
    assert types == {
        "swagger-ui.css": "text/css",
        "favicon-32x32.png": "image/png",
        "swagger-ui-bundle.js": "text/javascript",
        "spec": "application/json",
    }
    assert client.get(f"{prefix}/spec").json()["openapi"].startswith("3.1")
    assert int(re.search(r"swagger-ui-(\d+)\.", str(swagger_ui_path)).group(1)) >= 5
