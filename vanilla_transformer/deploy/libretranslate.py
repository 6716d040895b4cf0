"""LibreTranslate's API, so its clients work unchanged: `/translate` (text or HTML, `alternatives`, `source: "auto"`),
`/detect`, `/languages`, `/translate_file` (text, HTML and the `documents` formats) + `/download_file`,
`/frontend/settings`, `/spec`, `/suggest` (disabled) and `/health`, with LibreTranslate's fields (a JSON body or a
form), limits and error texts; and the translation page at `/` (`web_page.html`)."""

import json
import re
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.datastructures import UploadFile

from .batcher import ServeError
from .dispatch import check_access, model_state, read_body, translate
from .documents import DOCUMENTS, read_document, sentence_lines
from .languages import language_name
from .markup import FORMATS, rebuild, segments, sentences
from .state import server

router = APIRouter()

FILE_FORMATS = {".txt": "text", ".html": "html", ".htm": "html"}
WEB_PAGE = (Path(__file__).parent / "web_page.html").read_text(encoding="utf-8")


async def fields_of(request: Request) -> dict:
    """LibreTranslate's fields from a JSON or form body (a file field as `UploadFile`); anything else is a 415."""
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
    if content_type in ("application/x-www-form-urlencoded", "multipart/form-data", ""):
        if not body:
            return {}

        async def replay():  # the body, read once under the size limit, given to the form parser
            return {"type": "http.request", "body": body, "more_body": False}

        form = await Request(request.scope, replay).form()
        return {key: (form.getlist(key) if key == "q" and len(form.getlist(key)) > 1 else form[key])
                for key in form.keys()}
    raise ServeError(415, f"unsupported content type {content_type!r}: send JSON or a form")


def required(fields: dict, name: str):
    value = fields.get(name)
    if value is None or value == "" or value == []:
        raise ServeError(400, f"Invalid request: missing {name} parameter")
    return value


def checked_texts(q) -> list[str]:
    if not isinstance(q, (str, list)) or (isinstance(q, list) and not all(isinstance(s, str) for s in q)):
        raise ServeError(400, "Invalid request: q must be a string or a list of strings")
    texts = [q] if isinstance(q, str) else q
    for text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:  # JSON's "\ud800": a string no tokenizer can read
            raise ServeError(400, f"Invalid request: q holds a lone surrogate (U+{ord(text[error.start]):04X}), "
                                  "which is not text") from None
    return texts


def checked_limits(request: Request, fields: dict, texts: list[str]) -> int:
    """`--batch-limit` and `--char-limit` on the texts; the number of alternatives asked for, within the beam limit."""
    settings = server(request).settings
    if isinstance(fields["q"], list) and 0 <= settings.batch_limit < len(texts):
        raise ServeError(400, f"Invalid request: request ({len(texts)}) exceeds text limit ({settings.batch_limit})")
    for text in texts:
        if 0 <= settings.char_limit < len(text):
            raise ServeError(400, f"Invalid request: request ({len(text)}) exceeds text limit ({settings.char_limit})")
    alternatives = fields.get("alternatives", 0)
    try:
        alternatives = int(alternatives)
    except (TypeError, ValueError, OverflowError):
        raise ServeError(400, "Invalid request: alternatives parameter is not a number") from None
    if alternatives < 0:
        raise ServeError(400, "Invalid request: alternatives parameter must be >= 0")
    if alternatives > settings.max_beams - 1:
        raise ServeError(400, f"Invalid request: alternatives parameter must be <= {settings.max_beams - 1} "
                              "(--max_beams)")
    return alternatives


def checked_format(fields: dict) -> str:
    text_format = fields.get("format") or "text"
    if text_format not in FORMATS:
        raise ServeError(400, f"{text_format} format is not supported")
    return text_format


def detected(request: Request, text: str) -> dict:
    """The most likely served source language of `text`."""
    return server(request).detector.detect(text)[0]


def unique(texts: list[str], best: str) -> list[str]:
    """`texts` without repeats and without `best`, told apart by what they say (surrounding whitespace aside)."""
    seen, out = {best.strip()}, []
    for text in texts:
        if text.strip() not in seen:
            seen.add(text.strip())
            out.append(text.strip())
    return out


