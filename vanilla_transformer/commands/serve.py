"""`vanilla-transformer serve MODEL_DIR [MODEL_DIR ...] [--ner TAGGER_DIR]`: translation models (one per language
pair) and/or a tagger behind HTTP, with dynamic batching.

Endpoints:
- LibreTranslate's API, so its clients work unchanged: `POST /translate` (`q`, `source` or "auto", `target`, `format`
  "text" or "html", `alternatives`), `POST /detect`, `GET /languages`, `POST /translate_file` (.txt, .html, .htm, .docx,
  .pptx, .odt, .odp, .epub, .srt; .pdf with the `pdf` extra) + `GET /download_file/..`, `GET /frontend/settings`,
  `GET /spec`, `POST /suggest` (disabled: 403), `GET /health` (`{"status": "ok"}`), and a translation page at `GET /`
  (`--disable-web-ui`);
- `POST /v1/translate`: `{"sentences": [...], "source", "target", "num_beams": null, "num_return_sequences": 1,
  "max_new_tokens": null}` (null: as the model's generation config says) -> `{"translations": [...]}` (source and
  target may be left out with one pair served);
- `POST /v1/ner` (a tagger): `{"sentences": [...]}` -> `{"entities": [[...], ...]}`, each text's entities as
  `vanilla-transformer tag` writes them;
- `GET /v1/health`: each model's state (200 once all are loaded, 503 before); `GET /metrics` (with `--metrics`):
  Prometheus text format.

Each MODEL_DIR is a saved translation model or a CTranslate2 export, its language pair from its model card, or given
as MODEL_DIR:SOURCE-TARGET (codes as LibreTranslate writes them: outputs/demo:pt-BR-de); a pair no model translates
directly goes through a pivot language two models share (de -> en -> fr with a de-en and an en-fr model). A saved
tagger given as a MODEL_DIR is served at /v1/ner.

With API keys (`--api_key`, `--api-keys FILE`), every translate, detect and tagging call needs one, as the `api_key`
field of the body or the X-API-Key header; `/`, `/languages`, the health pages, `/frontend/settings` and `/spec` stay
open. Every option also reads its LibreTranslate-style variable (`--char-limit`: LT_CHAR_LIMIT; a flag given wins);
request limits per minute, hour and day live in this process or, with `--req-limit-storage redis://HOST:PORT`, in a
Redis every server shares (docs/serving.md: "Running it in LibreTranslate's place").

One batcher per model groups the sentences of concurrent requests into engine batches of at most `--max_batch_tokens`
source tokens, waiting at most `--max_wait_ms` for a batch to fill, and runs `--workers` of them at once; each
sentence keeps its own future, so a request gets back exactly its own translations. FastAPI on uvicorn (the `serve`
extra): graceful shutdown on SIGTERM (in-flight requests finish first).
"""

import argparse
import contextlib
import ipaddress
import logging
import os
import re
import sys

from ..console import int_at_least, number_between, port_number
from ..deploy.server.languages import canonical_code, served_code, split_pair
from ..deploy.server.settings import NOT_TAKEN, NOT_TAKEN_DEFAULTS, Settings
from ..loading import no_progress_bars, require
from ..model_dirs import DEVICES, ENGINES, TAGGER, default_threads, recognise, resolve_device

logger = logging.getLogger(__name__)


BIGGEST = 2**53 - 1  # counts pass through JSON (the page's charLimit) and Redis' Lua numbers: exact up to here
MOST_THREADS = 1024  # --threads and --workers at most (the engines' thread pools take a C int)
COMPUTE_TYPES = (
    "default",
    "auto",
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
    "float32",
)  # CTranslate2's
positive_count, seconds = int_at_least(1, BIGGEST), number_between(0, 1e9, lowest_allowed=False)

