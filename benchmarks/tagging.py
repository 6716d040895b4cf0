"""The tagging engines (PyTorch, ONNX Runtime float32 / int8) on a tagger of the CoNLL recipe's shape, and the
server's length-cut batches against one padded batch."""

import json
import os
import random
import statistics
import tempfile
import time

from .common import VOCAB, measure, word_tokenizer

CONLL_TAGGER = dict(
    encoder_layers=4, normalize_before=True, char_cnn_dim=128, relative_attention_max_distance=16, use_crf=True
)  # recipes/conll.sh's tagger on the small preset


def save_conll_tagger(path: str) -> str:
    """A tagger of the CoNLL recipe's shape (small preset, `CONLL_TAGGER`, random weights, 9 IOB2 labels, vocabulary
    8000) saved with its tokenizer in `path`; returns `path`."""
    import torch

    from vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForTokenClassification

    labels = ["O"] + [f"{p}-{k}" for k in ("PER", "LOC", "ORG", "MISC") for p in "BI"]
    config = VanillaTransformerConfig.from_preset(
        "small", vocab_size=VOCAB, num_labels=len(labels), id2label=dict(enumerate(labels)), **CONLL_TAGGER
    )
    torch.manual_seed(0)
    model = VanillaTransformerForTokenClassification(config).eval()
    tokenizer = word_tokenizer()
    model.set_token_characters(tokenizer)  # every token spelled
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def tagging_engines_benchmark(output: str, reps: int = 20, length: int = 32, rounds: int = 2) -> list[dict]:
    """Sentences/s of a tagger of the CoNLL recipe's shape (random weights, CRF head, 9 labels, vocabulary 8000) on
    this CPU: PyTorch fp32 (`model(...).logits`, the CRF's max-marginals included) against its ONNX export in ONNX
    Runtime, float32 and int8 (the emissions, then the CRF in numpy, as `tag --engine onnxruntime` runs them), at
    batches of 1 and 32 sentences of `length` tokens. Each engine runs alone in a child process (in one process, the
    threads one engine leaves spinning slow the other down), the engines one after the other, `rounds` times; the
    median of all `reps` x `rounds` timed calls."""
    import numpy as np

    from vanilla_transformer.deploy.onnx import export_onnx

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        saved = save_conll_tagger(os.path.join(tmp, "tagger"))
        engines = {"pytorch float32": saved}
        for q in ("float32", "int8"):
            engines[f"onnxruntime {q}"] = export_onnx(saved, os.path.join(tmp, q), None if q == "float32" else q)
        results = {name: [] for name in engines}
        for _ in range(rounds):
            for name, path in engines.items():
                results[name].append(
                    measure(dict(task="tagging-engine", engine=name, path=path, reps=reps, length=length))
                )
        reference = results["pytorch float32"][0]["tags"]
        for batch in ("1", "32"):
            for name, runs in results.items():
                seconds = statistics.median([t for run in runs for t in run["times"][batch]])
                same = float(np.mean(np.asarray(runs[0]["tags"][batch]) == np.asarray(reference[batch])))
                rows.append(
                    dict(
                        engine=name,
                        batch=int(batch),
                        length=length,
                        sentences_per_second=int(batch) / seconds,
                        same_tags=same,
                    )
                )
                print(
                    f"tagging batch {batch:>2s} x {length} tokens  {name:20s} {int(batch) / seconds:9.1f} "
                    f"sentences/s  tags equal to PyTorch's: {same * 100:.1f}%",
                    flush=True,
                )
    with open(output, "w") as f:
        json.dump(rows, f, indent=2)
    return rows


def tagging_batches_benchmark(output: str, reps: int = 20, rounds: int = 3) -> list[dict]:
    """Sentences/s of `Tagger` (tokenizer, PyTorch fp32 model with the CRF, tags per word) on one sentence a call and on
    batches of 8, 16 and 32 sentences of mixed lengths, as a server's dynamic batches hold them: one batch padded to
    its longest sentence against the length-cut batches `Tagger.batches` makes on a CPU. A tagger of the CoNLL
    recipe's shape (random weights); sentence lengths in words drawn as CoNLL-2003's (log-normal, median 11, 90th
    percentile 34, at most 110); both ways alternate in this process, `rounds` x `reps` calls each; the median."""
    import math

    from vanilla_transformer.deploy.taggers import CALL_COST_WORDS, Tagger

    rng = random.Random(0)

    def sentence() -> list[str]:
        length = min(110, max(1, round(rng.lognormvariate(math.log(11), 0.88))))
        return [f"t{rng.randrange(4, VOCAB)}" for _ in range(length)]

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tagger = Tagger(save_conll_tagger(tmp), device="cpu")
        ways = {"one padded batch": None, "length-cut batches": CALL_COST_WORDS}
        for size in (1, 8, 16, 32):
            batches = [[sentence() for _ in range(size)] for _ in range(reps)]
            times, tags = {way: [] for way in ways}, {}
            for _ in range(rounds):
                for way, call_words in ways.items():
                    tagger.call_words = call_words
                    tagger(batches[0])  # warm-up
                    for i, batch in enumerate(batches):
                        start = time.perf_counter()
                        tags[way, i] = [t for t, _ in tagger(batch)]
                        times[way].append(time.perf_counter() - start)
            for way in ways:
                rows.append(
                    dict(
                        batch=size,
                        batching=way,
                        sentences_per_second=size / statistics.median(times[way]),
                        same_tags=all(tags[way, i] == tags["one padded batch", i] for i in range(reps)),
                    )
                )
                print(
                    f"tagging {size:2d} sentences of mixed lengths, {way:18s} "
                    f"{rows[-1]['sentences_per_second']:8.1f} sentences/s",
                    flush=True,
                )
    with open(output, "w") as f:
        json.dump(rows, f, indent=2)
    return rows


def tagging_engine_child(spec: dict) -> dict:
    """One engine of `tagging_engines_benchmark` in this process: {"times": {batch: seconds per call}, "tags"}."""
    import torch

    from vanilla_transformer import VanillaTransformerForTokenClassification
    from vanilla_transformer.deploy.taggers import OnnxTagger
    from vanilla_transformer.model_dirs import recognise

    if spec["engine"].startswith("pytorch"):
        model = recognise(spec["path"]).load(VanillaTransformerForTokenClassification).eval()

        def call(ids, mask):
            with torch.inference_mode():
                return model(input_ids=ids, attention_mask=mask).logits.argmax(-1).numpy()
    else:
        engine = OnnxTagger(recognise(spec["path"]))

        def call(ids, mask):
            return engine.scores(ids.numpy(), mask.numpy()).argmax(-1)

    times, tags = {}, {}
    for batch in (1, 32):
        ids = torch.randint(4, VOCAB, (batch, spec["length"]), generator=torch.Generator().manual_seed(batch))
        mask = torch.ones_like(ids)
        for _ in range(3):
            call(ids, mask)
        times[str(batch)] = []
        for _ in range(spec["reps"]):
            start = time.perf_counter()
            call(ids, mask)
            times[str(batch)].append(time.perf_counter() - start)
        tags[str(batch)] = call(ids, mask).tolist()
    return {"times": times, "tags": tags}
