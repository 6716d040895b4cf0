"""Large corpora: recombined from a parallel corpus, trained from text files on an empty cache and again on the
cache (start to first step, peak anonymous memory, tokens/s)."""

import json
import os
import random
import subprocess
import sys
import time


def recombined_corpus(prefix: str, source_lang: str, target_lang: str, pairs: int, out_prefix: str, seed: int = 0):
    """`pairs` sentence pairs, each one or two random pairs of the corpus `prefix` joined by a space, written to
    `out_prefix`.SRC / .TGT: a corpus of any size made of natural sentences (generated when measured, never stored)."""
    sides = [open(f"{prefix}.{lang}", encoding="utf-8").read().splitlines() for lang in (source_lang, target_lang)]
    rng = random.Random(seed)
    with (
        open(f"{out_prefix}.{source_lang}", "w", encoding="utf-8") as src,
        open(f"{out_prefix}.{target_lang}", "w", encoding="utf-8") as tgt,
    ):
        for _ in range(pairs):
            rows = [rng.randrange(len(sides[0])) for _ in range(rng.randint(1, 2))]
            src.write(" ".join(sides[0][i] for i in rows) + "\n")
            tgt.write(" ".join(sides[1][i] for i in rows) + "\n")


def rss_anon_mb(pid: int) -> float:
    """Anonymous resident memory of a process and its descendants (not the memory-mapped Arrow pages, which the
    kernel can drop), in MB."""
    total, stack = 0, [pid]
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("RssAnon:"))
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    stack.extend(int(child) for child in f.read().split())
        except (OSError, StopIteration):
            continue
    return total / 1024


def timed_run(command: list[str], log_path: str) -> dict:
    """Run `command`, its output into `log_path`; wall seconds and the peak anonymous memory (sampled every 50 ms)."""
    start, peak = time.perf_counter(), 0.0
    with open(log_path, "w") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        while proc.poll() is None:
            peak = max(peak, rss_anon_mb(proc.pid))
            time.sleep(0.05)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed (exit {proc.returncode}); log: {log_path}")
    return dict(seconds=time.perf_counter() - start, peak_rss_anon_mb=peak)


def corpus_report(
    prefix: str, source_lang: str, target_lang: str, sizes, workdir: str, max_tokens: int = 4096, steps: int = 10
) -> list[dict]:
    """For a generated corpus of each size (`recombined_corpus`): `train-translation` from the raw text files three
    times (small preset, --max_tokens, `steps` optimizer steps): on an empty cache (reading, tokenizer training,
    tokenization, cached as Arrow files), again reusing that cache, and with --streaming (nothing cached). Reports the
    seconds from the command's start to its first optimizer step on each, the peak anonymous memory of the whole
    run, and training tokens/s (source + target, padding excluded)."""
    rows = []
    for pairs in sizes:
        folder = os.path.join(workdir, f"{pairs}")
        os.makedirs(folder, exist_ok=True)
        recombined_corpus(prefix, source_lang, target_lang, pairs, os.path.join(folder, "train"))
        command = [
            sys.executable,
            "-m",
            "vanilla_transformer.run_translation",
            "--train_file",
            os.path.join(folder, "train"),
            "--source_lang",
            source_lang,
            "--target_lang",
            target_lang,
            "--config_name",
            "small",
            "--max_tokens",
            str(max_tokens),
            "--max_steps",
            str(steps),
            "--do_train",
            "--save_strategy",
            "no",
            "--report_to",
            "none",
            "--cache_dir",
            os.path.join(folder, "cache"),
            "--output_dir",
            os.path.join(folder, "model"),
            "--logging_steps",
            str(steps),
            "--overwrite_output_dir",
            "true",
        ]  # (three runs, one folder)
        row = dict(pairs=pairs, max_tokens=max_tokens, steps=steps)
        for run in ("first", "cached", "streaming"):
            result = timed_run(
                command + (["--streaming"] if run == "streaming" else []), os.path.join(folder, f"{run}.log")
            )
            with open(os.path.join(folder, "model", "train_results.json")) as f:
                metrics = json.load(f)
            row[f"{run}_to_first_step_s"] = result["seconds"] - metrics["train_runtime"]
            row[f"{run}_peak_rss_anon_mb"] = result["peak_rss_anon_mb"]
            row[f"{run}_metrics"] = metrics
        row["preparation_s"] = row["first_to_first_step_s"] - row["cached_to_first_step_s"]  # the data work alone
        row["preparation_pairs_per_s"] = pairs / row["preparation_s"]
        rows.append(row)
        print(
            f"{pairs:>10,} pairs: start to first step {row['first_to_first_step_s']:6.1f} s, on the cache "
            f"{row['cached_to_first_step_s']:5.1f} s (preparation {row['preparation_pairs_per_s']:,.0f} pairs/s); "
            f"peak RssAnon {row['first_peak_rss_anon_mb']:,.0f} MB, on the cache "
            f"{row['cached_peak_rss_anon_mb']:,.0f} MB; training "
            f"{row['cached_metrics']['train_tokens_per_second']:,.0f} tokens/s; streamed: first step "
            f"{row['streaming_to_first_step_s']:5.1f} s, peak RssAnon {row['streaming_peak_rss_anon_mb']:,.0f} MB, "
            f"training {row['streaming_metrics']['train_tokens_per_second']:,.0f} tokens/s",
            flush=True,
        )
    return rows