async def translated(request: Request, texts: list[str], source: str, target: str, text_format: str,
                     alternatives: int = 0, chunk: int | None = None) -> list[tuple[str, list[str]]]:
    """Each text's translation and its alternatives (distinct, the best left out): every sentence of every text
    (`markup.segments`) in one call of the engines, or in calls of `chunk` sentences (a file)."""
    if source == target:
        return [(text, []) for text in texts]
    pieces = [segments(text, text_format) for text in texts]
    flat = [sentence for each in pieces for sentence in sentences(each)]
    n, done, step = alternatives + 1, [], chunk or max(1, len(flat))
    for start in range(0, len(flat), step):
        done += await translate(request, source, target, flat[start:start + step], n)
    hypotheses = iter(done)
    out = []
    for each in pieces:
        mine = [next(hypotheses) for _ in sentences(each)]
        ranked = [rebuild(each, [h[min(k, len(h) - 1)] for h in mine]) for k in range(n)]
        out.append((ranked[0], unique(ranked[1:], ranked[0])[:alternatives]))
    return out


@router.post("/translate")
async def libretranslate(request: Request):
    """LibreTranslate's `/translate`: `q` (a text or a list), `source` (a code or "auto"), `target`, `format` ("text"
    or "html"), `alternatives`, `api_key`."""
    fields = await fields_of(request)
    await check_access(request, fields.get("api_key"))
    q, source, target = required(fields, "q"), required(fields, "source"), required(fields, "target")
    texts = checked_texts(q)
    alternatives, text_format = checked_limits(request, fields, texts), checked_format(fields)
    server(request).pairs.check_served(*([] if source == "auto" else [source]), target)
    languages = [detected(request, text) if source == "auto" else None for text in texts]
    results: list = [None] * len(texts)
    for code in dict.fromkeys(found["language"] if found else source for found in languages):
        mine = [i for i, found in enumerate(languages) if (found["language"] if found else source) == code]
        for i, result in zip(mine, await translated(request, [texts[i] for i in mine], code, target, text_format,
                                                    alternatives)):
            results[i] = result
    answer = {"translatedText": [best for best, _ in results] if isinstance(q, list) else results[0][0]}
    if source == "auto":
        answer["detectedLanguage"] = languages if isinstance(q, list) else languages[0]
    if alternatives:
        answer["alternatives"] = [alt for _, alt in results] if isinstance(q, list) else results[0][1]
    return answer


@router.post("/detect")
async def detect(request: Request):
    """LibreTranslate's `/detect`: `q` -> the served source languages, most likely first, `{"language",
    "confidence"}` (0-100)."""
    fields = await fields_of(request)
    await check_access(request, fields.get("api_key"))
    (text,) = checked_texts(" ".join(checked_texts(required(fields, "q"))))
    if not server(request).pairs.sources():
        raise ServeError(404, "this server has no translation model (serve TRANSLATION_DIR)")
    return server(request).detector.detect(text)


@router.get("/languages")
async def languages(request: Request):
    """Every served language, each with the languages it translates into (directly or through a pivot)."""
    pairs = server(request).pairs
    return [{"code": code, "name": language_name(code), "targets": pairs.targets(code)} for code in pairs.languages()]


@router.get("/health")
async def health(request: Request):
    """LibreTranslate's: `{"status": "ok"}` once every model has loaded; 503 before (`/v1/health` says which)."""
    states = {model_state(served) for served in server(request).engines.values()}
    if "failed" in states:
        return JSONResponse({"error": "a model could not be loaded (see /v1/health)"}, status_code=503)
    if "loading" in states:
        return JSONResponse({"error": "the models are still loading"}, status_code=503, headers={"Retry-After": "2"})
    return {"status": "ok"}