# Settings fields set by a flag of their own name: (name, type, help)
LIMITS = (
    ("max_batch_tokens", positive_count, "Source tokens per engine batch (sentences of concurrent requests together)."),
    (
        "max_wait_ms",
        number_between(0, 1e9),
        "How long a batch waits for more sentences after its first (default 0: "
        "it starts as soon as the engine is free; what arrives meanwhile forms "
        "the next batch); less than --request_timeout.",
    ),
    ("max_queue", positive_count, "Sentences waiting at most, per model; more is answered 503 with Retry-After."),
    (
        "max_sentences",
        positive_count,
        "Sentences per request at most (a text's lines and an HTML text's nodes each count).",
    ),
    ("max_sentence_tokens", positive_count, "Tokens per sentence at most."),
    ("max_beams", positive_count, "num_beams (and LibreTranslate's alternatives + 1) at most."),
    ("max_request_bytes", positive_count, "Request body size at most (a file sent to /translate_file too)."),
    ("request_timeout", seconds, "Seconds a request may wait (504 after)."),
    ("file_ttl", seconds, "Seconds a translated file waits for its one download."),
)


# Settings fields set by the LibreTranslate option of their name
SWITCHES = (
    "char_limit",
    "batch_limit",
    "req_limit",
    "hourly_req_limit",
    "daily_req_limit",
    "req_flood_threshold",
    "req_limit_storage",
    "trust_forwarded_for",
    "url_prefix",
    "metrics",
    "metrics_auth_token",
    "disable_web_ui",
    "disable_files_translation",
)


def build_parser() -> "Parser":
    defaults = Settings()
    parser = Parser(
        prog="vanilla-transformer serve", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_model_options(parser)
    add_access_options(parser)
    add_language_options(parser)
    add_libretranslate_limits(parser, defaults)
    add_libretranslate_switches(parser, defaults)
    for name, kind, text in LIMITS:
        parser.add_argument(f"--{name}", type=kind, default=getattr(defaults, name), help=text)
    add_http_options(parser)
    return parser


def add_model_options(parser: "Parser") -> None:
    """The models served and the engines that run them."""
    parser.add_argument(
        "model_dirs",
        nargs="+",
        metavar="MODEL_DIR",
        help="Saved translation models or directories exported by export-ctranslate2 (each as DIR or "
        "DIR:SOURCE-TARGET: de-en, pt-BR-de, en-zh-Hant), and at most one saved tagger (served at /v1/ner).",
    )
    parser.add_argument(
        "--ner",
        default=None,
        metavar="TAGGER_DIR",
        help="A saved tagger to serve at /v1/ner beside the translation models.",
    )
    parser.add_argument(
        "--engine",
        default="auto",
        choices=ENGINES["translation"],
        help="auto: CTranslate2 for an exported directory, PyTorch otherwise.",
    )
    parser.add_argument("--device", default="auto", choices=DEVICES)
    parser.add_argument(
        "--compute_type",
        default="default",
        choices=COMPUTE_TYPES,
        help="CTranslate2 only (int8, float16, ...; default: the export's).",
    )
    parser.add_argument(
        "--threads",
        type=int_at_least(0, MOST_THREADS),
        default=0,
        help="CPU threads of each translation engine, shared by its --workers (default 0: all cores).",
    )
    parser.add_argument(
        "--workers",
        type=int_at_least(0, MOST_THREADS),
        default=0,
        help="Engine batches each model runs at once, each on threads / workers threads (CTranslate2). "
        "Default 0: on a CPU one one-thread batch per thread (docs/serving.md), else 1.",
    )


def add_access_options(parser: "Parser") -> None:
    """Where the server listens and the keys a caller must give."""
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        type=host_address,
        help="Address to listen on (default: loopback only; 0.0.0.0 or :: for every interface).",
    )
    parser.add_argument("--port", type=port_number, default=5000)
    parser.add_argument(
        "--api_key",
        "--api-key",
        default=None,
        type=secret_word("the key"),
        help="A key every translate, detect and tagging call must carry, in the body or the X-API-Key "
        "header (default: $VT_API_KEY; none: no key needed unless --api-keys).",
    )
    parser.add_argument(
        "--api-keys",
        "--api_keys",
        dest="api_keys",
        default=None,
        metavar="FILE",
        type=key_file,
        help="A file of API keys, one a line, each optionally followed by its own requests per minute "
        "(instead of --req-limit); with it every call needs a key. Read again on SIGHUP (systemctl reload).",
    )


