"""The `vanilla-transformer` command: `vanilla-transformer COMMAND --help` for each command's flags.

A user's mistake (a missing or damaged file, malformed data, an option out of range, a model of the wrong kind) ends
with one `vanilla-transformer COMMAND: error: ...` line on stderr and exit status 2; `--debug` anywhere on the command
line (or VT_DEBUG=1) shows the full trace instead. Other exceptions are bugs and keep their trace.
"""

import argparse
import json
import sys

from .console import non_negative_int, output_path, positive_int, run


def export_ctranslate2_command(args) -> None:
    from .deploy.ctranslate2 import export_ctranslate2

    out = export_ctranslate2(args.model_dir, args.output_dir, quantization=args.quantization, force=args.force)
    print(f"Exported {args.model_dir} to {out} (CTranslate2, quantization {args.quantization or 'float32'}).",
          file=sys.stderr)


def translate_command(args) -> None:
    from .loading import no_progress_bars
    from .deploy.translate import translate_file

    if args.quiet:
        no_progress_bars()

    stats = translate_file(args.model_dir, args.input, args.output, engine=args.engine, batch_size=args.batch_size,
                           progress=not args.quiet, num_beams=args.num_beams, max_new_tokens=args.max_new_tokens,
                           compute_type=args.compute_type, device=args.device, threads=args.threads)
    print(f"{stats['sentences']} sentences in {stats['seconds']:.2f} s: {stats['sentences_per_second']:.1f} "
          "sentences/s", file=sys.stderr)
    if args.stats:
        print(json.dumps(stats), file=sys.stderr)


def tag_command(args) -> None:
    from .loading import no_progress_bars
    from .deploy.tag import tag_file

    if args.quiet:
        no_progress_bars()

    stats = tag_file(args.model_dir, args.input, args.output, form=args.format, batch_size=args.batch_size,
                     document_consistency=args.document_consistency, ensemble_with=args.ensemble_with or (),
                     device=args.device, progress=not args.quiet, engine=args.engine)
    print(f"{stats['sentences']} sentences in {stats['seconds']:.2f} s: {stats['sentences_per_second']:.1f} "
          "sentences/s", file=sys.stderr)
    if args.stats:
        print(json.dumps(stats), file=sys.stderr)


def export_onnx_command(args) -> None:
    from .deploy.onnx import export_onnx

    out = export_onnx(args.model_dir, args.output_dir, quantize=args.quantize, force=args.force)
    print(f"Exported {args.model_dir} to {out} (ONNX, {args.quantize or 'float32'}).", file=sys.stderr)


# Commands with their own argument parsers (module or module:function): the rest of the command line is theirs.
PASSTHROUGH = {
    "train-translation": ("run_translation", "Train and evaluate a translation model (Seq2SeqTrainer; flags as in "
                                             "transformers' run_translation.py). No data flags: the demo task."),
    "train-ner": ("run_ner", "Train and evaluate a named-entity tagger (Trainer; flags as in transformers' run_ner.py)."),
    "pretrain-encoder": ("run_mlm", "Pretrain an encoder on unlabelled text (masked language modelling) for train-ner "
                                    "--model_name_or_path."),
    "average-checkpoints": ("average_checkpoints", "Average the weights of a run's last N checkpoints."),
    "plot": ("plot", "PNG pictures: training curves, attention heatmaps, the position encoding."),
    "push": ("push_to_hub", "Push a saved model directory (or a demo Space) to the Hugging Face Hub."),
    "serve": ("deploy.serve", "Serve a translation model (LibreTranslate's API, /v1/translate) and/or a tagger (/v1/ner) "
                       "over HTTP, with dynamic batching."),
    "demo": ("demo.app", "The demo page in the browser: translation with its attention, entity tagging (Gradio)."),
    "split-documents": ("splits:documents_main", "Hold out a tuning split of a CoNLL training file, by document."),
    "split-pairs": ("splits:pairs_main", "Hold out a tuning split of parallel text files, by line pair."),
    "ner-report": ("ner.analysis:report_main", "Tagging scores on entities seen in training vs unseen, per type."),
    "score": ("metrics.paper_bleu", "sacreBLEU and the paper's tokenized, compound-split BLEU of a translation file."),
}


def run_passthrough(name: str, argv: list[str]):
    """A command with its own parser: its module's function gets the rest of the command line."""
    import importlib

    module_name, _, function = PASSTHROUGH[name][0].partition(":")
    module = importlib.import_module(f".{module_name}", __package__)
    sys.argv[0] = f"vanilla-transformer {name}"  # what their --help shows as the program
    return getattr(module, function or "main")(argv)


def add_export_ctranslate2(commands) -> None:
    """`export-ctranslate2 MODEL_DIR OUTPUT_DIR`."""
    export = commands.add_parser("export-ctranslate2", help="Export a saved translation model to CTranslate2.",
                                 description="Convert a saved translation model (a directory or Hub id) to a "
                                             "CTranslate2 model directory, the tokenizer included.")
    export.add_argument("model_dir", help="Saved translation model (save_pretrained directory or Hub id).")
    export.add_argument("output_dir", type=output_path, help="Directory to write the CTranslate2 model to.")
    export.add_argument("--quantization", default=None,
                        choices=["float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16",
                                 "float16", "bfloat16"],
                        help="Weight type stored in the export (default float32); int8 is the fast CPU choice.")
    export.add_argument("--force", action="store_true", help="Replace output_dir if it exists.")
    export.set_defaults(func=export_ctranslate2_command)


