"""Side-by-side speed and memory: our model against HF's MarianMTModel / BartForConditionalGeneration (and
BertForTokenClassification for tagging) built with the same shape, fed the same random batches.

Every (case, model) runs in its own child process, so the peak RSS (high-water mark) is that model's alone; models
alternate within a case and each measurement is the median of >= 5 timed repetitions after warm-up. Memory is also
reported as the peak of the memory one untimed repetition allocates and holds at once (over parameters and optimizer
state):
RSS moves by tens of MB between identical runs, that peak does not.

    python scripts/benchmark.py [--presets small base] [--quick] [--output results.json]
"""

import argparse
import json
import os
import sys
import tempfile

from .commands import commands_benchmark
from .common import VOCAB
from .corpus import corpus_report
from .marian import compare_with_references, in_process_ab, run_child
from .tagging import tagging_batches_benchmark, tagging_engine_child, tagging_engines_benchmark
from .training import cpu_kernels_benchmark, device_benchmark, padding_report


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--presets",
        nargs="+",
        default=None,
        choices=["tiny", "small", "base", "big"],
        help="Model shapes (default: small base on the CPU, base big with --device cuda)",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        choices=["cpu", "cuda"],
        help="cuda: the GPU cases (training tokens/s and MFU in bf16, eager and torch.compile; "
        "greedy/beam in PyTorch and CTranslate2), ours vs Marian in one process",
    )
    parser.add_argument(
        "--compile",
        nargs="+",
        default=["false", "true", "reduce-overhead"],
        choices=["false", "true", "reduce-overhead", "dynamic"],
        help="--device cuda: training eager (false), under torch.compile (true) and/or torch.compile "
        "with CUDA graphs (reduce-overhead); dynamic: --tasks lengths also compiled with dynamic "
        "shapes (slow to warm up: not a default)",
    )
    parser.add_argument(
        "--vocab_size",
        type=int,
        default=None,
        help=f"Vocabulary of every model (default {VOCAB}; 37000, the paper's shared BPE, with --device cuda)",
    )
    parser.add_argument(
        "--batch_size",
        type=int,
        default=200,
        help="--device cuda training: sentence pairs per step (with --length 64: 25,600 tokens, the paper's batch)",
    )
    parser.add_argument("--length", type=int, default=64, help="--device cuda training: tokens per sentence")
    parser.add_argument(
        "--packing_length",
        type=int,
        default=None,
        help="--tasks lengths: the rows of the --packing cases (default: as train-translation's)",
    )
    parser.add_argument(
        "--attention",
        default="sdpa",
        choices=["sdpa", "flex_attention", "eager"],
        help="--tasks lengths: our model's attention backend (flex_attention: block masks; GPUs only for training)",
    )
    parser.add_argument(
        "--time_budget", type=float, default=float("inf"), help="--device cuda: start no case after this many seconds"
    )
    parser.add_argument("--quick", action="store_true", help="CI-sized: tiny preset, 5 repetitions, one round")
    parser.add_argument("--rounds", type=int, default=2, help="Alternations ours/reference per case")
    parser.add_argument("--reps", type=int, default=5, help="Timed repetitions per child (>= 5)")
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=None,
        help="Only these tasks (--device cuda: train, lengths, greedy, beam; default all but lengths). "
        "--tasks lengths alone on the CPU: the natural-length training cases there, in bf16. "
        "--tasks tagging-engines alone: a tagger of the CoNLL recipe's shape in PyTorch and ONNX "
        "Runtime (float32, int8), batches of 1 and 32 (needs the onnx extra). --tasks "
        "tagging-batches alone: the tagger on batches of mixed lengths, one padded batch against "
        "length-cut batches. --tasks cpu-kernels alone: training steps with our CPU dropout and "
        "cross-entropy against torch's, fp32 and bf16. --tasks commands alone: start-up (--help, "
        "import) and tag / translate end to end against their engines' share (best of --rounds "
        "+ 1 runs)",
    )
    parser.add_argument(
        "--engines",
        nargs="+",
        default=["pytorch", "ctranslate2"],
        choices=["pytorch", "ctranslate2"],
        help="Only the cases that serve our model with these engines",
    )
    parser.add_argument(
        "--compute_types",
        nargs="+",
        default=["float32", "int8"],
        choices=["float32", "int8"],
        help="CTranslate2 cases: only these compute types",
    )
    parser.add_argument(
        "--in_process",
        action="store_true",
        help="Greedy/beam only: time every case (--engines, --compute_types) alternately in ONE "
        "process (8 alternations) and print the medians; separates model differences from "
        "process-to-process noise",
    )
    parser.add_argument(
        "--dropout",
        type=float,
        default=0.0,
        help="Dropout on every model's embeddings and sub-layer outputs (the paper trains with 0.1); "
        "it acts in the training cases only",
    )
    parser.add_argument(
        "--padding",
        default=None,
        metavar="PREFIX",
        help="Only report the padding share of training batches on the parallel corpus PREFIX.SRC / "
        "PREFIX.TGT (--source_lang, --target_lang): sentence batches vs --max_tokens budgets",
    )
    parser.add_argument(
        "--corpus",
        nargs="+",
        type=int,
        default=None,
        metavar="PAIRS",
        help="Only the large-corpus case: for each number of pairs, a corpus recombined from the "
        "parallel corpus --corpus_source, trained from its text files on an empty cache and again "
        "on the cache (start to first step, peak anonymous memory, tokens/s)",
    )
    parser.add_argument(
        "--corpus_source", default=os.path.join("..", "shared", "data", "multi30k", "train"), metavar="PREFIX"
    )
    parser.add_argument(
        "--workdir",
        default=None,
        help="--corpus: where the corpora and caches go (default: a temporary folder, removed afterwards)",
    )
    parser.add_argument("--source_lang", default="de")
    parser.add_argument("--target_lang", default="en")
    parser.add_argument("--max_tokens", nargs="+", type=int, default=[1024, 2048, 4096])
    parser.add_argument("--output", default="results.json")
    parser.add_argument("--_child", default=None, help=argparse.SUPPRESS)
    return parser