def add_language_options(parser: "Parser") -> None:
    """One model's language pair, where its card does not say it."""
    parser.add_argument(
        "--source_lang",
        default=None,
        type=language_code,
        help="One model only: its source language (default: the model card's first language, else 'src').",
    )
    parser.add_argument(
        "--target_lang",
        default=None,
        type=language_code,
        help="One model only: its target language (default: the model card's last language, else 'tgt').",
    )


def add_http_options(parser: "Parser") -> None:
    """The access log and the pages of other origins that may call."""
    parser.add_argument(
        "--access_log", action="store_true", help="Log a line for every request (default: off; /metrics counts them)."
    )
    parser.add_argument(
        "--cors", action="store_true", help="Let a page from any origin call the server (LibreTranslate's --cors)."
    )
    parser.add_argument(
        "--cors_origins",
        nargs="*",
        default=[],
        type=cors_origin,
        help="Origins a browser page may call from, each SCHEME://HOST[:PORT] (default: none, CORS "
        "off; every origin: --cors).",
    )


def add_libretranslate_limits(parser: "Parser", defaults: Settings) -> None:
    """LibreTranslate's own limits, under its names (both spellings) and defaults."""
    parser.add_argument(
        "--char-limit",
        "--char_limit",
        dest="char_limit",
        type=int_at_least(-1, BIGGEST),
        default=defaults.char_limit,
        help="Characters per text at most (LibreTranslate's; -1: none).",
    )
    parser.add_argument(
        "--batch-limit",
        "--batch_limit",
        dest="batch_limit",
        type=int_at_least(-1, BIGGEST),
        default=defaults.batch_limit,
        help="Texts in one /translate call at most (-1: none).",
    )
    parser.add_argument(
        "--req-limit",
        "--req_limit",
        dest="req_limit",
        type=int_at_least(-1, BIGGEST),
        default=defaults.req_limit,
        help="Requests per minute per client (its API key, else its address) at most; more is "
        "answered 429 with Retry-After (0 or -1: none, as in LibreTranslate).",
    )
    for flag, text in (
        ("--hourly-req-limit", "Requests per hour per client at most, besides --req-limit (0 or -1: none)."),
        ("--daily-req-limit", "Requests per day per client at most, besides --req-limit (0 or -1: none)."),
        (
            "--req-flood-threshold",
            "429s a client address may get before it is refused 403 (until "
            "10 minutes pass without one; 0 or -1: never).",
        ),
    ):
        name = flag[2:].replace("-", "_")
        parser.add_argument(
            flag,
            flag.replace("-", "_").replace("__", "--"),
            dest=name,
            type=int_at_least(-1, BIGGEST),
            default=getattr(defaults, name),
            help=text,
        )
    parser.add_argument(
        "--req-limit-storage",
        "--req_limit_storage",
        dest="req_limit_storage",
        default=defaults.req_limit_storage,
        metavar="URI",
        help="Where the request counts live: memory:// (this process) or redis://HOST:PORT, shared by "
        "every server naming it and kept across restarts.",
    )


def add_libretranslate_switches(parser: "Parser", defaults: Settings) -> None:
    """LibreTranslate's own switches (a proxy in front, a URL prefix, metrics, parts turned off), under its names
    (both spellings) and defaults."""
    parser.add_argument(
        "--trust-forwarded-for",
        "--trust_forwarded_for",
        dest="trust_forwarded_for",
        action="store_true",
        help="Behind a proxy: the client is the address the proxy adds, the LAST one of "
        "X-Forwarded-For (nginx: proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for); "
        "what the client wrote before it is never believed; a translated file's URL takes the "
        "scheme of the last X-Forwarded-Proto hop (http or https). Without it no header "
        "(X-Forwarded-For, X-Real-IP, Forwarded) changes who the client is.",
    )
    parser.add_argument(
        "--allowed-hosts",
        "--allowed_hosts",
        dest="allowed_hosts",
        nargs="*",
        default=[],
        type=allowed_host,
        metavar="HOST",
        help="Host names (or addresses) the Host header may name, any port; * any. Default: on a "
        "loopback --host, localhost, 127.0.0.1 and [::1] only (besides those named here), else "
        "any.",
    )
    parser.add_argument(
        "--url-prefix",
        "--url_prefix",
        dest="url_prefix",
        default=defaults.url_prefix,
        type=url_prefix,
        help="Serve every route under this path (/translate as PREFIX/translate; / redirects there).",
    )
    parser.add_argument("--metrics", action="store_true", help="Serve Prometheus metrics at /metrics (default: off).")
    parser.add_argument(
        "--metrics-auth-token",
        "--metrics_auth_token",
        dest="metrics_auth_token",
        default=None,
        type=secret_word("the token"),
        help="/metrics only for requests with `Authorization: Bearer TOKEN`.",
    )
    parser.add_argument(
        "--disable-web-ui",
        "--disable_web_ui",
        dest="disable_web_ui",
        action="store_true",
        help="No translation page at /.",
    )
    parser.add_argument(
        "--disable-files-translation",
        "--disable_files_translation",
        dest="disable_files_translation",
        action="store_true",
        help="Refuse /translate_file and /download_file (403).",
    )


