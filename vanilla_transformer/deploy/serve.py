"""`vanilla-transformer serve MODEL_DIR [--ner TAGGER_DIR]`: a translation model and/or a tagger behind HTTP, with
dynamic batching.

Endpoints:
- `POST /translate`, `GET /languages`: LibreTranslate's API (JSON or form bodies), so its clients work unchanged;
- `POST /v1/translate`: `{"sentences": [...], "num_beams": 1, "max_new_tokens": null}` -> `{"translations": [...]}`;
- `POST /v1/ner` (a tagger): `{"sentences": [...]}` -> `{"entities": [[...], ...]}`, each text's entities as
  `vanilla-transformer tag` writes them;
- `GET /health`: 200 once the models are loaded, 503 before; `GET /metrics`: Prometheus text format.

With an API key set, `/translate`, `/v1/translate` and `/v1/ner` need it, as the `api_key` field of the body or the
`X-API-Key` header; `/languages`, `/health` and `/metrics` stay open.

One batcher per model groups the sentences of concurrent requests into engine batches of at most `--max_batch_tokens`
source tokens, waiting at most `--max_wait_ms` for a batch to fill, and runs `--workers` of them at once; each
sentence keeps its own future, so a request gets back exactly its own translations. FastAPI on uvicorn (the `serve`
extra): typed request bodies with clear 422 errors, graceful shutdown on SIGTERM (in-flight requests finish first).
"""

import argparse
import logging
import os

from ..console import non_negative_int, port_number, positive_int
from ..loading import (TAGGER, check_translation_model_dir, default_threads, is_tagger_dir, no_progress_bars, require,
                       resolve_device, resolve_engine)
from ..model_card import card_languages

logger = logging.getLogger(__name__)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="vanilla-transformer serve", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", help="Saved translation model, a directory exported by export-ctranslate2, or a "
                                          "saved tagger (then only /v1/ner is served).")
    parser.add_argument("--ner", default=None, metavar="TAGGER_DIR",
                        help="A saved tagger to serve at /v1/ner beside the translation model.")
    parser.add_argument("--engine", default="auto", choices=["auto", "pytorch", "ctranslate2"],
                        help="auto: CTranslate2 for an exported directory, PyTorch otherwise.")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--compute_type", default="default", help="CTranslate2 only (int8, float16, ...).")
    parser.add_argument("--threads", type=non_negative_int, default=0,
                        help="CPU threads of the engine, shared by its --workers (default 0: all cores).")
    parser.add_argument("--workers", type=non_negative_int, default=0,
                        help="Engine batches run at once, each on threads / workers threads (CTranslate2). Default 0: "
                             "on a CPU one one-thread batch per thread (docs/serving.md), else 1.")
    parser.add_argument("--host", default="127.0.0.1", help="Address to listen on (default: loopback only).")
    parser.add_argument("--port", type=port_number, default=5000)
    parser.add_argument("--api_key", default=os.environ.get("VT_API_KEY"),
                        help="Every translate and tagging call must carry this key, in the body or the X-API-Key "
                             "header (default: $VT_API_KEY; none: no key needed).")
    parser.add_argument("--source_lang", default=None, help="Default: the model card's first language, else 'src'.")
    parser.add_argument("--target_lang", default=None, help="Default: the model card's last language, else 'tgt'.")
    parser.add_argument("--max_batch_tokens", type=positive_int, default=4096,
                        help="Source tokens per engine batch (sentences of concurrent requests together).")
    parser.add_argument("--max_wait_ms", type=float, default=0.0,
                        help="How long a batch waits for more sentences after its first (default 0: it starts as "
                             "soon as the engine is free; what arrives meanwhile forms the next batch).")
    parser.add_argument("--max_queue", type=positive_int, default=1024,
                        help="Sentences waiting at most; more is answered 503 with Retry-After.")
    parser.add_argument("--max_sentences", type=positive_int, default=128, help="Sentences per request at most.")
    parser.add_argument("--max_sentence_tokens", type=positive_int, default=256, help="Tokens per sentence at most.")
    parser.add_argument("--max_beams", type=positive_int, default=8, help="num_beams at most.")
    parser.add_argument("--max_request_bytes", type=positive_int, default=1 << 20, help="Request body size at most.")
    parser.add_argument("--request_timeout", type=float, default=60.0, help="Seconds a request may wait (504 after).")
    parser.add_argument("--access_log", action="store_true",
                        help="Log a line for every request (default: off; /metrics counts them).")
    parser.add_argument("--cors_origins", nargs="*", default=[],
                        help="Origins a browser page may call from (default: none, CORS off).")
    args = parser.parse_args(argv)
    if not args.max_wait_ms >= 0 or not 0 < args.request_timeout < float("inf"):  # (NaN fails both)
        parser.error("--max_wait_ms must be >= 0 and --request_timeout > 0 (and finite)")
    return args


