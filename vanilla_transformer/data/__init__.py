"""Every loader returns a `datasets.Dataset`; bad data raises `DataError` naming the file and line. By task:
`translation`, `tagging`, the generated `demo_tasks`, Hub datasets (`hub`) and tuning splits held out of a training set
(`splits`)."""

from ..files import DataError
from .demo_tasks import (
    DEMO_SOURCE_LANG,
    DEMO_SYMBOLS,
    DEMO_TARGET_LANG,
    demo_translate,
    make_demo_ner,
    make_demo_translation,
)
from .hub import hub_dataset
from .tagging import iob1_to_iob2, load_conll, load_ner_file, load_ner_jsonl, with_document_context
from .translation import (
    load_parallel_text,
    load_translation_file,
    load_translation_jsonl,
    load_translation_tsv,
    stream_parallel_text,
    text_lines,
)

__all__ = [
    "DataError",
    "DEMO_SOURCE_LANG",
    "DEMO_SYMBOLS",
    "DEMO_TARGET_LANG",
    "demo_translate",
    "hub_dataset",
    "iob1_to_iob2",
    "load_conll",
    "load_ner_file",
    "load_ner_jsonl",
    "load_parallel_text",
    "load_translation_file",
    "load_translation_jsonl",
    "load_translation_tsv",
    "make_demo_ner",
    "make_demo_translation",
    "stream_parallel_text",
    "text_lines",
    "with_document_context",
]
