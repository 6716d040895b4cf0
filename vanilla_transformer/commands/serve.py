"""`vanilla-transformer serve MODEL_DIR [MODEL_DIR ...] [--ner TAGGER_DIR]`: translation models (one per language
pair) and/or a tagger behind HTTP, with dynamic batching.

Endpoints:
- LibreTranslate's API, so its clients work unchanged: `POST /translate` (`q`, `source` or "auto", `target`, `format`
  "text" or "html", `alternatives`), `POST /detect`, `GET /languages`, `POST /translate_file` (.txt, .html, .docx,
  .pptx, .odt, .odp, .epub, .srt) + `GET /download_file/..`, `GET /frontend/settings`, `GET /spec`, `POST /suggest`
  (disabled: 403), `GET /health` (`{"status": "ok"}`), and a translation page at `GET /` (`--disable-web-ui`);
- `POST /v1/translate`: `{"sentences": [...], "source", "target", "num_beams": null, "num_return_sequences": 1,
  "max_new_tokens": null}` (null: as the model's generation config says) -> `{"translations": [...]}` (source and
  target may be left out with one pair served);
- `POST /v1/ner` (a tagger): `{"sentences": [...]}` -> `{"entities": [[...], ...]}`, each text's entities as
  `vanilla-transformer tag` writes them;
- `GET /v1/health`: each model's state (200 once all are loaded, 503 before); `GET /metrics` (with `--metrics`):
  Prometheus text format.

Each MODEL_DIR is a saved translation model or a CTranslate2 export, its language pair from its model card, or given
as MODEL_DIR:SOURCE-TARGET; a pair no model translates directly goes through a pivot language two models share
(de -> en -> fr with a de-en and an en-fr model). A saved tagger given as a MODEL_DIR is served at /v1/ner.

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
import logging
import os
import re
import sys

from ..console import int_at_least, non_negative_int, port_number, positive_int
from ..deploy.settings import Settings
from ..loading import no_progress_bars, require
from ..model_card import card_languages
from ..model_dirs import (
    DEVICES,
    ENGINES,
    TAGGER,
    ModelDir,
    default_threads,
    is_tagger_dir,
    recognise,
    resolve_device,
    resolve_engine,
)

logger = logging.getLogger(__name__)


# Settings fields set by a flag of their own name: (name, type, help)
LIMITS = (
    ("max_batch_tokens", positive_int, "Source tokens per engine batch (sentences of concurrent requests together)."),
    ("max_wait_ms", float, "How long a batch waits for more sentences after its first (default 0: it starts as soon "
                           "as the engine is free; what arrives meanwhile forms the next batch)."),
    ("max_queue", positive_int, "Sentences waiting at most, per model; more is answered 503 with Retry-After."),
    ("max_sentences", positive_int, "Sentences per request at most (a text's lines and an HTML text's nodes each "
                                    "count)."),
    ("max_sentence_tokens", positive_int, "Tokens per sentence at most."),
    ("max_beams", positive_int, "num_beams (and LibreTranslate's alternatives + 1) at most."),
    ("max_request_bytes", positive_int, "Request body size at most (a file sent to /translate_file too)."),
    ("request_timeout", float, "Seconds a request may wait (504 after)."),
    ("file_ttl", float, "Seconds a translated file waits for its one download."),
)


# Settings fields set by the LibreTranslate option of their name
SWITCHES = ("char_limit", "batch_limit", "req_limit", "hourly_req_limit", "daily_req_limit", "req_flood_threshold",
            "req_limit_storage", "trust_forwarded_for", "url_prefix", "metrics", "metrics_auth_token", "disable_web_ui",
            "disable_files_translation")


# LibreTranslate's options this server does not take, each refused by name with the reason
NOT_TAKEN = {
    "--load-only": "the server serves the models it is given",
    "--update-models": "models are the directories given",
    "--force-update-models": "models are the directories given",
    "--frontend-language-source": "the page starts with the first served pair",
    "--frontend-language-target": "the page starts with the first served pair",
    "--frontend-language": "the page is in English",
    "--frontend-title": "the page's title is fixed",
    "--frontend-timeout": "the page waits 500 ms after typing",
    "--suggestions": "suggestions are always off",
    "--ssl": "put TLS in the proxy in front",
    "--debug": "set VT_DEBUG=1 for traces",
    "--hide-api": "the API is the product",
    "--api-keys-db-path": "give the keys as --api-keys FILE",
    "--api-keys-remote": "give the keys as --api-keys FILE",
    "--get-api-key-link": "not supported",
    "--require-api-key-origin": "not supported",
    "--require-api-key-secret": "not supported",
    "--require-api-key-fingerprint": "not supported",
    "--under-attack": "use --req-limit and --req-flood-threshold",
    "--shared-storage": "give --req-limit-storage redis://HOST:PORT",
    "--secondary": "every server sharing a Redis is the same",
    "--alternatives-limit": "alternatives are bounded by --max_beams",
    "--hourly-req-limit-decay": "not supported",
    "--req-time-cost": "not supported",
    "--translation-cache": "not supported",
}


def build_parser() -> "Parser":
    defaults = Settings()
    parser = Parser(prog="vanilla-transformer serve", description=__doc__,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dirs", nargs="+", metavar="MODEL_DIR",
                        help="Saved translation models or directories exported by export-ctranslate2 (each as DIR or "
                             "DIR:SOURCE-TARGET), and at most one saved tagger (served at /v1/ner).")
    parser.add_argument("--ner", default=None, metavar="TAGGER_DIR",
                        help="A saved tagger to serve at /v1/ner beside the translation models.")
    parser.add_argument("--engine", default="auto", choices=ENGINES["translation"],
                        help="auto: CTranslate2 for an exported directory, PyTorch otherwise.")
    parser.add_argument("--device", default="auto", choices=DEVICES)
    parser.add_argument("--compute_type", default="default", help="CTranslate2 only (int8, float16, ...).")
    parser.add_argument("--threads", type=non_negative_int, default=0,
                        help="CPU threads of each translation engine, shared by its --workers (default 0: all cores).")
    parser.add_argument("--workers", type=non_negative_int, default=0,
                        help="Engine batches each model runs at once, each on threads / workers threads (CTranslate2). "
                             "Default 0: on a CPU one one-thread batch per thread (docs/serving.md), else 1.")
    parser.add_argument("--host", default="127.0.0.1", help="Address to listen on (default: loopback only).")
    parser.add_argument("--port", type=port_number, default=5000)
    parser.add_argument("--api_key", default=os.environ.get("VT_API_KEY"),
                        help="A key every translate, detect and tagging call must carry, in the body or the X-API-Key "
                             "header (default: $VT_API_KEY; none: no key needed unless --api-keys).")
    parser.add_argument("--api-keys", "--api_keys", dest="api_keys", default=None, metavar="FILE",
                        help="A file of API keys, one a line, each optionally followed by its own requests per minute "
                             "(instead of --req-limit); with it every call needs a key.")
    parser.add_argument("--source_lang", default=None, help="One model only: its source language (default: the "
                                                             "model card's first language, else 'src').")
    parser.add_argument("--target_lang", default=None, help="One model only: its target language (default: the "
                                                             "model card's last language, else 'tgt').")
    parser.add_argument("--char-limit", "--char_limit", dest="char_limit", type=int_at_least(-1),
                        default=defaults.char_limit, help="Characters per text at most (LibreTranslate's; -1: none).")
    parser.add_argument("--batch-limit", "--batch_limit", dest="batch_limit", type=int_at_least(-1),
                        default=defaults.batch_limit, help="Texts in one /translate call at most (-1: none).")
    parser.add_argument("--req-limit", "--req_limit", dest="req_limit", type=int_at_least(-1),
                        default=defaults.req_limit,
                        help="Requests per minute per client (its API key, else its address) at most; more is "
                             "answered 429 with Retry-After (-1: none).")
    for flag, text in (("--hourly-req-limit", "Requests per hour per client at most, besides --req-limit (-1: none)."),
                       ("--daily-req-limit", "Requests per day per client at most, besides --req-limit (-1: none)."),
                       ("--req-flood-threshold", "429s a client address may get before it is refused 403 (until "
                                                 "10 minutes pass without one; -1: never).")):
        name = flag[2:].replace("-", "_")
        parser.add_argument(flag, flag.replace("-", "_").replace("__", "--"), dest=name, type=int_at_least(-1),
                            default=getattr(defaults, name), help=text)
    parser.add_argument("--req-limit-storage", "--req_limit_storage", dest="req_limit_storage",
                        default=defaults.req_limit_storage, metavar="URI",
                        help="Where the request counts live: memory:// (this process) or redis://HOST:PORT, shared by "
                             "every server naming it and kept across restarts.")
    parser.add_argument("--trust-forwarded-for", "--trust_forwarded_for", dest="trust_forwarded_for",
                        action="store_true", help="Behind a proxy: the client is the first address of "
                                                  "X-Forwarded-For (read only then).")
    parser.add_argument("--url-prefix", "--url_prefix", dest="url_prefix", default=defaults.url_prefix,
                        help="Serve every route under this path (/translate as PREFIX/translate; / redirects there).")
    parser.add_argument("--metrics", action="store_true", help="Serve Prometheus metrics at /metrics (default: off).")
    parser.add_argument("--metrics-auth-token", "--metrics_auth_token", dest="metrics_auth_token",
                        default=defaults.metrics_auth_token,
                        help="/metrics only for requests with `Authorization: Bearer TOKEN`.")
    parser.add_argument("--disable-web-ui", "--disable_web_ui", dest="disable_web_ui", action="store_true",
                        help="No translation page at /.")
    parser.add_argument("--disable-files-translation", "--disable_files_translation",
                        dest="disable_files_translation", action="store_true",
                        help="Refuse /translate_file and /download_file (403).")
    for name, kind, text in LIMITS:
        parser.add_argument(f"--{name}", type=kind, default=getattr(defaults, name), help=text)
    parser.add_argument("--access_log", action="store_true",
                        help="Log a line for every request (default: off; /metrics counts them).")
    parser.add_argument("--cors", action="store_true", help="Let a page from any origin call the server "
                                                            "(LibreTranslate's --cors).")
    parser.add_argument("--cors_origins", nargs="*", default=[],
                        help="Origins a browser page may call from (default: none, CORS off).")
    return parser


def parse_args(argv=None, environ=None) -> argparse.Namespace:
    """The command line, each option's default from its LT_* variable in `environ` (default: os.environ) where set."""
    for given in argv if argv is not None else sys.argv[1:]:
        if given.split("=", 1)[0] in NOT_TAKEN:
            flag = given.split("=", 1)[0]
            raise ValueError(f"{flag} is LibreTranslate's and not taken here: {NOT_TAKEN[flag]}")
    parser = build_parser()
    environment_defaults(parser, os.environ if environ is None else environ)
    args = parser.parse_intermixed_args(argv)  # model directories before, between or after the options
    args.url_prefix = url_prefix(args.url_prefix)
    if not args.max_wait_ms >= 0:  # (NaN fails each of these)
        parser.error(f"--max_wait_ms must be >= 0, got {args.max_wait_ms}")
    for flag, value in (("--request_timeout", args.request_timeout), ("--file_ttl", args.file_ttl)):
        if not 0 < value < 1e9:
            parser.error(f"{flag} must be > 0 (and finite), got {value}")
    return args


