"""LibreTranslate's API, so its clients work unchanged: `/translate` (text or HTML, `alternatives`, `source: "auto"`),
`/detect`, `/languages`, `/translate_file` (text, HTML, the `documents` formats and, with its extra, `pdf`'s) +
`/download_file`,
`/frontend/settings`, `/spec`, `/suggest` (disabled) and `/health`, with LibreTranslate's fields (a JSON body or a
form), limits and error texts; and the translation page at `/` (`web_page.html`)."""

import codecs
import io
import json
import logging
import re
from email.message import Message
from email.utils import collapse_rfc2231_value
from pathlib import Path
from urllib.parse import unquote_plus, unquote_to_bytes

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.datastructures import UploadFile

try:  # (python-multipart's module name from 0.0.13 on; `multipart` before)
    from python_multipart import MultipartParser
except ImportError:  # pragma: no cover
    from multipart import MultipartParser

from . import openapi
from .dispatch import check_access, off_loop, read_body, readiness, translate, within_deadline
from .documents import DOCUMENTS, decode_text, read_document, sentence_lines
from .errors import ServeError
from .languages import DETECTED_CHARS, language_name
from .markup import TEXT_FORMATS, rebuild, segments, sentences
from .pdf import PDF, read_pdf
from .state import Server, ServerState

router = APIRouter()

# Codecs that Python decodes bytes with but that are not a charset text is sent in: their "text" is an encoding of
# other text (punycode, idna, escapes, UTF-7's base64 runs: which can hold lone surrogates), or no text at all
NOT_CHARSETS = frozenset({"punycode", "idna", "undefined", "unicode-escape", "raw-unicode-escape", "utf-7"})
FILE_FORMATS = {".txt": "text", ".html": "html", ".htm": "html"}
WEB_PAGE = (Path(__file__).parent / "web_page.html").read_text(encoding="utf-8")


async def fields_of(server: ServerState, request: Request) -> dict:
    """LibreTranslate's fields from a JSON or form body (a file field as `UploadFile`) and the query string
    (LibreTranslate reads both: `/translate?api_key=...`; a field in the body wins); another body is a 415. A
    form's text is in the charset its content type names (HTML's rule: `; charset=latin-1`), UTF-8 where it names
    none; JSON is UTF-8 (RFC 8259: a charset label changes nothing), a body that is not UTF-8 read in the charset the
    label names as a client that sends one means it. A byte-order mark is dropped; bytes that are not text in that
    charset are a 400 naming the field, never read as another charset's characters (mojibake); a field holding a
    lone surrogate (JSON's "\\ud800") a 400 naming it. A field given twice in a form is refused unless `q` (a list of
    texts) or twice the same. Parsing a large body runs off the event loop."""
    content_type, params = media_type(request.headers.get("content-type", ""))
    body = await read_body(server, request)
    query = one_value_each(urlencoded_fields(request.scope.get("query_string", b""), {}))
    if content_type == "application/json":
        fields = await off_loop(len(body), json_fields, body, params.get("charset"))
        if not isinstance(fields, dict):
            raise ServeError(400, "the JSON body must be an object")
    elif content_type in ("application/x-www-form-urlencoded", "multipart/form-data", ""):
        parse = urlencoded_fields if content_type != "multipart/form-data" else multipart_fields
        fields = one_value_each(await off_loop(len(body), parse, body, params)) if body else {}
    else:
        raise ServeError(415, f"unsupported content type {content_type[:100]!r}: send JSON or a form")
    return checked_text({**query, **fields})


def checked_text(fields: dict) -> dict:
    """`fields`, each text in them (a name, a value, a file's name, at any depth of JSON) one that UTF-8 can
    encode, else a 400 naming the field: a lone surrogate is not text (no tokenizer, log or answer can hold it)."""
    for name, value in fields.items():
        pending = [name, value]
        while pending:
            item = pending.pop()
            if isinstance(item, UploadFile):
                item = item.filename or ""
            if isinstance(item, dict):
                pending += [*item.keys(), *item.values()]
            elif isinstance(item, list):
                pending += item
            elif isinstance(item, str) and not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError as error:
                    where = name.encode("utf-8", "backslashreplace").decode()[:50]
                    raise ServeError(
                        400,
                        f"Invalid request: the {where} field holds a lone surrogate "
                        f"(U+{ord(item[error.start]):04X}), which is not text",
                    ) from None
    return fields