def write_json(path: str, rows) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(rows, f, indent=2, default=float)


def compile_modes(args) -> list:
    return [{"false": False, "true": "default"}.get(c, c) for c in args.compile]


def run_one_family(args, parser) -> int | None:
    """The cases that run alone (--padding, --corpus, --tasks cpu-kernels / commands / tagging-* / lengths, --device
    cuda, --in_process); None when `args` asks for the comparison with the reference models instead."""
    if args.padding:
        write_json(
            args.output,
            [
                dict(row, multiple=multiple)
                for multiple in (1, 8)
                for row in padding_report(
                    args.padding, args.source_lang, args.target_lang, args.max_tokens, multiple=multiple
                )
            ],
        )
        return 0
    if args.corpus:
        with tempfile.TemporaryDirectory() as tmp:
            write_json(
                args.output,
                corpus_report(
                    args.corpus_source,
                    args.source_lang,
                    args.target_lang,
                    args.corpus,
                    args.workdir or tmp,
                    max_tokens=max(args.max_tokens),
                ),
            )
        return 0
    if args.tasks == ["cpu-kernels"]:
        cpu_kernels_benchmark(args.output, preset=(args.presets or ["small"])[0], rounds=args.rounds + 1)
        return 0
    if args.tasks == ["commands"]:
        commands_benchmark(args.output, rounds=args.rounds + 1)
        return 0
    if args.tasks == ["tagging-batches"]:
        tagging_batches_benchmark(args.output, reps=max(args.reps, 5) * 4, rounds=args.rounds + 1)
        return 0
    if args.tasks == ["tagging-engines"]:
        tagging_engines_benchmark(args.output, reps=max(args.reps, 5) * 4, rounds=args.rounds)
        return 0
    if args.device == "cpu" and args.tasks == ["lengths"]:  # natural lengths on the CPU, in bf16 as on a GPU
        return device_benchmark(
            "cpu",
            args.presets or ["small"],
            compile_modes(args),
            args.vocab_size or VOCAB,
            args.batch_size,
            args.length,
            args.reps,
            [],
            args.time_budget,
            args.output,
            ["lengths"],
            packing_length=args.packing_length,
            attention=args.attention,
        )
    if args.device != "cpu":
        import torch

        if not torch.cuda.is_available():
            parser.error("--device cuda: PyTorch sees no CUDA GPU")
        compute_types = [{"float32": "float16", "int8": "int8_float16"}.get(c, c) for c in args.compute_types]
        return device_benchmark(
            args.device,
            args.presets or ["base", "big"],
            compile_modes(args),
            args.vocab_size or 37000,
            args.batch_size,
            args.length,
            max(args.reps, 10),
            compute_types if "ctranslate2" in args.engines else [],
            args.time_budget,
            args.output,
            args.tasks or ["train", "greedy", "beam"],
            packing_length=args.packing_length,
            attention=args.attention,
        )
    if args.in_process:
        return in_process_ab(
            ["tiny"] if args.quick else args.presets or ["small", "base"],
            args.tasks or ["greedy", "beam"],
            args.engines,
            args.compute_types,
        )
    return None


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args._child:
        spec = json.loads(args._child)
        print(json.dumps(tagging_engine_child(spec) if spec["task"] == "tagging-engine" else run_child(spec)))
        return 0
    if args.reps < 5:
        parser.error("--reps must be at least 5")
    status = run_one_family(args, parser)
    if status is not None:
        return status
    write_json(args.output, compare_with_references(args))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