class Parser(argparse.ArgumentParser):
    """An argument parser that keeps the options it was given (`options`), for their variables."""

    def add_argument(self, *args, **kwargs):
        action = super().add_argument(*args, **kwargs)
        self.__dict__.setdefault("options", []).append(action)
        return action


TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def environment_defaults(parser: "Parser", environ) -> None:
    """Every option's default from its LibreTranslate-style variable where set (`--char-limit`: LT_CHAR_LIMIT,
    `--max_queue`: LT_MAX_QUEUE), so a LibreTranslate deployment's environment configures the server; a flag given
    wins. A value the option would refuse is an error naming the variable."""
    for action in parser.options:
        variable = "LT_" + action.dest.upper()
        if variable not in environ or not action.option_strings or action.dest == "help":
            continue
        value = environ[variable].strip()
        if action.nargs == 0:  # a switch
            if value.lower() not in TRUE + FALSE:
                raise ValueError(f"{variable}={value!r}: expected true or false")
            action.default = value.lower() in TRUE
        elif action.nargs == "*":
            action.default = value.replace(",", " ").split()
        else:
            try:
                action.default = action.type(value) if action.type else value
            except (TypeError, ValueError, argparse.ArgumentTypeError) as error:
                raise ValueError(f"{variable}={value!r}: {error}") from None
            if action.choices is not None and action.default not in action.choices:
                raise ValueError(f"{variable}={value!r}: expected one of {', '.join(map(str, action.choices))}")