def add_translate(commands) -> None:
    """`translate MODEL_DIR`: a file or stdin, one line out per line in."""
    translate = commands.add_parser("translate", help="Translate a text file, one sentence per line.",
                                    description="Translate lines of text (a file or stdin) with a saved or exported "
                                                "model; writes one line per input line, in order (empty lines stay "
                                                "empty).")
    translate.add_argument("model_dir", help="Saved translation model, or a directory exported by export-ctranslate2.")
    translate.add_argument("--input", default=None, help="UTF-8 text file to translate (default: stdin).")
    translate.add_argument("--output", type=output_path, default=None,
                           help="File to write the translations to (default: stdout).")
    translate.add_argument("--engine", default="auto", choices=["auto", "pytorch", "ctranslate2"],
                           help="auto: CTranslate2 for an exported directory, PyTorch otherwise; ctranslate2 on a "
                                "saved PyTorch model converts it on the fly.")
    translate.add_argument("--num_beams", type=positive_int, default=1, help="Beam size (1: greedy).")
    translate.add_argument("--max_new_tokens", type=positive_int, default=None,
                           help="Longest translation in tokens (default: the model's generation config; 256 for "
                                "CTranslate2).")
    translate.add_argument("--batch_size", type=positive_int, default=64, help="Sentences per batch.")
    translate.add_argument("--compute_type", default="default",
                           help="CTranslate2 only: int8, int8_float32, float32, ... (default: the export's type); on "
                                "a GPU float16, int8_float16, bfloat16.")
    translate.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                           help="auto (default): a CUDA GPU where the engine sees one, else the CPU.")
    translate.add_argument("--threads", type=non_negative_int, default=0,
                           help="CPU threads (default 0: all cores). CTranslate2 translates that many batches at once, one "
                                "thread each.")
    translate.add_argument("--quiet", action="store_true", help="No progress bars.")
    translate.add_argument("--stats", action="store_true",
                           help="Also print the counts, speed and the engine's share of the time as JSON (stderr).")
    translate.set_defaults(func=translate_command)


def add_tag(commands) -> None:
    """`tag MODEL_DIR`: entities of text lines, or a tag column for CoNLL files."""
    tag = commands.add_parser("tag", help="Tag named entities in a text or CoNLL file.",
                              description="Tag the named entities of text (a file or stdin) with a trained tagger. "
                                          "--format text: one sentence or paragraph a line in, a JSON array of its "
                                          "entities a line out ({text, type, start, end, score}, character offsets "
                                          "into the line). --format conll: CoNLL columns in, the same lines with the "
                                          "predicted tag appended out.")
    tag.add_argument("model_dir", help="Saved tagger (train-ner's output directory or a Hub id).")
    tag.add_argument("--input", default=None, help="UTF-8 file to tag (default: stdin).")
    tag.add_argument("--output", type=output_path, default=None, help="File to write to (default: stdout).")
    tag.add_argument("--format", default="text", choices=["text", "conll"], help="Input and output format.")
    tag.add_argument("--batch_size", type=positive_int, default=32, help="Sentences per batch.")
    tag.add_argument("--document_consistency", action="store_true",
                     help="Make tags consistent within each document (text: paragraphs between blank lines; CoNLL: "
                          "-DOCSTART- sections), as train-ner --document_consistency.")
    tag.add_argument("--ensemble_with", nargs="+", default=None, metavar="TAGGER",
                     help="More saved taggers (same labels and tokenizer): tag with the ensemble of all.")
    tag.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                     help="auto (default): a CUDA GPU where PyTorch sees one, else the CPU.")
    tag.add_argument("--engine", default="auto", choices=["auto", "pytorch", "onnxruntime"],
                     help="auto: ONNX Runtime for a directory written by export-onnx, PyTorch otherwise.")
    tag.add_argument("--quiet", action="store_true", help="No progress bars.")
    tag.add_argument("--stats", action="store_true",
                     help="Also print the counts, speed and the engine's share of the time as JSON (stderr).")
    tag.set_defaults(func=tag_command)


def add_export_onnx(commands) -> None:
    """`export-onnx MODEL_DIR OUTPUT_DIR`."""
    onnx = commands.add_parser("export-onnx", help="Export a saved tagger to ONNX (for ONNX Runtime).",
                               description="Export a saved tagger's encoder and classifier to ONNX (torch's exporter, "
                                           "dynamic batch and length), with its tokenizer and CRF scores, for `tag` "
                                           "and `serve` with ONNX Runtime. Needs the onnx extra.")
    onnx.add_argument("model_dir", help="Saved tagger (train-ner's output directory).")
    onnx.add_argument("output_dir", type=output_path, help="Directory to write the export to.")
    onnx.add_argument("--quantize", default=None, choices=["int8"],
                      help="ONNX Runtime's dynamic int8 quantization of the weights (default: float32).")
    onnx.add_argument("--force", action="store_true", help="Replace output_dir if it exists.")
    onnx.set_defaults(func=export_onnx_command)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vanilla-transformer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true", help="Show the full trace of an error (also: VT_DEBUG=1).")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_, help_text) in PASSTHROUGH.items():
        commands.add_parser(name, help=help_text, add_help=False)
    for add in (add_export_ctranslate2, add_translate, add_tag, add_export_onnx):
        add(commands)
    return parser


def dispatch(argv: list[str]):
    """The command named first in `argv`, with the rest of it."""
    if argv and argv[0] in PASSTHROUGH:
        return run_passthrough(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    return args.func(args)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    return run(f"vanilla-transformer {command}" if command else "vanilla-transformer", dispatch, argv)


if __name__ == "__main__":
    sys.exit(main())