class RedactedKeys(logging.Filter):
    """A filter on a logger whose records print requests' query strings (uvicorn's access log, "uvicorn.access"):
    each `api_key` field's value (its name percent-encoded or not, as `fields_of` reads it) becomes `***`, so that a
    key sent in the query string never reaches a log."""

    FIELD = re.compile(r"(?<![^?&\s])([^=&\s?]+)=([^&\s]*)")  # (a field of a query: up to the next & or space)

    def redacted(self, text: str) -> str:
        return self.FIELD.sub(
            lambda match: (
                match.group(1) + "=***" if unquote_plus(match.group(1)).strip().lower() == "api_key" else match.group()
            ),
            text,
        )

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = self.redacted(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(self.redacted(arg) if isinstance(arg, str) else arg for arg in record.args)
        return True


def media_type(header: str) -> tuple[str, dict]:
    """A Content-Type header's media type (lower case) and parameters (`charset`, `boundary`)."""
    message = Message()
    message["content-type"] = header
    params = message.get_params([], header="content-type")[1:]
    return header.split(";")[0].strip().lower(), {name.lower(): collapse_rfc2231_value(value) for name, value in params}


def text_of(data: bytes, charset: str | None, what: str) -> str:
    """`data` as text in `charset` (UTF-8 where None), a byte-order mark dropped; a 400 naming `what` where it is not
    text in it, a 415 for a charset Python does not know or that is not a plain text encoding (`NOT_CHARSETS`)."""
    charset = charset or "UTF-8"
    shown = charset[:50].encode("ascii", "backslashreplace").decode()
    try:
        codec = codecs.lookup(charset).name
    except (LookupError, ValueError):  # (ValueError: a name with a NUL in it)
        raise ServeError(415, f"unsupported charset {charset[:50]!r}: send UTF-8") from None
    if codec in NOT_CHARSETS:
        raise ServeError(415, f"unsupported charset {charset[:50]!r} (not a text charset): send UTF-8")
    try:
        return data.decode("utf-8-sig" if codec == "utf-8" else codec).removeprefix("\ufeff")
    except LookupError:  # (a bytes-to-bytes codec: base64, zlib, ...)
        raise ServeError(415, f"unsupported charset {charset[:50]!r} (not a text charset): send UTF-8") from None
    except (UnicodeError, ValueError) as error:
        at = f" (byte {error.start})" if isinstance(error, UnicodeDecodeError) else ""
        raise ServeError(400, f"Invalid request: {what} is not {shown} text{at}") from None


def json_fields(body: bytes, charset: str | None):
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = text_of(body, charset, "the JSON body")  # (not UTF-8: as labelled, else refused)
    try:
        return json.loads(text, object_pairs_hook=one_each)
    except RecursionError:
        raise ServeError(400, "malformed JSON body (nested too deeply)") from None
    except ValueError as exc:  # (JSONDecodeError, and a number of over 4,300 digits)
        raise ServeError(400, f"malformed JSON body ({exc})") from None


def one_each(pairs: list) -> dict:
    """A JSON object whose keys are each given once (`{"source": "de", "source": "fr"}`: which did the client mean?)."""
    fields = dict(pairs)
    if len(fields) < len(pairs):
        twice = next(key for i, (key, _) in enumerate(pairs) if key in dict(pairs[:i]))
        raise ValueError(f"the key {twice[:50]!r} given twice")
    return fields


def urlencoded_fields(body: bytes, params: dict) -> list[tuple[str, str]]:
    """A form's (name, value) pairs as browsers encode them: `+` a space, `%XX` a byte, the bytes text (`text_of`)."""
    pairs = []
    for part in body.split(b"&"):
        if part:
            name, _, value = (unquote_to_bytes(piece.replace(b"+", b" ")) for piece in part.partition(b"="))
            name = text_of(name, params.get("charset"), "a form field's name")
            pairs.append((name, text_of(value, params.get("charset"), f"the form's {name[:50]} field")))
    return pairs


def multipart_fields(body: bytes, params: dict) -> list[tuple[str, "str | UploadFile"]]:
    """A multipart form's (name, value) pairs: a part with a file name as an `UploadFile`, the others as text
    (`text_of`, in the part's own charset where it names one)."""
    if not params.get("boundary"):
        raise ServeError(400, "Invalid request: a multipart/form-data body without a boundary")
    parts, header = [], [b"", b""]

    def begin():
        parts.append({"headers": Message(), "data": []})

    def header_field(data, start, end):
        header[0] += data[start:end]

    def header_value(data, start, end):
        header[1] += data[start:end]

    def header_end():
        parts[-1]["headers"][header[0].decode("latin-1")] = text_of(header[1], params.get("charset"), "a part's header")
        header[:] = [b"", b""]

    def part_data(data, start, end):
        parts[-1]["data"].append(data[start:end])

    try:
        parser = MultipartParser(
            params["boundary"],
            {
                "on_part_begin": begin,
                "on_header_field": header_field,
                "on_header_value": header_value,
                "on_header_end": header_end,
                "on_part_data": part_data,
            },
        )
        parser.write(body)
        parser.finalize()
    except ValueError as error:  # (python-multipart's errors)
        raise ServeError(400, f"Invalid request: a malformed multipart/form-data body ({error})") from None
    fields = []
    for part in parts:
        headers, data = part["headers"], b"".join(part["data"])
        name = collapse_rfc2231_value(headers.get_param("name", "", header="content-disposition"))
        filename = headers.get_param("filename", None, header="content-disposition")
        if filename is not None:
            fields.append(
                (name, UploadFile(io.BytesIO(data), size=len(data), filename=collapse_rfc2231_value(filename)))
            )
        else:
            charset = headers.get_content_charset() or params.get("charset")
            fields.append((name, text_of(data, charset, f"the form's {name[:50]} field")))
    return fields


def one_value_each(pairs: list) -> dict:
    """Form fields by name: `q` given more than once is a list of texts; another field given twice is a 400 unless
    both say the same (which one did the client mean?)."""
    values: dict[str, list] = {}
    for name, value in pairs:
        values.setdefault(name, []).append(value)
    for name, given in values.items():
        if name != "q" and len(given) > 1 and any(not isinstance(v, str) or v != given[0] for v in given):
            raise ServeError(400, f"Invalid request: {name[:50]} parameter given {len(given)} times")
    return {name: given if name == "q" and len(given) > 1 else given[0] for name, given in values.items()}


def required(fields: dict, name: str):
    value = fields.get(name)
    if value is None or value == "" or value == []:
        raise ServeError(400, f"Invalid request: missing {name} parameter")
    return value


def checked_texts(q) -> list[str]:
    if not isinstance(q, (str, list)) or (isinstance(q, list) and not all(isinstance(s, str) for s in q)):
        raise ServeError(400, "Invalid request: q must be a string or a list of strings")
    return [q] if isinstance(q, str) else q  # (each UTF-8 text: `checked_text`)


def checked_limits(server: ServerState, fields: dict, texts: list[str]) -> int:
    """`--batch-limit` and `--char-limit` on the texts; the number of alternatives asked for, within the beam limit."""
    settings = server.settings
    if isinstance(fields["q"], list) and 0 <= settings.batch_limit < len(texts):
        raise ServeError(400, f"Invalid request: request ({len(texts)}) exceeds text limit ({settings.batch_limit})")
    for text in texts:
        if 0 <= settings.char_limit < len(text):
            raise ServeError(400, f"Invalid request: request ({len(text)}) exceeds text limit ({settings.char_limit})")
    given = fields.get("alternatives")
    alternatives = 0 if given is None else whole_number(given)  # (JSON's null: not given)
    if alternatives is None:
        raise ServeError(400, "Invalid request: alternatives parameter is not a number")
    if alternatives < 0:
        raise ServeError(400, "Invalid request: alternatives parameter must be >= 0")
    if alternatives > settings.max_beams - 1:
        raise ServeError(
            400, f"Invalid request: alternatives parameter must be <= {settings.max_beams - 1} (--max_beams)"
        )
    return alternatives


def whole_number(value) -> int | None:
    """`value` as a whole number: a JSON integer (or a number with no fraction: 2.0) or a form's digits ("3"), else
    None: true and false are not numbers (though Python counts them as 1 and 0), nor is 2.5, "2.5", inf or NaN."""
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        return None
    if isinstance(value, str) and not re.fullmatch(r"\s*[+-]?[0-9]+\s*", value):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # (a list, a dict; digits past Python's 4,300)
        return None


def checked_format(fields: dict) -> str:
    text_format = "text" if fields.get("format") in (None, "") else fields.get("format")  # ({}, 0, false: refused)
    if not isinstance(text_format, str) or text_format not in TEXT_FORMATS:
        raise ServeError(400, f"{str(text_format)[:50]} format is not supported")
    return text_format


async def detected(server: ServerState, texts: list[str]) -> list[list[dict]]:
    """The served source languages of each text, most likely first (`languages.Detector`), found off the event loop."""
    detector = server.detector
    return await off_loop(sum(map(len, texts)), lambda: [detector.detect(text) for text in texts])


def unique(texts: list[str], best: str) -> list[str]:
    """`texts` without repeats and without `best`, told apart by what they say (surrounding whitespace aside)."""
    seen, out = {best.strip()}, []
    for text in texts:
        if text.strip() not in seen:
            seen.add(text.strip())
            out.append(text.strip())
    return out


async def translated(
    server: ServerState,
    texts: list[str],
    source: str,
    target: str,
    text_format: str,
    alternatives: int = 0,
    chunk: int | None = None,
) -> list[tuple[str, list[str]]]:
    """Each text's translation and its alternatives (distinct, the best left out): every sentence of every text
    (`markup.segments`) in one call of the engines, or in calls of `chunk` sentences (a file). Reading and rebuilding
    the markup run off the event loop."""
    if source == target:
        return [(text, []) for text in texts]
    size = sum(map(len, texts))
    pieces = await off_loop(size, lambda: [segments(text, text_format) for text in texts])
    flat = [sentence for each in pieces for sentence in sentences(each)]
    n, done, step = alternatives + 1, [], chunk or max(1, len(flat))
    for start in range(0, len(flat), step):
        done += await translate(server, source, target, flat[start : start + step], n)
    return await off_loop(size, rebuilt, pieces, done, n, alternatives)


def rebuilt(pieces: list, hypotheses: list[list[str]], n: int, alternatives: int) -> list[tuple[str, list[str]]]:
    """Each text (its `pieces`) with its sentences' translations put back: the best, then its distinct alternatives,
    the k-th of them each sentence's k-th best."""
    hypotheses, out = iter(hypotheses), []
    for each in pieces:
        mine = [next(hypotheses) for _ in sentences(each)]
        ranked = [rebuild(each, [h[min(k, len(h) - 1)] for h in mine]) for k in range(n)]
        out.append((ranked[0], unique(ranked[1:], ranked[0])[:alternatives]))
    return out


@router.post("/translate", **openapi.TRANSLATE)
async def libretranslate(server: Server, request: Request):
    """LibreTranslate's `/translate`: `q` (a text or a list), `source` (a code or "auto"), `target`, `format` ("text"
    or "html"), `alternatives`, `api_key`."""
    return await within_deadline(server, libretranslate_answer(server, request))


async def libretranslate_answer(server: ServerState, request: Request) -> dict:
    fields = await fields_of(server, request)
    await check_access(server, request, fields.get("api_key"))
    q, source, target = required(fields, "q"), required(fields, "source"), required(fields, "target")
    texts = checked_texts(q)
    alternatives, text_format = checked_limits(server, fields, texts), checked_format(fields)
    source, target = server.pairs.requested(source, target)  # (the served codes: PT-br names pt-BR)
    languages = [found[0] for found in await detected(server, texts)] if source == "auto" else [None] * len(texts)
    results: list = [None] * len(texts)
    for code in dict.fromkeys(found["language"] if found else source for found in languages):
        mine = [i for i, found in enumerate(languages) if (found["language"] if found else source) == code]
        for i, result in zip(
            mine, await translated(server, [texts[i] for i in mine], code, target, text_format, alternatives)
        ):
            results[i] = result
    answer = {"translatedText": [best for best, _ in results] if isinstance(q, list) else results[0][0]}
    if source == "auto":
        answer["detectedLanguage"] = languages if isinstance(q, list) else languages[0]
    if alternatives:
        answer["alternatives"] = [alt for _, alt in results] if isinstance(q, list) else results[0][1]
    return answer


@router.post("/detect", **openapi.DETECT)
async def detect(server: Server, request: Request):
    """LibreTranslate's `/detect`: `q` -> the served source languages, most likely first, `{"language",
    "confidence"}` (0-100)."""
    return await within_deadline(server, detect_answer(server, request))


async def detect_answer(server: ServerState, request: Request) -> list[dict]:
    fields = await fields_of(server, request)
    await check_access(server, request, fields.get("api_key"))
    (text,) = checked_texts(" ".join(checked_texts(required(fields, "q"))))
    if not server.pairs.sources():
        raise ServeError(404, "this server has no translation model (serve TRANSLATION_DIR)")
    return (await detected(server, [text]))[0]


@router.get("/languages", **openapi.LANGUAGES)
async def languages(server: Server):
    """Every served language, each with the languages it translates into (directly or through a pivot)."""
    pairs = server.pairs
    return [{"code": code, "name": language_name(code), "targets": pairs.targets(code)} for code in pairs.languages()]


@router.get("/health", **openapi.HEALTH)
async def health(server: Server):
    """LibreTranslate's: `{"status": "ok"}` once every model has loaded; 503 before (`/v1/health` says which), both
    by `readiness`."""
    status, _ = readiness(server)
    if status == "failed":
        return JSONResponse({"error": "a model could not be loaded (see /v1/health)"}, status_code=503)
    if status == "loading":
        return JSONResponse({"error": "the models are still loading"}, status_code=503, headers={"Retry-After": "2"})
    return {"status": "ok"}


@router.get("/frontend/settings", **openapi.FRONTEND_SETTINGS)
async def frontend_settings(server: Server):
    """What LibreTranslate's web page asks a server before it shows: limits, keys, file formats, the first pair."""
    settings, pairs = server.settings, server.pairs
    source, target = next(iter(pairs.direct), (None, None))
    keys, files = bool(server.access.keys), bool(pairs.direct) and not settings.disable_files_translation
    return {
        "charLimit": settings.char_limit,
        "frontendTimeout": settings.frontend_timeout,
        "apiKeys": keys,
        "keyRequired": keys,
        "suggestions": False,
        "filesTranslation": files,
        "supportedFilesFormat": file_formats() if files else [],
        "language": {
            "source": {"code": source, "name": language_name(source or "")},
            "target": {"code": target, "name": language_name(target or "")},
        },
    }


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def web_page(server: Server):
    """The translation page (`web_page.html`); 404 with `--disable-web-ui`."""
    if server.settings.disable_web_ui:
        raise ServeError(404, "Not Found (the server runs with --disable-web-ui)")
    return HTMLResponse(WEB_PAGE)


@router.get("/spec", **openapi.SPEC)
async def spec(request: Request):
    """The OpenAPI document of this server's routes."""
    return request.app.openapi()


@router.post("/suggest", **openapi.SUGGEST)
async def suggest(request: Request):
    raise ServeError(403, "Suggestions are disabled on this server.")


# ---------------------------------------------------------------------------------------------------- files


def file_formats() -> list[str]:
    """The extensions `/translate_file` takes: text, HTML, the documents, and .pdf where the `pdf` extra is."""
    return [*FILE_FORMATS, *DOCUMENTS, *PDF]


def files_allowed(server: ServerState) -> None:
    if server.settings.disable_files_translation:
        raise ServeError(403, "Files translation are disabled on this server.")


def safe_filename(name: str) -> str:
    """The file's own name, without folders or characters a header or a path could misread."""
    name = re.split(r"[\\/]", name)[-1]
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "file"
    return name[-100:]


@router.post("/translate_file", **openapi.TRANSLATE_FILE)
async def translate_uploaded_file(server: Server, request: Request):
    """LibreTranslate's `/translate_file`: a `file` (.txt or .html in UTF-8, or a document: `file_formats`),
    `source` (or "auto"), `target` -> `{"translatedFileUrl"}`, fetched once from `/download_file/...` within
    `--file_ttl` seconds. Reading and writing the file run off the event loop; the whole of it (every batch of its
    sentences included) within `--request_timeout`."""
    return await within_deadline(server, translate_file_answer(server, request))


async def translate_file_answer(server: ServerState, request: Request) -> dict:
    files_allowed(server)
    fields = await fields_of(server, request)
    await check_access(server, request, fields.get("api_key"))
    upload = fields.get("file")
    if not isinstance(upload, UploadFile):
        raise ServeError(400, "Invalid request: missing file parameter")
    source, target = required(fields, "source"), required(fields, "target")
    if not upload.filename:
        raise ServeError(400, "Invalid request: empty file")
    extension = "." + upload.filename.rsplit(".", 1)[-1].lower() if "." in upload.filename else ""
    if extension not in file_formats():
        raise ServeError(
            400,
            f"Invalid request: file format not supported ({extension or 'no extension'}; {', '.join(file_formats())})",
        )
    data = await upload.read()
    # a document may unpack to far more than its packed bytes: read and written in a thread, however small
    size = len(data) if extension in FILE_FORMATS else float("inf")
    texts, text_format, write = await off_loop(size, file_texts, upload.filename, extension, data)
    source, target = server.pairs.requested(source, target)  # (the served codes: PT-br names pt-BR)
    if source == "auto":
        start = "\n".join(texts)[:DETECTED_CHARS]
        source = (await detected(server, [" ".join(sentences(segments(start, text_format))) or start]))[0][0]
        source = source["language"]
    done = await translated(server, texts, source, target, text_format, chunk=server.settings.max_sentences)
    translated_file = await off_loop(size, write, [best for best, _ in done])
    name = server.files.put(safe_filename(upload.filename), translated_file)
    return {"translatedFileUrl": str(request.url_for("download_file", filename=name))}


def file_texts(filename: str, extension: str, data: bytes):
    """(texts, their format, the function writing the translated file from their translations) of an uploaded file;
    a 400 naming the file where it cannot be read."""
    if extension in DOCUMENTS or extension in PDF:
        try:
            paragraphs, write = read_pdf(data) if extension in PDF else read_document(extension, data)
        except ValueError as error:
            raise ServeError(400, f"Invalid request: {safe_filename(filename)}: {error}") from None

        def written(translations: list[str]) -> bytes:
            try:
                return write([translation.replace("\n", " ") for translation in translations])
            except ValueError as error:  # (a PDF whose objects pypdf read but cannot write back)
                raise ServeError(400, f"Invalid request: {safe_filename(filename)}: {error}") from None

        return [sentence_lines(paragraph) for paragraph in paragraphs], "text", written  # a sentence a line
    try:
        text = decode_text(data)
    except ValueError as error:
        raise ServeError(400, f"Invalid request: {safe_filename(filename)}: {error}") from None
    return [text], FILE_FORMATS[extension], lambda translations: translations[0].encode("utf-8")


@router.get("/download_file/{filename}", **openapi.DOWNLOAD_FILE)
async def download_file(server: Server, filename: str):
    files_allowed(server)
    data = server.files.take(filename)
    if data is None:
        raise ServeError(404, "no such translated file (each is given once, within --file_ttl seconds)")
    download = filename.split(".", 1)[1]
    return Response(
        data,
        media_type="application/octet-stream",
        headers={"Content-Disposition": f'attachment; filename="{download}"'},
    )