def url_prefix(prefix: str) -> str:
    """LibreTranslate's `--url-prefix`: `/PATH` (a leading / added, a trailing one dropped); "" or "/": none."""
    prefix = "/" + prefix.strip().strip("/") if prefix.strip().strip("/") else ""
    if not re.fullmatch(r"(/[A-Za-z0-9._~-]+)*", prefix):
        raise ValueError(f"--url-prefix {prefix!r}: expected a path of letters, digits and . _ ~ - (as /translator)")
    return prefix


def default_workers(pytorch: bool, device: str, threads: int) -> int:
    """`--workers 0`: CTranslate2 on a CPU runs one one-thread batch per thread (as `translate` does; the comparison
    with one batch of all threads: docs/serving.md); PyTorch and GPUs one batch at a time."""
    if pytorch or resolve_device(device, "ctranslate2") != "cpu":
        return 1
    return threads or default_threads()


PAIR = re.compile(r"(.+):([A-Za-z0-9_]+)-([A-Za-z0-9_]+)")


def model_and_pair(text: str) -> tuple[str, tuple[str, str] | None]:
    """MODEL_DIR or MODEL_DIR:SOURCE-TARGET (a path that exists as written is a path, colon or not)."""
    match = PAIR.fullmatch(text)
    if match is None or os.path.exists(text):
        return text, None
    return match.group(1), (match.group(2), match.group(3))