@router.get("/frontend/settings")
async def frontend_settings(request: Request):
    """What LibreTranslate's web page asks a server before it shows: limits, keys, file formats, the first pair."""
    settings, pairs = server(request).settings, server(request).pairs
    source, target = next(iter(pairs.direct), (None, None))
    keys, files = bool(server(request).access.keys), bool(pairs.direct) and not settings.disable_files_translation
    return {"charLimit": settings.char_limit, "frontendTimeout": settings.frontend_timeout, "apiKeys": keys,
            "keyRequired": keys, "suggestions": False, "filesTranslation": files,
            "supportedFilesFormat": [*FILE_FORMATS, *DOCUMENTS] if files else [],
            "language": {"source": {"code": source, "name": language_name(source or "")},
                         "target": {"code": target, "name": language_name(target or "")}}}


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def web_page(request: Request):
    """The translation page (`web_page.html`); 404 with `--disable-web-ui`."""
    if server(request).settings.disable_web_ui:
        raise ServeError(404, "Not Found (the server runs with --disable-web-ui)")
    return HTMLResponse(WEB_PAGE)


@router.get("/spec")
async def spec(request: Request):
    """The OpenAPI document of this server's routes."""
    return request.app.openapi()


@router.post("/suggest")
async def suggest(request: Request):
    raise ServeError(403, "Suggestions are disabled on this server.")


# ---------------------------------------------------------------------------------------------------- files


def files_allowed(request: Request) -> None:
    if server(request).settings.disable_files_translation:
        raise ServeError(403, "Files translation are disabled on this server.")


def safe_filename(name: str) -> str:
    """The file's own name, without folders or characters a header or a path could misread."""
    name = re.split(r"[\\/]", name)[-1]
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "file"
    return name[-100:]


@router.post("/translate_file")
async def translate_uploaded_file(request: Request):
    """LibreTranslate's `/translate_file`: a `file` (.txt or .html in UTF-8, or a document: `documents.DOCUMENTS`),
    `source` (or "auto"), `target` -> `{"translatedFileUrl"}`, fetched once from `/download_file/...` within
    `--file_ttl` seconds."""
    files_allowed(request)
    fields = await fields_of(request)
    await check_access(request, fields.get("api_key"))
    upload = fields.get("file")
    if not isinstance(upload, UploadFile):
        raise ServeError(400, "Invalid request: missing file parameter")
    source, target = required(fields, "source"), required(fields, "target")
    if not upload.filename:
        raise ServeError(400, "Invalid request: empty file")
    extension = "." + upload.filename.rsplit(".", 1)[-1].lower() if "." in upload.filename else ""
    if extension not in FILE_FORMATS and extension not in DOCUMENTS:
        raise ServeError(400, f"Invalid request: file format not supported ({extension or 'no extension'}; "
                              f"{', '.join([*FILE_FORMATS, *DOCUMENTS])})")
    texts, text_format, write = file_texts(upload.filename, extension, await upload.read())
    server(request).pairs.check_served(*([] if source == "auto" else [source]), target)
    if source == "auto":
        start = "\n".join(texts)[:4000]
        source = detected(request, " ".join(sentences(segments(start, text_format))) or start)["language"]
    done = await translated(request, texts, source, target, text_format,
                            chunk=server(request).settings.max_sentences)
    name = server(request).files.put(safe_filename(upload.filename), write([best for best, _ in done]))
    return {"translatedFileUrl": str(request.url_for("download_file", filename=name))}


def file_texts(filename: str, extension: str, data: bytes):
    """(texts, their format, the function writing the translated file from their translations) of an uploaded file;
    a 400 naming the file where it cannot be read."""
    if extension in DOCUMENTS:
        try:
            paragraphs, write = read_document(extension, data)
        except ValueError as error:
            raise ServeError(400, f"Invalid request: {safe_filename(filename)}: {error}") from None
        return ([sentence_lines(paragraph) for paragraph in paragraphs], "text",  # a sentence a line, one paragraph
                lambda translations: write([translation.replace("\n", " ") for translation in translations]))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ServeError(400, f"Invalid request: {filename} is not UTF-8 text (byte {error.start})") from None
    return [text], FILE_FORMATS[extension], lambda translations: translations[0].encode("utf-8")


@router.get("/download_file/{filename}")
async def download_file(request: Request, filename: str):
    files_allowed(request)
    data = server(request).files.take(filename)
    if data is None:
        raise ServeError(404, "no such translated file (each is given once, within --file_ttl seconds)")
    download = filename.split(".", 1)[1]
    return Response(data, media_type="application/octet-stream",
                    headers={"Content-Disposition": f'attachment; filename="{download}"'})
