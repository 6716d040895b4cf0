"""The commands as a user runs them: start-up (`--help`, `import`) and `tag` / `translate` end to end, each against
the share of its engine's calls (`--stats`: `engine_seconds`, measured in the same run)."""

import json
import os
import subprocess
import sys
import tempfile
import time

from .common import ROOT, VOCAB, build, shape_of, word_tokenizer
from .tagging import save_conll_tagger

DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")


def wall(argv: list[str]) -> tuple[float, str]:
    """(seconds, stderr) of one run of `argv` in a child process."""
    start = time.perf_counter()
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT, "TOKENIZERS_PARALLELISM": "false"},
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {proc.stderr[-2000:]}")
    return seconds, proc.stderr


def best_run(argv: list[str], rounds: int) -> dict:
    """The fastest of `rounds` runs: its wall seconds and, for a command given --stats, its stats."""
    runs = []
    for _ in range(rounds):
        seconds, stderr = wall(argv)
        stats = next((json.loads(line) for line in stderr.splitlines() if line.startswith("{")), {})
        runs.append(dict(stats, command_seconds=seconds))
    return min(runs, key=lambda run: run["command_seconds"])


def conll_input(tmp: str) -> tuple[str, int]:
    """CoNLL-2003 validation where the data is (else 3,000 made-up sentences of 16 words): (path, words)."""
    path = os.path.join(DATA, "conll2003", "validation.txt")
    if not os.path.isfile(path):
        path = os.path.join(tmp, "made-up.conll")
        with open(path, "w") as f:
            f.write(
                "".join(
                    "".join(f"t{(7 * s + w) % (VOCAB - 4) + 4} NN O O\n" for w in range(16)) + "\n" for s in range(3000)
                )
            )
    with open(path, encoding="utf-8") as f:
        words = sum(1 for line in f if line.strip() and not line.startswith("-DOCSTART-"))
    return path, words


def source_input(tmp: str) -> str:
    """Multi30k's German validation sentences where the data is (else 1,000 made-up sentences of 12 words)."""
    path = os.path.join(DATA, "multi30k", "validation.de")
    if os.path.isfile(path):
        return path
    path = os.path.join(tmp, "made-up.de")
    with open(path, "w") as f:
        f.write("".join(" ".join(f"t{(5 * s + w) % (VOCAB - 4) + 4}" for w in range(12)) + "\n" for s in range(1000)))
    return path


def save_translator(path: str) -> str:
    """A translation model of the small preset (random weights, vocabulary 8000) with its tokenizer in `path`."""
    import torch

    torch.manual_seed(0)
    model = build("ours", shape_of("small")).eval()
    model.generation_config.max_length = 64
    model.save_pretrained(path)
    word_tokenizer().save_pretrained(path)
    return path


def row(case: str, engine: str, run: dict, words: int | None = None) -> dict:
    out = dict(case=case, engine=engine, command_seconds=run["command_seconds"])
    if "engine_seconds" in run:
        out.update(
            in_process_seconds=run["seconds"],
            engine_seconds=run["engine_seconds"],
            in_process_over_engine=run["seconds"] / run["engine_seconds"],
            command_over_engine=run["command_seconds"] / run["engine_seconds"],
            sentences=run["sentences"],
        )
    if words:
        out["words_per_second"] = words / run["command_seconds"]
    print(
        f"{case:28s} {engine:22s} command {out['command_seconds']:6.2f} s"
        + (
            f"  in process {out['in_process_seconds']:6.2f} s  engine {out['engine_seconds']:6.2f} s  "
            f"({out['in_process_over_engine']:.2f}x in process, {out['command_over_engine']:.2f}x command)"
            if "engine_seconds" in out
            else ""
        )
        + (f"  {out['words_per_second']:,.0f} words/s" if words else ""),
        flush=True,
    )
    return out


def commands_benchmark(output: str, rounds: int = 3) -> list[dict]:
    """Best of `rounds` runs each, one after the other in child processes: the console command's `--help`, `import
    vanilla_transformer` against `import torch, transformers`; `tag --format conll` on CoNLL-2003 validation with a
    tagger of the CoNLL recipe's shape (random weights) in PyTorch and its ONNX exports (float32, int8); `translate`
    of Multi30k's validation sentences (German) with a small-preset translation model (random weights, outputs cut at
    32 tokens) in PyTorch and its CTranslate2 int8 export."""
    from vanilla_transformer.deploy.ctranslate2 import export_ctranslate2
    from vanilla_transformer.deploy.onnx import export_onnx

    python, rows = sys.executable, []
    cli = [python, "-m", "vanilla_transformer.cli"]
    for case, argv in (
        ("python (nothing imported)", [python, "-c", "pass"]),
        ("vanilla-transformer --help", cli + ["--help"]),
        ("import vanilla_transformer", [python, "-c", "import vanilla_transformer"]),
        ("import torch, transformers", [python, "-c", "import torch, transformers"]),
    ):
        rows.append(row(case, "-", best_run(argv, rounds)))
    with tempfile.TemporaryDirectory() as tmp:
        tagger = save_conll_tagger(os.path.join(tmp, "tagger"))
        conll, words = conll_input(tmp)
        taggers = {
            "pytorch float32": tagger,
            "onnxruntime float32": export_onnx(tagger, os.path.join(tmp, "tagger-onnx")),
            "onnxruntime int8": export_onnx(tagger, os.path.join(tmp, "tagger-int8"), "int8"),
        }
        for engine, path in taggers.items():
            run = best_run(
                cli
                + [
                    "tag",
                    path,
                    "--format",
                    "conll",
                    "--input",
                    conll,
                    "--output",
                    os.path.join(tmp, "tags.txt"),
                    "--device",
                    "cpu",
                    "--quiet",
                    "--stats",
                ],
                rounds,
            )
            rows.append(row("tag CoNLL validation", engine, run, words))
        translator = save_translator(os.path.join(tmp, "translator"))
        source = source_input(tmp)
        translators = {
            "pytorch float32": translator,
            "ctranslate2 int8": export_ctranslate2(translator, os.path.join(tmp, "ct2"), "int8"),
        }
        for engine, path in translators.items():
            run = best_run(
                cli
                + [
                    "translate",
                    path,
                    "--input",
                    source,
                    "--output",
                    os.path.join(tmp, "out.txt"),
                    "--device",
                    "cpu",
                    "--max_new_tokens",
                    "32",
                    "--quiet",
                    "--stats",
                ],
                rounds,
            )
            rows.append(row("translate Multi30k validation", engine, run))
    with open(output, "w") as f:
        json.dump(rows, f, indent=2)
    return rows