def served_models(args):
    """(translation engines, tagger engine or None, Settings) for the parsed command line, checked before anything
    loads: a wrong path, two models for one pair, a bad key file are errors now, not a failed /health later. Each
    pair: MODEL_DIR:SOURCE-TARGET, else (one model) the flags, else the model card's (a saved model's or an
    export's), else src -> tgt."""
    for module in ("fastapi", "uvicorn", "prometheus_client"):
        require(module, "serve")
    from ..deploy.access import check_storage_uri, ping
    from ..deploy.engines import TaggerEngine, TranslationEngine
    from ..deploy.languages import Pairs

    check_storage_uri(args.req_limit_storage)
    if args.ner is not None and not is_tagger_dir(args.ner):
        raise ValueError(f"--ner {args.ner!r} is not a saved tagger ({TAGGER}: a config.json naming it).")
    given = [(recognise(path, args.engine), pair) for path, pair in map(model_and_pair, args.model_dirs)]
    given += [(ModelDir(args.ner, "tagging", resolve_engine(args.ner, "auto", "tagging")), None)] if args.ner else []
    taggers = [found for found, _ in given if found.task == "tagging"]  # recognised once, passed on as they are
    if len(taggers) > 1:
        raise ValueError(f"one tagger per server: {', '.join(found.path for found in taggers)} are all taggers.")
    given = [(found, pair) for found, pair in given if found.task == "translation"]
    if (args.source_lang or args.target_lang) and len(given) > 1:
        raise ValueError("--source_lang / --target_lang name one model's pair; with several, give each as "
                         "MODEL_DIR:SOURCE-TARGET.")
    translators = []
    for found, pair in given:
        pytorch = found.engine == "pytorch"
        if args.workers > 1 and pytorch:
            raise ValueError("--workers: several batches at once need the CTranslate2 engine (an exported directory, "
                             "or --engine ctranslate2); the PyTorch engine runs one.")
        workers = args.workers or default_workers(pytorch, args.device, args.threads)
        source, target = pair or (args.source_lang, args.target_lang)
        if not (source and target):  # the model card only where a language is not given
            card_source, card_target = card_languages(found.path) or ("src", "tgt")
            source, target = source or card_source, target or card_target
        translators.append(TranslationEngine(found, source, target, args.device, args.compute_type, args.threads,
                                             workers))
    Pairs(translators)  # two models for one pair: an error line now
    if len({engine.source for engine in translators}) > 1:
        require("lingua", "serve")  # source "auto" and /detect choose between them
    tagger = TaggerEngine(taggers[0], args.device) if taggers else None
    settings = Settings(**limits(args))
    ping(settings.req_limit_storage)  # a Redis that cannot be reached: an error line now
    return translators, tagger, settings