UNSET = object()  # an option not given on the command line
SECRETS = ("api_key", "metrics_auth_token", "req_limit_storage")  # values no error line shows (a Redis URL's password)
VARIABLES = {"api_key": ("LT_API_KEY", "VT_API_KEY")}  # an option's variables, first set wins (else LT_ + its name)


def parse_args(argv=None, environ=None) -> argparse.Namespace:
    """The command line, each option not given from its LT_* variable in `environ` (default: os.environ) where set,
    else its default. Every value is checked where it enters, through the same type whichever way it came; an error
    names the flag, or the variable, that the user set (`args.named`: option -> that name)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    environ = os.environ if environ is None else environ
    refuse_not_taken(argv, environ)
    parser = build_parser()
    actions = [action for action in parser.options if action.option_strings and action.dest != "help"]
    kinds = {action.dest: (action.type, action.default) for action in actions}
    for action in actions:  # parsed as given (a string, a list of them, or True), checked below
        action.type, action.default = None, UNSET
    args = parser.parse_intermixed_args(argv)  # model directories before, between or after the options
    args.named = {}
    for action in actions:
        kind, default = kinds[action.dest]
        if getattr(args, action.dest) is not UNSET:
            name, raw = action.option_strings[0], getattr(args, action.dest)
        else:
            name = next((variable for variable in variables(action.dest) if variable in environ), None)
            raw = environ[name] if name else None
        args.named[action.dest] = name or action.option_strings[0]
        if name is None:
            setattr(args, action.dest, default)
            continue
        setattr(args, action.dest, option_value(action, kind, name, raw))
    check_together(args)
    return args


def variables(dest: str) -> tuple[str, ...]:
    return VARIABLES.get(dest, ("LT_" + dest.upper(),))


def named(args, dest: str) -> str:
    """How the user set option `dest`: its flag or its variable (the flag where it was not set)."""
    return getattr(args, "named", {}).get(dest, f"--{dest}")


def option_value(action, kind, name: str, raw):
    """The value of `action` given as `raw` through `name` (a flag: as typed; a variable: its text, stripped), or a
    ValueError naming `name` (and the value, unless a secret)."""
    from_variable = not name.startswith("-")
    if action.nargs == 0:  # a switch
        if from_variable and raw.strip().lower() not in ENV_TRUE + ENV_FALSE:
            raise ValueError(f"{name}={raw!r}: expected true or false")
        return not from_variable or raw.strip().lower() in ENV_TRUE
    if action.nargs == "*":  # a variable: its words, separated by commas or spaces
        texts = raw.replace(",", " ").split() if from_variable else raw
        return [option_value(argparse.Action([], action.dest), kind, name, text) for text in texts]
    if not isinstance(raw, str):  # (argparse reads `--flag=--` as its end-of-options mark: no value)
        raise ValueError(f"{name}: expected a value")
    text = raw.strip() if from_variable else raw
    shown = "" if action.dest in SECRETS else f"={text!r}" if from_variable else f" {text!r}"
    try:
        value = kind(text) if kind else text
    except (TypeError, ValueError, argparse.ArgumentTypeError) as error:
        raise ValueError(f"{name}{shown}: {error}") from None
    if action.choices is not None and value not in action.choices:
        raise ValueError(f"{name}{shown}: expected one of {', '.join(map(str, action.choices))}")
    return value


def check_together(args) -> None:
    """What two options must agree on, each named as the user set it."""
    if args.source_lang is not None and args.source_lang == args.target_lang:
        raise ValueError(
            f"{named(args, 'source_lang')} and {named(args, 'target_lang')} name one language "
            f"({args.source_lang}): a model translates between two"
        )
    if args.max_wait_ms >= args.request_timeout * 1000:
        raise ValueError(
            f"{named(args, 'max_wait_ms')} ({args.max_wait_ms:g} ms) must be less than "
            f"{named(args, 'request_timeout')} ({args.request_timeout:g} s): every request would time out"
        )


def refuse_not_taken(argv: list[str], environ) -> None:
    """LibreTranslate's options not taken here, refused by name: as a flag, or as a variable set to anything but
    LibreTranslate's default or false (a LT_REQUIRE_API_KEY_SECRET ignored would let in whom LibreTranslate keeps
    out)."""
    for given in argv:
        flag = given.split("=", 1)[0]
        if flag in NOT_TAKEN:
            raise ValueError(f"{flag} is LibreTranslate's and not taken here: {NOT_TAKEN[flag]}")
    for flag, reason in NOT_TAKEN.items():
        variable = "LT_" + flag[2:].upper().replace("-", "_")
        value = environ.get(variable, "").strip()
        if value.lower() not in ENV_FALSE and value != NOT_TAKEN_DEFAULTS.get(flag):
            raise ValueError(f"{variable} is LibreTranslate's {flag}, not taken here: {reason} (unset it)")


class Parser(argparse.ArgumentParser):
    """An argument parser that keeps the options it was given (`options`), for their variables."""

    def add_argument(self, *args, **kwargs):
        action = super().add_argument(*args, **kwargs)
        self.__dict__.setdefault("options", []).append(action)
        return action


# a switch's values as an environment variable (LT_METRICS=true) or LibreTranslate's --api-keys gives them
ENV_TRUE, ENV_FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def host_address(text: str) -> str:
    """--host: an IP address (0.0.0.0 or :: for every interface, said so) or a host name. Empty or blank is refused
    (uvicorn would listen on every interface), and so is a number in any other form ("0", "127.1", "0x7f.0.0.1":
    the resolver reads them as addresses, "0" as every interface). An address is taken only as Python writes it
    (`::`, not `::0` or `0:0::0`), and never IPv4-mapped (`::ffff:0.0.0.0`): a spelling hides what it listens on."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty: give the address to listen on (0.0.0.0 or :: for every interface)")
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        address = None
    if address is not None and getattr(address, "ipv4_mapped", None) is not None:
        raise argparse.ArgumentTypeError(f"an IPv4-mapped IPv6 address: give the IPv4 one, {address.ipv4_mapped}")
    if address is not None:
        if str(address) != text:
            raise argparse.ArgumentTypeError(f"write the address as {address} (its one canonical form)")
        return text
    labels = (text[:-1] if text.endswith(".") else text).split(".")
    if (
        len(text) > 253
        or not all(re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?", label) for label in labels)
        or re.fullmatch(r"[0-9]+|0[xX][0-9A-Fa-f]*", labels[-1])
    ):
        raise argparse.ArgumentTypeError(
            "expected an IP address (127.0.0.1, ::1, an IPv6 one without brackets) or a host name"
        )
    return text


def allowed_host(text: str) -> str:
    """--allowed-hosts: one host name or address, without a port, as the Host header's host (lower case, an IPv6
    address in brackets), or * (any)."""
    if text.strip() == "*":
        return "*"
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    host = host_address(bare).lower()
    return f"[{host}]" if ":" in host else host


def allowed_hosts(args) -> tuple:
    """The Host names the server answers to: those of --allowed-hosts, plus the loopback names on a loopback --host
    (a page of another site whose name points at 127.0.0.1 is refused: DNS rebinding); none (any) where it listens
    on other addresses and no name is given, or where * is."""
    if "*" in args.allowed_hosts:
        return ()
    try:
        loopback = ipaddress.ip_address(args.host).is_loopback
    except ValueError:  # a host name
        loopback = args.host.lower().rstrip(".") == "localhost"
    return tuple(dict.fromkeys([*(("localhost", "127.0.0.1", "[::1]") if loopback else ()), *args.allowed_hosts]))


def secret_word(what: str):
    """An argparse type for a key or token: printable ASCII without spaces (it travels in an HTTP header), at most
    1,000 characters. Empty or blank is refused, never read as "none" (that would let every client in); the value is
    never part of the message."""

    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"empty: give {what} (leave the option out for none)")
        if not re.fullmatch(r"[!-~]{1,1000}", text):
            raise argparse.ArgumentTypeError(
                f"{what} must be 1-1000 printable ASCII characters without spaces (it travels in an HTTP header)"
            )
        return text

    parse.__name__ = "secret"
    return parse