def default_workers(pytorch: bool, device: str, threads: int) -> int:
    """`--workers 0`: CTranslate2 on a CPU runs one one-thread batch per thread (as `translate` does; two one-thread
    batches outran one two-thread batch at 8 to 128 clients: docs/serving.md); PyTorch and GPUs one batch at a time."""
    if pytorch or resolve_device(device, "ctranslate2") != "cpu":
        return 1
    return threads or default_threads()


def served_models(args):
    """(translation engine or None, tagger engine or None, Settings) for the parsed command line, checked before
    anything loads: a wrong path is an error now, not a failed /health later. The language pair: the flags, else the
    model card's (a saved model's or an export's), else src -> tgt."""
    for module in ("fastapi", "uvicorn", "prometheus_client"):
        require(module, "serve")
    from .app import Engine, Settings, TaggerEngine

    if args.ner is not None and not is_tagger_dir(args.ner):
        raise ValueError(f"--ner {args.ner!r} is not a saved tagger ({TAGGER}: a config.json naming it).")
    if is_tagger_dir(args.model_dir):  # a tagger alone: /v1/ner only
        if args.ner is not None:
            raise ValueError("MODEL_DIR is a tagger already: give a translation model as MODEL_DIR with --ner.")
        return None, TaggerEngine(args.model_dir, args.device), Settings(**limits(args))
    check_translation_model_dir(args.model_dir)
    pytorch = resolve_engine(args.model_dir, args.engine) == "pytorch"
    if args.workers > 1 and pytorch:
        raise ValueError("--workers: several batches at once need the CTranslate2 engine (an exported directory, or "
                         "--engine ctranslate2); the PyTorch engine runs one.")
    workers = args.workers or default_workers(pytorch, args.device, args.threads)
    source, target = args.source_lang, args.target_lang
    if not (source and target):  # the model card only where a language is not given
        card_source, card_target = card_languages(args.model_dir) or ("src", "tgt")
        source, target = source or card_source, target or card_target
    settings = Settings(source_lang=source, target_lang=target, **limits(args))
    engine = Engine(args.model_dir, args.engine, args.device, args.compute_type, args.threads, workers)
    return engine, TaggerEngine(args.ner, args.device) if args.ner else None, settings


def main(argv=None) -> int:
    args = parse_args(argv)
    return listen(args, *served_models(args))


def limits(args) -> dict:
    """The Settings fields every server takes from the command line."""
    return dict(api_key=args.api_key or None, max_request_bytes=args.max_request_bytes,
                max_sentences=args.max_sentences, max_sentence_tokens=args.max_sentence_tokens,
                max_batch_tokens=args.max_batch_tokens, max_wait_ms=args.max_wait_ms, max_queue=args.max_queue,
                max_beams=args.max_beams, request_timeout=args.request_timeout, cors_origins=tuple(args.cors_origins))


def listen(args, engine, ner, settings) -> int:
    """Load the models (`app.Engine`, `app.TaggerEngine`), then serve them until SIGTERM / Ctrl-C."""
    import uvicorn

    from .app import create_app

    no_progress_bars()

    for served in (engine, ner):
        if served is None:
            continue
        try:
            served.open()  # before listening: a model that cannot load is an error line, not a server answering 503
        except (OSError, ValueError) as error:
            raise OSError(f"could not load the model in {served.model_dir}: {error}") from error
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    served = [f"{engine.model_dir} ({settings.source_lang} -> {settings.target_lang}, {engine.workers} engine "
              "batch(es) at once)"] if engine else []
    served += [f"the tagger {ner.model_dir} at /v1/ner"] if ner else []
    logger.info("serving %s on http://%s:%d%s", " and ".join(served), args.host, args.port,
                " with an API key" if settings.api_key else "")
    uvicorn.run(create_app(engine, settings, ner), host=args.host, port=args.port, log_level="info",
                access_log=args.access_log, timeout_graceful_shutdown=settings.request_timeout)
    return 0