def main(argv=None) -> int:
    args = parse_args(argv)
    return listen(args, *served_models(args))


def limits(args) -> dict:
    """The Settings fields every server takes from the command line."""
    from ..deploy.access import read_api_keys

    given = args.api_keys
    if given is not None and given.strip() and given.strip().lower() in TRUE + FALSE and not os.path.exists(given):
        if given.strip().lower() in TRUE:  # LibreTranslate's LT_API_KEYS=true: its key database, which we do not read
            raise ValueError(f"--api-keys / LT_API_KEYS {given!r}: give the key file (one key a line); "
                             "LibreTranslate's key database is not read")
        given = None  # LT_API_KEYS=false: no keys, as in LibreTranslate
    keys = read_api_keys(given) if given is not None else {}
    if args.api_key:
        keys.setdefault(args.api_key, None)
    return dict(api_keys=keys, cors_origins=("*",) if args.cors else tuple(args.cors_origins),
                **{name: getattr(args, name) for name in SWITCHES},
                **{name: getattr(args, name) for name, *_ in LIMITS})


def listen(args, translators, tagger, settings) -> int:
    """Load the models (`engines.TranslationEngine`, `engines.TaggerEngine`), then serve them until SIGTERM /
    Ctrl-C."""
    import uvicorn

    from ..deploy.app import create_app

    no_progress_bars()
    for served in [*translators, *([tagger] if tagger else [])]:
        try:
            served.open()  # before listening: a model that cannot load is an error line, not a server answering 503
        except (OSError, ValueError) as error:
            raise OSError(f"could not load the model in {served.model_dir}: {error}") from error
    app = create_app(translators, settings, tagger)
    app.state.server.detector.start()  # lingua's models loaded now, not on the first request
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    served = [f"{engine.model_dir} ({engine.source} -> {engine.target}, {engine.workers} engine batch(es) at once)"
              for engine in translators]
    served += [f"the tagger {tagger.model_dir} at /v1/ner"] if tagger else []
    logger.info("serving %s on http://%s:%d%s", " and ".join(served), args.host, args.port,
                " with API keys" if settings.api_keys else "")
    uvicorn.run(app, host=args.host, port=args.port, log_level="info", access_log=args.access_log,
                timeout_graceful_shutdown=settings.request_timeout)
    return 0