def key_file(text: str) -> str | None:
    """--api-keys: the key file's path; LibreTranslate's switch values where no such file exists (`false`: no keys,
    `true`: refused, its key database is not read). An empty path (an unset shell variable) is refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; give the key file (one key a line)")
    if text.strip().lower() in ENV_TRUE + ENV_FALSE and not os.path.exists(text):
        if text.strip().lower() in ENV_TRUE:
            raise argparse.ArgumentTypeError(
                "give the key file (one key a line); LibreTranslate's key database is not read"
            )
        return None
    return text


def language_code(text: str) -> str:
    """--source_lang / --target_lang: a language code as LibreTranslate writes them (`languages.LANGUAGE_CODE`: de,
    pt-BR, zh-Hant), in any case, served as BCP 47 writes it (pt-br: pt-BR); "auto" is LibreTranslate's request for
    detection, not a language."""
    if text.lower() == "auto":
        raise argparse.ArgumentTypeError("'auto' asks for language detection; name the model's language")
    code = canonical_code(text)
    if code is None:
        raise argparse.ArgumentTypeError(
            "expected a language code: a language of 2-3 letters, then a script of 4 letters and/or a region of 2 "
            "letters or 3 digits, joined by - (de, pt-BR, zh-Hant, es-419)"
        )
    return code


def cors_origin(text: str) -> str:
    """--cors_origins: one origin, SCHEME://HOST[:PORT] as a browser sends it (lower case, no default port); every
    origin (*) only through --cors, never a pattern or "null" (the origin of sandboxed pages and files)."""
    if text.strip() == "*":
        raise argparse.ArgumentTypeError("'*' (every origin) is --cors; name the origins here")
    match = re.fullmatch(r"(https?)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::([0-9]{1,5}))?", text, re.IGNORECASE)
    if match is None:
        raise argparse.ArgumentTypeError(
            "expected an origin, http(s)://HOST[:PORT], without a path (as https://example.com)"
        )
    scheme, host, port = match.groups()
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise argparse.ArgumentTypeError("not an IPv6 address in brackets") from None
    elif not all(re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?", label) for label in host.split(".")):
        raise argparse.ArgumentTypeError("expected an origin's host name or address")
    if port is not None and not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError("a port is 1-65535")
    default_port = {"http": "80", "https": "443"}[scheme.lower()]
    return f"{scheme}://{host}".lower() + (f":{int(port)}" if port and str(int(port)) != default_port else "")


def url_prefix(prefix: str) -> str:
    """LibreTranslate's `--url-prefix`: `/PATH` (a leading / added, a trailing one dropped); "" or "/": none. Each
    segment is letters, digits and . _ ~ -, none of dots only (/.. would send / above the server's root)."""
    prefix = "/" + prefix.strip().strip("/") if prefix.strip().strip("/") else ""
    if (
        not re.fullmatch(r"(/[A-Za-z0-9._~-]+)*", prefix)
        or len(prefix) > 200
        or any(set(segment) == {"."} for segment in prefix.split("/")[1:])
    ):
        raise argparse.ArgumentTypeError(
            "expected a path of letters, digits and . _ ~ - (as /translator), no segment of dots only"
        )
    return prefix


def default_workers(pytorch: bool, device: str, threads: int) -> int:
    """`--workers 0`: CTranslate2 on a CPU runs one one-thread batch per thread (as `translate` does; the comparison
    with one batch of all threads: docs/serving.md); PyTorch and GPUs one batch at a time."""
    if pytorch or resolve_device(device, "ctranslate2") != "cpu":
        return 1
    return threads or default_threads()


def model_and_pair(text: str) -> tuple[str, tuple[str, str] | None]:
    """MODEL_DIR or MODEL_DIR:SOURCE-TARGET: a path that exists as written is a path (colon or not); else what follows
    the last colon, where it is two language codes (`languages.split_pair`: pt-BR-de is pt-BR -> de), is the pair
    of the model before it. Neither a path nor a pair, where the part before the colon exists: an error."""
    model_dir, colon, pair = text.rpartition(":")
    if not colon or not model_dir or os.path.exists(text):
        return text, None
    try:
        codes = split_pair(pair)
    except ValueError as error:
        raise ValueError(f"MODEL_DIR:SOURCE-TARGET {text!r}: {error}") from None
    if codes is None and os.path.exists(model_dir):
        raise ValueError(
            f"MODEL_DIR:SOURCE-TARGET {text!r}: no such path, and {pair!r} is not two language codes joined by - "
            "(de-en, pt-BR-de, en-zh-Hant)"
        )
    return (text, None) if codes is None else (model_dir, codes)


def served_models(args):
    """(translation engines, tagger engine or None, Settings) for the parsed command line, checked before anything
    loads: a wrong path, two models for one pair, a bad key file are errors now, not a failed /health later. Each
    pair: MODEL_DIR:SOURCE-TARGET, else (one model) the flags, else the model card's (a saved model's or an
    export's), else src -> tgt."""
    for module in ("fastapi", "uvicorn", "prometheus_client"):
        require(module, "serve")
    from ..deploy.engines import TaggerEngine, TranslationEngine
    from ..deploy.server.access import check_storage_uri, ping
    from ..deploy.server.languages import Pairs

    with named_as_set(args, "req_limit_storage", "--req-limit-storage"):
        check_storage_uri(args.req_limit_storage)
    given = [(recognise_tagger(args), None)] if args.ner is not None else []
    given += [(recognise(path, args.engine), pair) for path, pair in map(model_and_pair, args.model_dirs)]
    taggers = [found for found, _ in given if found.task == "tagging"]  # recognised once, passed on as they are
    if len(taggers) > 1:
        raise ValueError(f"one tagger per server: {', '.join(found.path for found in taggers)} are all taggers.")
    given = [(found, pair) for found, pair in given if found.task == "translation"]
    if (args.source_lang or args.target_lang) and len(given) > 1:
        raise ValueError(
            f"{named(args, 'source_lang')} / {named(args, 'target_lang')} name one model's pair; with "
            "several, give each as MODEL_DIR:SOURCE-TARGET."
        )
    if args.compute_type != "default" and given and all(found.engine == "pytorch" for found, _ in given):
        raise ValueError(
            f"{named(args, 'compute_type')} {args.compute_type!r}: the compute type is CTranslate2's (an "
            "exported directory, or --engine ctranslate2); the PyTorch engine runs the saved weights"
        )
    translators = []
    for found, pair in given:
        pytorch = found.engine == "pytorch"
        if args.workers > 1 and pytorch:
            raise ValueError(
                f"{named(args, 'workers')}: several batches at once need the CTranslate2 engine (an "
                "exported directory, or --engine ctranslate2); the PyTorch engine runs one."
            )
        workers = args.workers or default_workers(pytorch, args.device, args.threads)
        source, target = pair or (args.source_lang, args.target_lang)
        if not (source and target):  # the model card only where a language is not given (pt-br served as pt-BR)
            card_source, card_target = map(served_code, found.languages or ("src", "tgt"))
            source, target = source or card_source, target or card_target
        translators.append(
            TranslationEngine(found, source, target, args.device, args.compute_type, args.threads, workers)
        )
    Pairs(translators)  # two models for one pair: an error line now
    if len({engine.source for engine in translators}) > 1:
        require("lingua", "serve")  # source "auto" and /detect choose between them
    tagger = TaggerEngine(taggers[0], args.device) if taggers else None
    settings = Settings(**limits(args))
    with named_as_set(args, "req_limit_storage", "--req-limit-storage"):
        ping(settings.req_limit_storage)  # a Redis that cannot be reached: an error line now
    return translators, tagger, settings


def recognise_tagger(args):
    """The `--ner` directory, recognised as a tagger's (an ONNX export or a saved one), or an error line naming the
    flag or variable that gave it."""
    try:
        return recognise(args.ner, task="tagging")
    except (FileNotFoundError, ValueError):
        raise ValueError(
            f"{named(args, 'ner')} {args.ner!r} is not a saved tagger ({TAGGER}: a config.json naming it)."
        ) from None


@contextlib.contextmanager
def named_as_set(args, dest: str, flag: str):
    """An error of the code inside that names `flag` names instead the variable the value came from, if it did."""
    try:
        yield
    except (ValueError, OSError) as error:
        if named(args, dest) == flag or not str(error).startswith(flag):
            raise
        raise type(error)(named(args, dest) + str(error)[len(flag) :]) from None


def main(argv=None) -> int:
    args = parse_args(argv)
    return listen(args, *served_models(args))


def limits(args) -> dict:
    """The Settings fields every server takes from the command line."""
    from ..deploy.server.access import read_api_keys

    try:  # (the file's problems are named by its path and line, never by a key)
        keys = read_api_keys(args.api_keys) if args.api_keys is not None else {}
    except ValueError as error:
        raise ValueError(f"{named(args, 'api_keys')}: {error}") from None
    except OSError as error:
        raise OSError(f"{named(args, 'api_keys')}: {error}") from None
    if args.api_key is not None:  # (an empty one is refused where it enters: it is never "no key")
        keys.setdefault(args.api_key, None)
    return dict(
        api_keys=keys,
        api_keys_file=args.api_keys or "",  # (re-read on SIGHUP)
        fixed_api_key=args.api_key or "",
        cors_origins=("*",) if args.cors else tuple(args.cors_origins),
        allowed_hosts=allowed_hosts(args),
        **{name: getattr(args, name) for name in SWITCHES if name != "metrics_auth_token"},
        **{name: getattr(args, name) for name, *_ in LIMITS},
        metrics_auth_token=args.metrics_auth_token or "",
    )


def listen(args, translators, tagger, settings) -> int:
    """Load the models (`engines.TranslationEngine`, `engines.TaggerEngine`), then serve them until SIGTERM /
    Ctrl-C."""
    import uvicorn

    from ..deploy.server.app import create_app
    from ..deploy.server.libretranslate import RedactedKeys

    no_progress_bars()
    for served in [*translators, *([tagger] if tagger else [])]:
        try:
            served.open()  # before listening: a model that cannot load is an error line, not a server answering 503
        except (OSError, ValueError) as error:
            raise OSError(f"could not load the model in {served.model_dir}: {error}") from error
    app = create_app(translators, settings, tagger)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("uvicorn.access").addFilter(RedactedKeys())  # (a key sent in a query string: never logged)
    served = [
        f"{engine.model_dir} ({engine.source} -> {engine.target}, {engine.workers} engine batch(es) at once)"
        for engine in translators
    ]
    served += [f"the tagger {tagger.model_dir} at /v1/ner"] if tagger else []
    logger.info(
        "serving %s on http://%s:%d%s",
        " and ".join(served),
        args.host,
        args.port,
        " with API keys" if settings.api_keys else "",
    )
    # uvicorn reads no proxy header (its default trusts X-Forwarded-For and X-Forwarded-Proto from loopback peers, so
    # a local client could pick its own address): who the client is, is `dispatch.client_address`'s rule alone.
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level="info",
        access_log=args.access_log,
        timeout_graceful_shutdown=settings.request_timeout,
        proxy_headers=False,
    )
    return 0
