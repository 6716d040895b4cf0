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
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time


VOCAB = 8000
CASES = [  # (task, dtype, reference, engine serving ours, its compute type)
    ("train", "fp32", "marian", "pytorch", None), ("train", "bf16", "marian", "pytorch", None),
    ("greedy", "fp32", "marian", "pytorch", None), ("greedy", "bf16", "marian", "pytorch", None),
    ("beam", "fp32", "marian", "pytorch", None),
    ("train", "fp32", "bart", "pytorch", None), ("greedy", "fp32", "bart", "pytorch", None),
    ("token_classification", "fp32", "bert", "pytorch", None),
    # deployment: our model served by CTranslate2 against HF Marian in PyTorch, and against Marian served by
    # CTranslate2 too (CTranslate2's own converter), with the same compute type
    ("greedy", "fp32", "marian", "ctranslate2", "float32"), ("greedy", "fp32", "marian", "ctranslate2", "int8"),
    ("beam", "fp32", "marian", "ctranslate2", "float32"), ("beam", "fp32", "marian", "ctranslate2", "int8"),
]
UNITS = {"train": "tokens/s", "greedy": "sentences/s", "beam": "sentences/s", "token_classification": "tokens/s"}


def shape_of(preset: str) -> dict:
    from vanilla_transformer import PRESETS

    p = PRESETS[preset]
    return dict(d_model=p["d_model"], layers=p["encoder_layers"], heads=p["encoder_attention_heads"],
                ffn=p["encoder_ffn_dim"])


def build(name: str, shape: dict, dropout: float = 0.0, attention: str = "sdpa"):
    """The same architecture in each library: post-LN, ReLU, scaled sinusoidal (Marian) or learned (BART/BERT)
    positions, embeddings tied with the output projection, `dropout` on the embeddings and sub-layer outputs only.
    `attention` is ours only (the training commands pick eager for bf16 training on a CPU)."""
    from transformers import (BartConfig, BartForConditionalGeneration, BertConfig, BertForTokenClassification,
                              MarianConfig, MarianMTModel)

    from vanilla_transformer import (VanillaTransformerConfig, VanillaTransformerForConditionalGeneration,
                                     VanillaTransformerForTokenClassification)

    d, n, h, f, vocab = shape["d_model"], shape["layers"], shape["heads"], shape["ffn"], shape.get("vocab", VOCAB)
    common = dict(vocab_size=vocab, d_model=d, encoder_layers=n, decoder_layers=n, encoder_attention_heads=h,
                  decoder_attention_heads=h, encoder_ffn_dim=f, decoder_ffn_dim=f, activation_function="relu",
                  dropout=dropout, attention_dropout=0.0, activation_dropout=0.0, max_position_embeddings=512,
                  scale_embedding=True, pad_token_id=0, eos_token_id=2, decoder_start_token_id=1, bos_token_id=1,
                  tie_word_embeddings=True)
    if name in ("ours", "ours_tagger"):
        model = (VanillaTransformerForConditionalGeneration(VanillaTransformerConfig(**common)) if name == "ours" else
                 VanillaTransformerForTokenClassification(VanillaTransformerConfig(**common, num_labels=9)))
        model.set_attn_implementation(attention)
        return model
    if name == "marian":
        return MarianMTModel(MarianConfig(**common, share_encoder_decoder_embeddings=True))
    if name == "bart":
        return BartForConditionalGeneration(BartConfig(**common, forced_eos_token_id=None))
    if name == "bert":
        return BertForTokenClassification(BertConfig(vocab_size=vocab, hidden_size=d, num_hidden_layers=n,
                                                     num_attention_heads=h, intermediate_size=f, hidden_act="relu",
                                                     hidden_dropout_prob=dropout, attention_probs_dropout_prob=0.0,
                                                     max_position_embeddings=512, num_labels=9))
    raise ValueError(name)


def analytic_flops(task: str, shape: dict, batch: int, src: int, tgt: int) -> float:
    """Matmul FLOPs of one measured unit (a training step, a generate call, a tagging forward): per layer and token,
    2 x (attention projections + FFN) + 2 x 2 x (keys attended) x d_model for scores and values, the output projection
    over the vocabulary spread over the decoder layers; training = 3 x forward (backward = 2 x forward)."""
    d, n, f, vocab = shape["d_model"], shape["layers"], shape["ffn"], shape.get("vocab", VOCAB)
    enc_tok = 2 * (4 * d * d + 2 * d * f) + 2 * 2 * src * d           # projections + FFN + scores/values
    dec_tok = 2 * (8 * d * d + 2 * d * f) + 2 * 2 * (tgt + src) * d + 2 * d * vocab / n
    if task == "token_classification":
        return batch * src * n * enc_tok
    forward = batch * n * (src * enc_tok + tgt * dec_tok)
    if task == "train":
        return 3 * forward
    beams = 4 if task == "beam" else 1
    return beams * forward  # generation: one new token per step with a cache ~ one forward over the targets


def matmul_peak(dtype: str) -> float:
    import torch

    dt = torch.float32 if dtype == "fp32" else torch.bfloat16
    a, b = torch.randn(2048, 2048, dtype=dt), torch.randn(2048, 2048, dtype=dt)
    for _ in range(5):
        a @ b
    times = []
    for _ in range(15):
        t = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t)
    return 2 * 2048**3 / min(times)  # a peak: the fastest repetition (the median is noisy on a shared machine)


def tensor_peak_mb(step) -> float:
    """Peak MB of the memory one call of `step` allocates and holds at once, over what was allocated before it
    (parameters, optimizer state, inputs), from the allocations and frees torch's profiler records. Unlike the RSS
    high-water mark it does not move with the allocator or the import-time footprint: the same model and inputs give
    the same number. (Net per operation: a temporary an operation frees before it returns is not seen.)"""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    live = peak = 0
    for event in sorted(prof.events(), key=lambda event: event.time_range.start):
        live += event.self_cpu_memory_usage  # bytes allocated (+) or freed (-) by this operation itself
        peak = max(peak, live)
    return peak / 2**20


def word_tokenizer(pad_last: bool = False, vocab: int = VOCAB):
    """A tokenizer with one made-up word per id (`<pad> <s> </s> <unk> t4 ... t7999`): what the CTranslate2
    converters read (the vocabulary and special tokens) for models with random weights. `pad_last`: Marian's layout,
    `<pad>` as the last id (CTranslate2's Marian converter drops it)."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    tokens = ["<pad>", "<s>", "</s>", "<unk>"] + [f"t{i}" for i in range(4, vocab)]
    if pad_last:
        tokens = ["t0"] + tokens[1:-1] + ["<pad>"]
    vocab = {t: i for i, t in enumerate(tokens)}
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<unk>")),
                                   pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>")


MARIAN_NAMES = [("embed.embed_tokens", "embed_tokens"), ("self_attn_sublayer.layer_norm", "self_attn_layer_norm"),
                ("encoder_attn_sublayer.layer_norm", "encoder_attn_layer_norm"), ("ffn_sublayer.layer_norm",
                                                                                   "final_layer_norm"),
                ("ffn.fc1", "fc1"), ("ffn.fc2", "fc2")]


def marian_with_weights_of(ours, shape: dict):
    """A MarianMTModel of the same shape holding `ours`'s weights and position table (the same logits for the same
    inputs)."""
    # The CTranslate2 cases serve both converters' exports of the same numbers: CTranslate2's speed depends on the
    # weights' values (on a 2-core AMD EPYC Zen 3, our export ran at 0.94x Marian's with each model's own random
    # initialisation and at 0.98-1.03x with Marian's initialisation; docs/benchmarks.md), which would otherwise be
    # counted as the converter's.
    from vanilla_transformer.modeling_vanilla_transformer import VanillaTransformerPositionalEmbedding

    marian = build("marian", shape)
    state = {}
    for name, tensor in ours.state_dict().items():
        for old, new in MARIAN_NAMES:
            name = name.replace(old, new)
        state[name] = tensor
    table = VanillaTransformerPositionalEmbedding.sinusoidal_table(512, shape["d_model"])
    state["model.encoder.embed_positions.weight"] = state["model.decoder.embed_positions.weight"] = table
    missing, unexpected = marian.load_state_dict(state, strict=False)
    if unexpected or any(m != "final_logits_bias" for m in missing):
        raise RuntimeError(f"Marian does not take our weights: missing {missing}, unexpected {unexpected}")
    return marian


def ctranslate2_translator(name: str, shape: dict, compute_type: str, threads: int, device: str = "cpu"):
    """Our model (our converter) or Marian with the same weights (CTranslate2's own converter), random weights, in
    CTranslate2. The export goes to a temporary folder, deleted once the engine has read it."""
    import tempfile

    import ctranslate2
    import torch
    from ctranslate2.converters.transformers import MarianMTLoader

    from vanilla_transformer.ctranslate2_converter import model_spec

    torch.manual_seed(0)
    model = build("ours", shape)
    model = (model if name == "ours" else marian_with_weights_of(model, shape)).eval()
    tokenizer = word_tokenizer(pad_last=name == "marian", vocab=shape.get("vocab", VOCAB))
    spec = model_spec(model, tokenizer) if name == "ours" else MarianMTLoader()(model, tokenizer)
    spec.validate()
    spec.optimize(quantization=compute_type)
    with tempfile.TemporaryDirectory(prefix="benchmark-ct2-") as directory:
        spec.save(directory)
        return ctranslate2.Translator(directory, device=device, compute_type=compute_type, intra_threads=threads)


def run_child(spec: dict) -> dict:
    """Measure one (task, dtype, model, engine) in this process; returns {"value", "peak_rss_mb", "flops"}."""
    import torch

    torch.manual_seed(0)
    task, dtype, name, shape, reps = spec["task"], spec["dtype"], spec["model"], spec["shape"], spec["reps"]
    bf16 = dtype == "bf16"
    tagger = task == "token_classification"
    if spec.get("engine") != "ctranslate2":
        attention = "eager" if bf16 and task == "train" else "sdpa"  # as the training commands choose on a CPU
        model = build(("ours_tagger" if name == "ours" else name) if tagger else name, shape, spec["dropout"], attention)
    g = torch.Generator().manual_seed(1)
    batch = {"train": 32, "greedy": 32, "beam": 8, "token_classification": 32}[task]
    src_len, tgt_len = (128, 0) if tagger else (32, 32)
    vocab = shape.get("vocab", VOCAB)
    src = torch.randint(4, vocab, (batch, src_len), generator=g)
    tgt = torch.randint(4, vocab, (batch, tgt_len), generator=g)
    mask = torch.ones_like(src)
    if spec.get("engine") == "ctranslate2":
        translator = ctranslate2_translator(name, shape, spec["compute_type"], torch.get_num_threads())
        sources = [[f"t{i}" for i in row] for row in src.tolist()]
        beams = 4 if task == "beam" else 1

        def step():  # exactly 32 new tokens, as in the PyTorch cases
            out = translator.translate_batch(sources, beam_size=beams, min_decoding_length=32,
                                             max_decoding_length=32)
            assert len(out[0].hypotheses[0]) == 32, len(out[0].hypotheses[0])
        units = batch
    elif task == "train":
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = model(input_ids=src, attention_mask=mask, labels=tgt).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        units = batch * (src_len + tgt_len)
    elif tagger:
        model.eval()

        def step():
            with torch.inference_mode():
                model(input_ids=src, attention_mask=mask)
        units = batch * src_len
    else:
        model.eval()
        if bf16:
            model.to(torch.bfloat16)
        beams = 4 if task == "beam" else 1

        def step():
            with torch.inference_mode():
                out = model.generate(input_ids=src, attention_mask=mask, max_new_tokens=32, min_new_tokens=32,
                                     num_beams=beams, do_sample=False, early_stopping=False)
            assert out.shape[1] >= 33, out.shape
        units = batch
    for _ in range(2):
        step()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    seconds = statistics.median(times)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if spec.get("engine") == "ctranslate2":  # no torch tensors to count: the engine allocates its own memory
        peak_tensors = None
    else:
        peak_tensors = tensor_peak_mb(step)
    generated = batch * 32 if task in ("greedy", "beam") else None  # every case decodes exactly 32 new tokens
    return {"value": units / seconds, "seconds": seconds, "peak_rss_mb": rss, "peak_tensor_mb": peak_tensors,
            "us_per_token": seconds * 1e6 / generated if generated else None,
            "flops": analytic_flops(task, shape, batch, src_len, 32) / seconds}


def in_process_ab(presets, tasks, engines=("pytorch",), compute_types=("int8",), alternations: int = 8) -> int:
    """Every engine's case built in this process and timed in turn, alternation after alternation (the same allocator
    and caches): ours and Marian in PyTorch fp32, and with --engines ctranslate2 both served by CTranslate2 (ours by
    our converter, Marian by CTranslate2's). Ratios are to MarianMTModel in PyTorch fp32."""
    import torch

    for preset in presets:
        shape = shape_of(preset)
        models = {}
        for name in ("ours", "marian"):
            torch.manual_seed(0)
            models[name] = build(name, shape).eval()
        translators = {f"{name} ctranslate2 {ct}": ctranslate2_translator(name, shape, ct, torch.get_num_threads())
                       for name in ("ours", "marian") for ct in compute_types if "ctranslate2" in engines}
        for task in tasks:
            if task not in ("greedy", "beam"):
                continue
            batch, beams = (32, 1) if task == "greedy" else (8, 4)
            src = torch.randint(4, VOCAB, (batch, 32), generator=torch.Generator().manual_seed(1))
            sources = [[f"t{i}" for i in row] for row in src.tolist()]
            cases = {}
            for name, model in models.items():
                if name == "marian" or "pytorch" in engines:
                    cases[f"{name} pytorch float32"] = lambda model=model: model.generate(
                        input_ids=src, attention_mask=torch.ones_like(src), max_new_tokens=32, min_new_tokens=32,
                        num_beams=beams, do_sample=False, early_stopping=False)
            for label, translator in translators.items():
                cases[label] = lambda translator=translator: translator.translate_batch(
                    sources, beam_size=beams, min_decoding_length=32, max_decoding_length=32)
            times = {label: [] for label in cases}
            for _ in range(alternations + 1):  # the first alternation warms up
                for label, run in cases.items():
                    with torch.inference_mode():
                        start = time.perf_counter()
                        run()
                        times[label].append(time.perf_counter() - start)
            ms = {label: statistics.median(t[1:]) * 1000 for label, t in times.items()}
            reference = ms["marian pytorch float32"]
            print(f"{preset} {task}, one process, {alternations} alternations (ms per call of {batch} sentences x 32 "
                  "new tokens; us per generated token; ratio to MarianMTModel in PyTorch fp32, and ours to Marian in "
                  "the same engine):", flush=True)
            for label, value in ms.items():
                twin = ms.get(label.replace("ours", "marian")) if label.startswith("ours") else None
                same_engine = f"  ours/Marian {twin / value:5.2f}x" if twin else ""
                print(f"  {label:28s} {value:8.1f} ms {value * 1000 / (batch * 32):7.0f} us/token  "
                      f"{reference / value:5.2f}x{same_engine}", flush=True)
    return 0


# Dense bf16 matrix-product peaks from the vendors' datasheets (TFLOP/s, no sparsity), by device name: what the model
# FLOPs utilisation (MFU) on a GPU is measured against. A GPU not listed gets MFU against the measured matmul rate only.
DENSE_BF16_PEAK_TFLOPS = [("H100 PCIe", 756.0), ("H100 NVL", 835.0), ("H100", 989.4), ("H200", 989.4), ("H20", 148.0),
                          ("GH200", 989.4), ("B200", 2250.0), ("A100", 312.0), ("L40S", 362.0), ("L4", 121.0)]


def datasheet_peak(device_name: str) -> float | None:
    for key, tflops in DENSE_BF16_PEAK_TFLOPS:
        if key in device_name:
            return tflops * 1e12
    return None


def device_matmul_rate(device: str) -> float:
    """bf16 FLOP/s of an 8192^3 matrix product on a GPU (256^3 on a CPU check), random data, median of 10 after 3
    warm-ups."""
    import torch

    n = 8192 if device == "cuda" else 256
    a, b = (torch.randn(n, n, device=device, dtype=torch.bfloat16) for _ in range(2))
    return 2 * n**3 / timed(lambda: a @ b, device, warmup=3, reps=10)


def timed(step, device: str, warmup: int, reps: int) -> float:
    """Median seconds of `step` after `warmup` calls, synchronising the device around each call."""
    import torch

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(warmup):
        step()
    sync()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


CONLL_TAGGER = dict(encoder_layers=4, normalize_before=True, char_cnn_dim=128, relative_attention_max_distance=16,
                    use_crf=True)  # recipes/conll.sh's tagger on the small preset


def save_conll_tagger(path: str) -> str:
    """A tagger of the CoNLL recipe's shape (small preset, `CONLL_TAGGER`, random weights, 9 IOB2 labels, vocabulary
    8000) saved with its tokenizer in `path`; returns `path`."""
    import torch

    from vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForTokenClassification

    labels = ["O"] + [f"{p}-{k}" for k in ("PER", "LOC", "ORG", "MISC") for p in "BI"]
    config = VanillaTransformerConfig.from_preset("small", vocab_size=VOCAB, num_labels=len(labels),
                                                  id2label=dict(enumerate(labels)), **CONLL_TAGGER)
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

    from vanilla_transformer.onnx_export import export_onnx

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        saved = save_conll_tagger(os.path.join(tmp, "tagger"))
        engines = {"pytorch float32": saved}
        for q in ("float32", "int8"):
            engines[f"onnxruntime {q}"] = export_onnx(saved, os.path.join(tmp, q), None if q == "float32" else q)
        results = {name: [] for name in engines}
        for _ in range(rounds):
            for name, path in engines.items():
                results[name].append(measure(dict(task="tagging-engine", engine=name, path=path, reps=reps,
                                                  length=length)))
        reference = results["pytorch float32"][0]["tags"]
        for batch in ("1", "32"):
            for name, runs in results.items():
                seconds = statistics.median([t for run in runs for t in run["times"][batch]])
                same = float(np.mean(np.asarray(runs[0]["tags"][batch]) == np.asarray(reference[batch])))
                rows.append(dict(engine=name, batch=int(batch), length=length, sentences_per_second=int(batch) / seconds,
                                 same_tags=same))
                print(f"tagging batch {batch:>2s} x {length} tokens  {name:20s} {int(batch) / seconds:9.1f} "
                      f"sentences/s  tags equal to PyTorch's: {same * 100:.1f}%", flush=True)
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

    from vanilla_transformer.tag import CALL_WORDS, Tagger

    rng = random.Random(0)

    def sentence() -> list[str]:
        length = min(110, max(1, round(rng.lognormvariate(math.log(11), 0.88))))
        return [f"t{rng.randrange(4, VOCAB)}" for _ in range(length)]

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tagger = Tagger(save_conll_tagger(tmp), device="cpu")
        ways = {"one padded batch": None, "length-cut batches": CALL_WORDS}
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
                rows.append(dict(batch=size, batching=way, sentences_per_second=size / statistics.median(times[way]),
                                 same_tags=all(tags[way, i] == tags["one padded batch", i] for i in range(reps))))
                print(f"tagging {size:2d} sentences of mixed lengths, {way:18s} "
                      f"{rows[-1]['sentences_per_second']:8.1f} sentences/s", flush=True)
    with open(output, "w") as f:
        json.dump(rows, f, indent=2)
    return rows


def tagging_engine_child(spec: dict) -> dict:
    """One engine of `tagging_engines_benchmark` in this process: {"times": {batch: seconds per call}, "tags"}."""
    import torch

    from vanilla_transformer import VanillaTransformerForTokenClassification
    from vanilla_transformer.loading import load_model
    from vanilla_transformer.onnx_export import OnnxTagger

    if spec["engine"].startswith("pytorch"):
        model = load_model(VanillaTransformerForTokenClassification, spec["path"]).eval()

        def call(ids, mask):
            with torch.inference_mode():
                return model(input_ids=ids, attention_mask=mask).logits.argmax(-1).numpy()
    else:
        engine = OnnxTagger(spec["path"])

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


def cpu_kernels_benchmark(output: str, preset: str = "small", rounds: int = 3, steps: int = 6, batch: int = 32,
                          length: int = 32) -> list[dict]:
    """Milliseconds per training step (translation, AdamW, dropout 0.1, label smoothing 0.1, `batch` pairs of `length`
    tokens a side, vocabulary 8000) with our CPU kernels (kernels_vanilla_transformer.py) and with torch's
    `F.dropout` / `F.cross_entropy` in their place, one or both; fp32 (SDPA) and, where the CPU has native bf16 matrix
    products, bf16 autocast (eager attention, as the training commands choose there). All variants in one process,
    alternating, `rounds` x `steps` timed steps each after a warm-up; the median."""
    from unittest import mock

    import torch
    import torch.nn.functional as F

    from vanilla_transformer import modeling_vanilla_transformer as modeling
    from vanilla_transformer.configuration_vanilla_transformer import VanillaTransformerConfig
    from vanilla_transformer.training import native_bf16

    from vanilla_transformer.kernels_vanilla_transformer import plain_cross_entropy

    def torch_dropout(x, p, training):
        return F.dropout(x, p, training)

    variants = {"ours": {"apply_dropout": modeling.apply_dropout},  # (patching a name with itself: no change)
                "torch dropout": {"apply_dropout": torch_dropout},
                "torch cross-entropy": {"cross_entropy": plain_cross_entropy},
                "torch both": {"apply_dropout": torch_dropout, "cross_entropy": plain_cross_entropy}}
    rows = []
    for dtype in ["fp32", "bf16"] if native_bf16("cpu") else ["fp32"]:
        torch.manual_seed(0)
        config = VanillaTransformerConfig.from_preset(preset, vocab_size=VOCAB, dropout=0.1, label_smoothing=0.1)
        model = modeling.VanillaTransformerForConditionalGeneration(config).train()
        model.set_attn_implementation("eager" if dtype == "bf16" else "sdpa")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        ids = torch.randint(4, VOCAB, (batch, length))
        inputs = dict(input_ids=ids, attention_mask=torch.ones_like(ids), labels=torch.randint(4, VOCAB, (batch, length)))

        def step():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
                loss = model(**inputs).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        times = {name: [] for name in variants}
        for round_ in range(rounds + 1):  # round 0: warm-up
            for name, patches in variants.items():
                with mock.patch.multiple(modeling, **patches):
                    for _ in range(steps if round_ else 2):
                        start = time.perf_counter()
                        step()
                        if round_:
                            times[name].append(time.perf_counter() - start)
        ours = statistics.median(times["ours"])
        for name, values in times.items():
            median = statistics.median(values)
            rows.append(dict(preset=preset, dtype=dtype, variant=name, ms_per_step=median * 1000,
                             relative_to_ours=median / ours, batch=batch, length=length))
            print(f"{preset} {dtype} {name:20s} {median * 1000:8.1f} ms/step  {median / ours:.3f}x ours", flush=True)
    with open(output, "w") as f:
        json.dump(rows, f, indent=2)
    return rows


def bf16_training_step(forward, optimizer, device: str, batch: dict) -> None:
    """One optimizer step on `batch` (input_ids, attention_mask, labels) with bf16 autocast. On a GPU it first tells
    torch.compile's CUDA graphs (mode "reduce-overhead") that a new step begins."""
    import torch

    if device == "cuda":
        torch.compiler.cudagraph_mark_step_begin()
    with torch.autocast(device, dtype=torch.bfloat16):
        loss = forward(**batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def device_training_case(name: str, shape: dict, device: str, batch: int, length: int, compile_mode: str | bool,
                         reps: int, dropout: float = 0.1) -> dict:
    """Training tokens/s (source + target, no padding: every sequence is `length` tokens) of `name` ("ours" or
    "marian") with bf16 autocast and fused AdamW, eager (`compile_mode` False) or under `torch.compile` in that mode
    ("default", or "reduce-overhead": CUDA graphs); peak device memory."""
    import torch

    torch.manual_seed(0)
    model = build(name, shape, dropout).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device == "cuda")
    forward = torch.compile(model, mode=compile_mode) if compile_mode else model
    g = torch.Generator().manual_seed(1)
    vocab = shape.get("vocab", VOCAB)
    src, tgt = (torch.randint(4, vocab, (batch, length), generator=g).to(device) for _ in range(2))
    inputs = dict(input_ids=src, attention_mask=torch.ones_like(src), labels=tgt)

    def step():
        bf16_training_step(forward, optimizer, device, inputs)

    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    step()  # compilation happens here
    first = time.perf_counter() - start
    seconds = timed(step, device, warmup=2, reps=reps)
    flops = analytic_flops("train", shape, batch, length, length)
    return dict(tokens_per_second=batch * 2 * length / seconds, step_seconds=seconds, first_step_seconds=first,
                flops_per_second=flops / seconds,
                peak_memory_gb=torch.cuda.max_memory_allocated() / 1e9 if device == "cuda" else None)


def synthetic_lengths(pairs: int, seed: int = 0, longest: int = 128):
    """Source and target lengths (tokens, end of sentence included) of `pairs` sentence pairs shaped like a WMT corpus
    under a 37k BPE: log-normal sources (median 25, mean 28 tokens), each target 1.05x its source with a 15% spread,
    2 to `longest` tokens."""
    import numpy as np

    rng = np.random.default_rng(seed)
    source = rng.lognormal(3.2, 0.55, pairs)
    target = source * rng.lognormal(0.05, 0.15, pairs)
    return tuple(np.clip(np.rint(side), 2, longest).astype(np.int64) for side in (source, target))


def length_batches(strategy: str, source, target, max_tokens: int, seed: int = 0,
                   packing_length: int | None = None) -> list[list[int]]:
    """One epoch's batches (index lists, in training order) of pairs with these lengths. "tokens": `--max_tokens`
    (TokenBudgetBatchSampler, padded to a multiple of 8); "packed": `--packing` (PackedBatchSampler: (row, pair) keys,
    rows of `packing_length` tokens); "random": the Trainer's
    default, shuffled batches of a fixed number of pairs, as many as the budget holds at the mean length; "grouped":
    the same number of pairs with
    `--group_by_length` (transformers' LengthGroupedSampler)."""
    import numpy as np
    import torch
    from transformers.trainer_pt_utils import LengthGroupedSampler

    from vanilla_transformer.training import PackedBatchSampler, TokenBudgetBatchSampler

    if strategy == "tokens":
        return list(TokenBudgetBatchSampler(source, target, max_tokens, seed=seed, pad_to_multiple_of=8))
    if strategy == "packed":  # (row, pair) keys
        return list(PackedBatchSampler(source, target, packing_length, max_tokens // packing_length, seed=seed))
    size = int(max_tokens // np.maximum(source, target).mean())
    generator = torch.Generator().manual_seed(seed)
    order = (torch.randperm(len(source), generator=generator).tolist() if strategy == "random" else
             list(LengthGroupedSampler(size, lengths=source.tolist(), generator=generator)))
    return [order[i:i + size] for i in range(0, len(order) - size + 1, size)]


def device_lengths_case(name: str, shape: dict, device: str, strategy: str, compile_model: bool, max_tokens: int,
                        steps: int, dropout: float = 0.1, packing_length: int | None = None,
                        attention: str = "sdpa") -> dict:
    """Training tokens/s on sentences of natural lengths (`synthetic_lengths`): real source + target tokens (padding
    excluded) per second over `steps` batches of `strategy` (`length_batches`), bf16 autocast, fused AdamW; compiled
    with dynamic shapes, or static ones for packed rows (`compile_model` "reduce-overhead": with CUDA graphs). The
    batches are run twice and the second pass is timed: a long run meets every batch shape again and again, and the
    first pass pays what is paid once per shape (compilation, kernel plans, allocations). MFU counts the real tokens'
    FLOPs. `attention`: our model's backend."""
    import torch

    from vanilla_transformer.training import PackedSeq2SeqCollator, default_packing_length

    source, target = synthetic_lengths(200_000)
    length = packing_length or default_packing_length(max(source.max(), target.max()), max_tokens, shape["d_model"])
    batches = length_batches(strategy, source, target, max_tokens, packing_length=length)[:steps]
    vocab = shape.get("vocab", VOCAB)
    g = torch.Generator().manual_seed(1)

    def padded(lengths, fill):
        width = -(-max(lengths) // 8) * 8
        ids = torch.full((len(lengths), width), fill, dtype=torch.long)
        for row, n in zip(ids, lengths):
            row[:n] = torch.randint(4, vocab, (n,), generator=g)
        return ids.to(device)

    inputs, collate = [], PackedSeq2SeqCollator(0, 1, max_tokens // length, length)
    for batch in batches:
        if strategy == "packed":  # random ids in packed rows
            inputs.append({k: v.to(device) for k, v in collate([dict(
                row=row, input_ids=torch.randint(4, vocab, (int(source[i]),), generator=g).tolist(),
                labels=torch.randint(4, vocab, (int(target[i]),), generator=g).tolist()) for row, i in batch]).items()})
            continue
        src = padded(source[batch].tolist(), 0)
        labels = padded(target[batch].tolist(), -100)
        inputs.append(dict(input_ids=src, attention_mask=(src != 0).long(), labels=labels))
    batches = [[i for _, i in batch] for batch in batches] if strategy == "packed" else batches
    torch.manual_seed(0)
    model = build(name, shape, dropout, attention).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device == "cuda")
    if compile_model:  # one shape (packed rows): a static graph, CUDA graphs with "reduce-overhead"; else dynamic
        static = strategy == "packed"
        forward = torch.compile(model, dynamic=not static,
                                mode=compile_model if isinstance(compile_model, str) else None)
    else:
        forward = model
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    step = lambda batch: bf16_training_step(forward, optimizer, device, batch)  # noqa: E731

    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for batch in inputs:  # compilation happens here
        step(batch)
    sync()
    first = time.perf_counter() - start
    start = time.perf_counter()
    for batch in inputs:
        step(batch)
    sync()
    seconds = time.perf_counter() - start
    real = sum(int(source[b].sum() + target[b].sum()) for b in batches)
    padded_total = sum(batch["input_ids"].numel() + batch["labels"].numel() for batch in inputs)
    flops = sum(analytic_flops("train", shape, 1, int(s), int(t))
                for b in batches for s, t in zip(source[b], target[b]))
    return dict(tokens_per_second=real / seconds, step_seconds=seconds / len(batches), warmup_seconds=first,
                flops_per_second=flops / seconds, padding=1 - real / padded_total,
                pairs_per_step=sum(len(b) for b in batches) / len(batches),
                packing_length=length if strategy == "packed" else None, shapes=len({
                    (tuple(batch["input_ids"].shape), tuple(batch["labels"].shape)) for batch in inputs}),
                peak_memory_gb=torch.cuda.max_memory_allocated() / 1e9 if device == "cuda" else None)


LENGTH_CASES = [  # (model, batches, compiled, budget multiple): in order of importance
    ("ours", "tokens", False, 1), ("ours", "packed", False, 1), ("ours", "packed", "default", 1),
    ("ours", "packed", "reduce-overhead", 1), ("marian", "grouped", False, 1), ("marian", "random", False, 1),
    ("marian", "tokens", False, 1), ("ours", "tokens", True, 1), ("marian", "grouped", True, 1),
    ("ours", "tokens", True, 4), ("marian", "random", True, 1)]


def device_lengths_benchmark(shape: dict, device: str, max_tokens: int, steps: int, peak, measured,
                             deadline: float, result: dict, save, compile_modes=(False,),
                             packing_length: int | None = None, attention: str = "sdpa") -> None:
    """Every LENGTH_CASES row on one device (none starts after `deadline`, a perf_counter time): ours with token
    budgets against Marian with the Trainer's sentence batches, random or grouped by length."""
    import torch

    wanted = {False: False in compile_modes, True: "dynamic" in compile_modes, "default": "default" in compile_modes,
              "reduce-overhead": "reduce-overhead" in compile_modes and device == "cuda"}
    for name, strategy, compiled, multiple in [case for case in LENGTH_CASES if wanted[case[2]]]:
        batching = {"tokens": "--max_tokens", "packed": "--packing"}.get(strategy, strategy + " batches")
        label = f"{name} {batching} {max_tokens * multiple}{COMPILE_LABELS[compiled] if compiled else ''}"
        label += f" {attention}" if name == "ours" and attention != "sdpa" else ""
        if time.perf_counter() > deadline:
            result["skipped"].append(dict(task="lengths", case=label))
            print(f"lengths {label}: skipped (time budget)", flush=True)
            continue
        try:
            row = device_lengths_case(name, shape, device, strategy, compiled, max_tokens * multiple, steps,
                                      packing_length=packing_length, attention=attention)
        except Exception as error:  # noqa: BLE001 - one failed case (e.g. out of memory) is reported
            message = str(error).splitlines()[0] if str(error) else ""
            print(f"lengths {label}: failed ({type(error).__name__}: {message})", flush=True)
            continue
        finally:
            if device == "cuda":
                torch.cuda.empty_cache()
        row.update(case=label, model=name, batches=strategy, compiled=compiled, max_tokens=max_tokens * multiple,
                   attention=attention if name == "ours" else "sdpa",
                   dtype="bf16", mfu=None if peak is None else row["flops_per_second"] / peak,
                   matmul_fraction=row["flops_per_second"] / measured)
        result["lengths"].append(row)
        mfu = "" if row["mfu"] is None else f"MFU {row['mfu'] * 100:.1f}%  "
        print(f"lengths {label:42s} {row['tokens_per_second']:10.0f} real tokens/s  {mfu}padding "
              f"{row['padding'] * 100:4.1f}%  {row['pairs_per_step']:5.0f} pairs/step  {row['shapes']} shapes  step "
              f"{row['step_seconds'] * 1000:.1f} ms  warm-up {row['warmup_seconds']:.1f} s  peak "
              f"{row['peak_memory_gb'] or 0:.1f} GB", flush=True)
        save()


def device_inference_cases(shape: dict, device: str, task: str, compute_types, reps: int) -> dict:
    """Sentences/s of greedy or beam-4 search, exactly 32 new tokens for 32-token sources: ours and Marian in PyTorch
    (bf16 weights), and each served by CTranslate2 in `compute_types`. Batch 64 sentences (16 for beam)."""
    import torch

    batch, beams = (64, 1) if task == "greedy" else (16, 4)
    vocab = shape.get("vocab", VOCAB)
    src = torch.randint(4, vocab, (batch, 32), generator=torch.Generator().manual_seed(1))
    out = {}
    for name in ("ours", "marian"):
        torch.manual_seed(0)
        model = build(name, shape).to(device, torch.bfloat16).eval()
        ids, mask = src.to(device), torch.ones_like(src).to(device)

        def generate(model=model, ids=ids, mask=mask):
            with torch.inference_mode():
                model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=32, min_new_tokens=32,
                               num_beams=beams, do_sample=False, early_stopping=False)
        out[f"{name} pytorch bfloat16"] = batch / timed(generate, device, warmup=2, reps=reps)
        del model
    sources = [[f"t{i}" for i in row] for row in src.tolist()]
    for compute_type in compute_types:
        for name in ("ours", "marian"):
            label = f"{name} ctranslate2 {compute_type}"
            try:
                translator = ctranslate2_translator(name, shape, compute_type, torch.get_num_threads(), device)
                run = lambda: translator.translate_batch(sources, beam_size=beams, min_decoding_length=32,  # noqa: E731
                                                         max_decoding_length=32)
                out[label] = batch / timed(run, device, warmup=2, reps=reps)
            except (ImportError, RuntimeError, ValueError) as error:  # no ctranslate2, or no CUDA build of it
                print(f"  {label}: not measured ({type(error).__name__}: {str(error).splitlines()[0]})", flush=True)
    return out


COMPILE_LABELS = {False: "", "default": " compiled", "reduce-overhead": " CUDA graphs", True: " compiled dynamic"}


def device_benchmark(device: str, presets, compile_modes, vocab: int, batch: int, length: int, reps: int,
                     compute_types, time_budget: float, output: str, tasks=("train", "greedy", "beam"),
                     steps: int = 40, packing_length: int | None = None, attention: str = "sdpa") -> int:
    """Ours against MarianMTModel of the same shape on one device (a CUDA GPU; the CPU for a check), in one process:
    training tokens/s and MFU in bf16 in each of `compile_modes` (False: eager; "default", "reduce-overhead":
    `torch.compile` modes; "dynamic": the natural-length cases compiled with dynamic shapes too), on sentences of one
    length ("train") and of natural lengths with a budget of `batch` x `length` tokens per side ("lengths"); greedy
    and beam sentences/s in PyTorch and CTranslate2. Cases run in order of importance and stop starting once
    `time_budget` seconds have passed."""
    import torch

    started = time.perf_counter()
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    peak, measured = datasheet_peak(name), device_matmul_rate(device)
    print(f"device: {name}; bf16 matmul measured {measured / 1e12:.1f} TFLOP/s, datasheet dense bf16 "
          f"{'unknown' if peak is None else f'{peak / 1e12:.0f} TFLOP/s'}; torch {torch.__version__}", flush=True)
    result = dict(device=name, torch=torch.__version__, matmul_tflops=measured / 1e12,
                  datasheet_tflops=None if peak is None else peak / 1e12, vocab=vocab, batch=batch, length=length,
                  training=[], inference=[], lengths=[], skipped=[])
    plan = []  # (what, preset, compile mode): inference on the first shape only, before the slow compiled cases
    for preset in presets:
        plan += [("train", preset, False)] if "train" in tasks and False in compile_modes else []
        plan += [(task, preset, False) for task in ("greedy", "beam") if task in tasks and preset == presets[0]]
        plan += [("train", preset, mode) for mode in compile_modes if mode in ("default", "reduce-overhead")
                 and "train" in tasks]

    def save():
        with open(output, "w") as f:
            json.dump(result, f, indent=2)

    if "lengths" in tasks:
        device_lengths_benchmark(dict(shape_of(presets[0]), vocab=vocab), device, batch * length, steps,
                                 peak, measured, started + time_budget, result, save, compile_modes, packing_length,
                                 attention)
    for what, preset, compiled in plan:
        label = COMPILE_LABELS[compiled]
        if time.perf_counter() - started > time_budget:
            result["skipped"].append(dict(task=what, preset=preset, compiled=compiled))
            print(f"{preset} {what}{label}: skipped (time budget)", flush=True)
            continue
        shape = dict(shape_of(preset), vocab=vocab)
        if what == "train":
            rows = {}
            for model_name in ("ours", "marian"):
                try:
                    rows[model_name] = device_training_case(model_name, shape, device, batch, length, compiled, reps)
                except Exception as error:  # noqa: BLE001 - one failed case (e.g. out of memory) is reported
                    print(f"{preset} train {model_name}: failed ({type(error).__name__}: "
                          f"{str(error).splitlines()[0] if str(error) else ''})", flush=True)
                if device == "cuda":
                    torch.cuda.empty_cache()
            for model_name, row in rows.items():
                row.update(preset=preset, model=model_name, compiled=compiled, dtype="bf16",
                           mfu=None if peak is None else row["flops_per_second"] / peak,
                           matmul_fraction=row["flops_per_second"] / measured)
                result["training"].append(row)
            ratio = rows["ours"]["tokens_per_second"] / rows["marian"]["tokens_per_second"] if len(rows) == 2 else None
            for model_name, row in rows.items():
                mfu = "" if row["mfu"] is None else f"MFU {row['mfu'] * 100:.1f}%  "
                print(f"{preset:4s} train bf16{label:12s} {model_name:6s} "
                      f"{row['tokens_per_second']:10.0f} tokens/s  {mfu}(of measured matmul "
                      f"{row['matmul_fraction'] * 100:.1f}%)  step {row['step_seconds'] * 1000:.1f} ms  "
                      f"first step {row['first_step_seconds']:.1f} s  peak "
                      f"{row['peak_memory_gb'] or 0:.1f} GB", flush=True)
            if ratio is not None:
                print(f"{preset:4s} train bf16{label}: ours / Marian {ratio:.2f}x", flush=True)
        else:
            rates = device_inference_cases(shape, device, what, compute_types, reps)
            reference = rates.get("marian pytorch bfloat16")
            for label, rate in rates.items():
                result["inference"].append(dict(preset=preset, task=what, case=label, sentences_per_second=rate,
                                                ratio_to_marian_pytorch=rate / reference if reference else None))
                print(f"{preset:4s} {what:6s} {label:32s} {rate:9.1f} sentences/s  "
                      f"{rate / reference:5.2f}x Marian in PyTorch", flush=True)
        save()
    save()
    print(f"wrote {output} ({time.perf_counter() - started:.0f} s)")
    return 0


def padding_report(prefix: str, source_lang: str, target_lang: str, budgets, batch_size: int = 64,
                   vocab_size: int = 8000, seed: int = 42, multiple: int = 1,
                   packing_lengths=(64, 128, 256)) -> list[dict]:
    """The share of padding in one epoch's training batches of a parallel corpus (`prefix`.src/.tgt), tokenized with a
    joint BPE of `vocab_size` and padded to a multiple of `multiple` (the translation command pads to 8 on a GPU, to
    the longest on a CPU): sentence batches of `batch_size` in random order and grouped by length (Trainer's
    `--train_sampling_strategy group_by_length`), token-budget batches (`--max_tokens`) for each budget, and packed
    rows (`--packing`) of each of `packing_lengths` within each budget (with `multiple` 1 only: they have one shape).
    Padding counts on both sides (source and target)."""
    import numpy as np
    import torch
    from transformers.trainer_pt_utils import LengthGroupedSampler

    from vanilla_transformer.data import load_parallel_text
    from vanilla_transformer.tokenization import train_tokenizer
    from vanilla_transformer.training import PackedBatchSampler, TokenBudgetBatchSampler

    pairs = load_parallel_text(prefix, source_lang, target_lang)["translation"]
    sources, targets = [p[source_lang] for p in pairs], [p[target_lang] for p in pairs]
    tokenizer = train_tokenizer(sources + targets, vocab_size=vocab_size)
    lengths = [np.array([len(ids) for ids in tokenizer(texts, truncation=True, max_length=128)["input_ids"]])
               for texts in (sources, targets)]

    def share(batches):
        real = padded = 0
        for batch in batches:
            for side in lengths:
                real += side[batch].sum()
                padded += len(batch) * (-(-side[batch].max() // multiple) * multiple)
        return dict(batches=len(batches), padding=1 - real / padded,
                    mean_tokens=padded / len(batches) / 2)  # padded tokens per batch and side

    n = len(lengths[0])
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    grouped = list(LengthGroupedSampler(batch_size, lengths=lengths[0].tolist(),
                                        generator=torch.Generator().manual_seed(seed)))
    rows = [dict(batching=f"random, {batch_size} pairs", **share([order[i:i + batch_size]
                                                                  for i in range(0, n, batch_size)])),
            dict(batching=f"group_by_length, {batch_size} pairs", **share([grouped[i:i + batch_size]
                                                                          for i in range(0, n, batch_size)]))]
    for budget in budgets:
        sampler = TokenBudgetBatchSampler(*lengths, budget, seed=seed, pad_to_multiple_of=multiple)
        rows.append(dict(batching=f"--max_tokens {budget}", **share(list(sampler))))
    for budget, length in [(b, n) for b in budgets for n in packing_lengths if n <= b and multiple == 1]:
        sampler = PackedBatchSampler(*lengths, length, budget // length, seed=seed)  # one shape: no multiple
        real = sum(side.sum() for side in lengths)
        rows.append(dict(batching=f"--max_tokens {budget} --packing (rows of {length})", batches=len(sampler),
                         padding=1 - real / (2 * len(sampler) * (budget // length) * length),
                         mean_tokens=budget // length * length))
    for row in rows:
        print(f"padded to a multiple of {multiple}: {row['batching']:44s} {row['batches']:6d} batches  "
              f"{row['mean_tokens']:7.0f} padded tokens per batch and side  padding {row['padding'] * 100:5.1f}%",
              flush=True)
    return rows


def recombined_corpus(prefix: str, source_lang: str, target_lang: str, pairs: int, out_prefix: str, seed: int = 0):
    """`pairs` sentence pairs, each one or two random pairs of the corpus `prefix` joined by a space, written to
    `out_prefix`.SRC / .TGT: a corpus of any size made of natural sentences (generated when measured, never stored)."""
    sides = [open(f"{prefix}.{lang}", encoding="utf-8").read().splitlines() for lang in (source_lang, target_lang)]
    rng = random.Random(seed)
    with open(f"{out_prefix}.{source_lang}", "w", encoding="utf-8") as src, \
            open(f"{out_prefix}.{target_lang}", "w", encoding="utf-8") as tgt:
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


def corpus_report(prefix: str, source_lang: str, target_lang: str, sizes, workdir: str, max_tokens: int = 4096,
                  steps: int = 10) -> list[dict]:
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
        command = [sys.executable, "-m", "vanilla_transformer.run_translation",
                   "--train_file", os.path.join(folder, "train"), "--source_lang", source_lang,
                   "--target_lang", target_lang, "--config_name", "small", "--max_tokens", str(max_tokens),
                   "--max_steps", str(steps), "--do_train", "--save_strategy", "no", "--report_to", "none",
                   "--cache_dir", os.path.join(folder, "cache"), "--output_dir", os.path.join(folder, "model"),
                   "--logging_steps", str(steps)]
        row = dict(pairs=pairs, max_tokens=max_tokens, steps=steps)
        for run in ("first", "cached", "streaming"):
            result = timed_run(command + (["--streaming"] if run == "streaming" else []),
                               os.path.join(folder, f"{run}.log"))
            with open(os.path.join(folder, "model", "train_results.json")) as f:
                metrics = json.load(f)
            row[f"{run}_to_first_step_s"] = result["seconds"] - metrics["train_runtime"]
            row[f"{run}_peak_rss_anon_mb"] = result["peak_rss_anon_mb"]
            row[f"{run}_metrics"] = metrics
        row["preparation_s"] = row["first_to_first_step_s"] - row["cached_to_first_step_s"]  # the data work alone
        row["preparation_pairs_per_s"] = pairs / row["preparation_s"]
        rows.append(row)
        print(f"{pairs:>10,} pairs: start to first step {row['first_to_first_step_s']:6.1f} s, on the cache "
              f"{row['cached_to_first_step_s']:5.1f} s (preparation {row['preparation_pairs_per_s']:,.0f} pairs/s); "
              f"peak RssAnon {row['first_peak_rss_anon_mb']:,.0f} MB, on the cache "
              f"{row['cached_peak_rss_anon_mb']:,.0f} MB; training "
              f"{row['cached_metrics']['train_tokens_per_second']:,.0f} tokens/s; streamed: first step "
              f"{row['streaming_to_first_step_s']:5.1f} s, peak RssAnon {row['streaming_peak_rss_anon_mb']:,.0f} MB, "
              f"training {row['streaming_metrics']['train_tokens_per_second']:,.0f} tokens/s", flush=True)
    return rows


def measure(spec: dict) -> dict:
    proc = subprocess.run([sys.executable, "-m", "vanilla_transformer.benchmark", "--_child", json.dumps(spec)],
                          capture_output=True, text=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child {spec} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=None, choices=["tiny", "small", "base", "big"],
                        help="Model shapes (default: small base on the CPU, base big with --device cuda)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                        help="cuda: the GPU cases (training tokens/s and MFU in bf16, eager and torch.compile; "
                             "greedy/beam in PyTorch and CTranslate2), ours vs Marian in one process")
    parser.add_argument("--compile", nargs="+", default=["false", "true", "reduce-overhead"],
                        choices=["false", "true", "reduce-overhead", "dynamic"],
                        help="--device cuda: training eager (false), under torch.compile (true) and/or torch.compile "
                             "with CUDA graphs (reduce-overhead); dynamic: --tasks lengths also compiled with dynamic "
                             "shapes (slow to warm up: not a default)")
    parser.add_argument("--vocab_size", type=int, default=None,
                        help=f"Vocabulary of every model (default {VOCAB}; 37000, the paper's shared BPE, with --device "
                             "cuda)")
    parser.add_argument("--batch_size", type=int, default=200,
                        help="--device cuda training: sentence pairs per step (with --length 64: 25,600 tokens, the "
                             "paper's batch)")
    parser.add_argument("--length", type=int, default=64, help="--device cuda training: tokens per sentence")
    parser.add_argument("--packing_length", type=int, default=None,
                        help="--tasks lengths: the rows of the --packing cases (default: as train-translation's)")
    parser.add_argument("--attention", default="sdpa", choices=["sdpa", "flex_attention", "eager"],
                        help="--tasks lengths: our model's attention backend (flex_attention: block masks; GPUs only "
                             "for training)")
    parser.add_argument("--time_budget", type=float, default=float("inf"),
                        help="--device cuda: start no case after this many seconds")
    parser.add_argument("--quick", action="store_true", help="CI-sized: tiny preset, 5 repetitions, one round")
    parser.add_argument("--rounds", type=int, default=2, help="Alternations ours/reference per case")
    parser.add_argument("--reps", type=int, default=5, help="Timed repetitions per child (>= 5)")
    parser.add_argument("--tasks", nargs="+", default=None,
                        help="Only these tasks (--device cuda: train, lengths, greedy, beam; default all but lengths). "
                             "--tasks lengths alone on the CPU: the natural-length training cases there, in bf16. "
                             "--tasks tagging-engines alone: a tagger of the CoNLL recipe's shape in PyTorch and ONNX "
                             "Runtime (float32, int8), batches of 1 and 32 (needs the onnx extra). --tasks "
                             "tagging-batches alone: the tagger on batches of mixed lengths, one padded batch against "
                             "length-cut batches. --tasks cpu-kernels alone: training steps with our CPU dropout and "
                             "cross-entropy against torch's, fp32 and bf16")
    parser.add_argument("--engines", nargs="+", default=["pytorch", "ctranslate2"], choices=["pytorch", "ctranslate2"],
                        help="Only the cases that serve our model with these engines")
    parser.add_argument("--compute_types", nargs="+", default=["float32", "int8"], choices=["float32", "int8"],
                        help="CTranslate2 cases: only these compute types")
    parser.add_argument("--in_process", action="store_true",
                        help="Greedy/beam only: time every case (--engines, --compute_types) alternately in ONE process "
                             "(8 alternations) and print the medians; separates model differences from "
                             "process-to-process noise")
    parser.add_argument("--dropout", type=float, default=0.0,
                        help="Dropout on every model's embeddings and sub-layer outputs (the paper trains with 0.1); "
                             "it acts in the training cases only")
    parser.add_argument("--padding", default=None, metavar="PREFIX",
                        help="Only report the padding share of training batches on the parallel corpus PREFIX.SRC / "
                             "PREFIX.TGT (--source_lang, --target_lang): sentence batches vs --max_tokens budgets")
    parser.add_argument("--corpus", nargs="+", type=int, default=None, metavar="PAIRS",
                        help="Only the large-corpus case: for each number of pairs, a corpus recombined from the "
                             "parallel corpus --corpus_source, trained from its text files on an empty cache and again "
                             "on the cache (start to first step, peak anonymous memory, tokens/s)")
    parser.add_argument("--corpus_source", default=os.path.join("..", "shared", "data", "multi30k", "train"),
                        metavar="PREFIX")
    parser.add_argument("--workdir", default=None, help="--corpus: where the corpora and caches go (default: a "
                                                        "temporary folder, removed afterwards)")
    parser.add_argument("--source_lang", default="de")
    parser.add_argument("--target_lang", default="en")
    parser.add_argument("--max_tokens", nargs="+", type=int, default=[1024, 2048, 4096])
    parser.add_argument("--output", default="results.json")
    parser.add_argument("--_child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._child:
        spec = json.loads(args._child)
        print(json.dumps(tagging_engine_child(spec) if spec["task"] == "tagging-engine" else run_child(spec)))
        return 0
    if args.reps < 5:
        parser.error("--reps must be at least 5")
    if args.padding:
        rows = [dict(row, multiple=multiple) for multiple in (1, 8) for row in
                padding_report(args.padding, args.source_lang, args.target_lang, args.max_tokens, multiple=multiple)]
        with open(args.output, "w") as f:
            json.dump(rows, f, indent=2, default=float)
        return 0
    if args.corpus:
        with tempfile.TemporaryDirectory() as tmp:
            rows = corpus_report(args.corpus_source, args.source_lang, args.target_lang, args.corpus,
                                 args.workdir or tmp, max_tokens=max(args.max_tokens))
        with open(args.output, "w") as f:
            json.dump(rows, f, indent=2)
        return 0
    if args.tasks == ["cpu-kernels"]:
        cpu_kernels_benchmark(args.output, preset=(args.presets or ["small"])[0], rounds=args.rounds + 1)
        return 0
    if args.tasks == ["tagging-batches"]:
        tagging_batches_benchmark(args.output, reps=max(args.reps, 5) * 4, rounds=args.rounds + 1)
        return 0
    if args.tasks == ["tagging-engines"]:
        tagging_engines_benchmark(args.output, reps=max(args.reps, 5) * 4, rounds=args.rounds)
        return 0
    if args.device == "cpu" and args.tasks == ["lengths"]:  # natural lengths on the CPU, in bf16 as on a GPU
        compile_modes = [{"false": False, "true": "default"}.get(c, c) for c in args.compile]
        return device_benchmark("cpu", args.presets or ["small"], compile_modes, args.vocab_size or VOCAB,
                                args.batch_size, args.length, args.reps, [], args.time_budget, args.output,
                                ["lengths"], packing_length=args.packing_length, attention=args.attention)
    if args.device != "cpu":
        import torch

        if not torch.cuda.is_available():
            parser.error("--device cuda: PyTorch sees no CUDA GPU")
        compute_types = [{"float32": "float16", "int8": "int8_float16"}.get(c, c) for c in args.compute_types]
        tasks = args.tasks or ["train", "greedy", "beam"]
        compile_modes = [{"false": False, "true": "default"}.get(c, c) for c in args.compile]
        return device_benchmark(args.device, args.presets or ["base", "big"], compile_modes,
                                args.vocab_size or 37000, args.batch_size, args.length, max(args.reps, 10),
                                compute_types if "ctranslate2" in args.engines else [], args.time_budget,
                                args.output, tasks, packing_length=args.packing_length, attention=args.attention)
    if args.in_process:
        return in_process_ab(["tiny"] if args.quick else args.presets or ["small", "base"], args.tasks or ["greedy", "beam"], args.engines,
                             args.compute_types)
    presets = ["tiny"] if args.quick else args.presets or ["small", "base"]
    rounds = 1 if args.quick else args.rounds
    from vanilla_transformer.training import native_bf16

    # bf16 only where its matrix products are native: elsewhere every model runs them ~60x slower than fp32 in a
    # reference kernel, which measures nothing but that kernel (and takes hours)
    dtypes = ["fp32", "bf16"] if native_bf16("cpu") else ["fp32"]
    if "bf16" not in dtypes:
        print("no native bf16 matrix products on this CPU (no AVX-512/AMX): bf16 cases skipped")
    try:
        import ctranslate2  # noqa: F401
        engines = args.engines
    except ImportError:
        engines = [e for e in args.engines if e == "pytorch"]
        print("ctranslate2 is not installed: CTranslate2 cases skipped (pip install 'vanilla-transformer[ctranslate2]')")
    peaks = {dt: matmul_peak(dt) for dt in dtypes}
    print("matmul peak: " + ", ".join(f"{dt} {peak / 1e9:.0f} GFLOP/s" for dt, peak in peaks.items()))
    results = []
    for preset in presets:
        shape = dict(shape_of(preset), vocab=args.vocab_size or VOCAB)
        for task, dtype, reference, engine, compute_type in CASES:
            if (args.tasks and task not in args.tasks) or dtype not in dtypes or engine not in engines or (
                    compute_type is not None and compute_type not in args.compute_types):
                continue
            ours_runs, ref_runs, ref_ct2_runs = [], [], []
            base = dict(task=task, dtype=dtype, shape=shape, reps=args.reps, dropout=args.dropout)
            ct2 = dict(engine=engine, compute_type=compute_type)
            models = [(dict(base, model="ours", **ct2), ours_runs), (dict(base, model=reference), ref_runs)]
            if engine == "ctranslate2":
                models.append((dict(base, model=reference, **ct2), ref_ct2_runs))
            for _ in range(rounds):  # alternate the models
                for spec, runs in models:
                    runs.append(measure(spec))
            ours = statistics.median(r["value"] for r in ours_runs)
            ref = statistics.median(r["value"] for r in ref_runs)
            ref_ct2 = statistics.median(r["value"] for r in ref_ct2_runs) if ref_ct2_runs else None
            row = dict(task=task, preset=preset, dtype=dtype, engine=engine, compute_type=compute_type,
                       dropout=args.dropout, ours=ours, reference=ref,
                       reference_name={"marian": "MarianMTModel", "bart": "BartForConditionalGeneration",
                                       "bert": "BertForTokenClassification"}[reference],
                       unit=UNITS[task], ratio=ours / ref,
                       peak_rss_mb_ours=max(r["peak_rss_mb"] for r in ours_runs),
                       peak_rss_mb_reference=max(r["peak_rss_mb"] for r in ref_runs),
                       reference_ctranslate2=ref_ct2, ratio_ctranslate2=ours / ref_ct2 if ref_ct2 else None,
                       peak_tensor_mb_ours=None if engine == "ctranslate2" else max(r["peak_tensor_mb"] for r in ours_runs),
                       peak_tensor_mb_reference=max(r["peak_tensor_mb"] for r in ref_runs),
                       mfu_ours=statistics.median(r["flops"] for r in ours_runs) / peaks[dtype],
                       **{f"us_per_token_{side}": None if runs[0]["us_per_token"] is None else
                          statistics.median(r["us_per_token"] for r in runs)
                          for side, runs in (("ours", ours_runs), ("reference", ref_runs))})
            results.append(row)
            spread = [f"{min(r['value'] for r in runs):.1f}-{max(r['value'] for r in runs):.1f}"
                      for runs in (ours_runs, ref_runs)]  # across rounds: how noisy the machine was
            served = "" if engine == "pytorch" else f" ctranslate2 {compute_type}"
            versus_ct2 = "" if ref_ct2 is None else f"  vs Marian in ctranslate2 {ref_ct2:.1f}: {ours / ref_ct2:.2f}"
            tensors = ("" if row["peak_tensor_mb_ours"] is None else
                       f"tensors {row['peak_tensor_mb_ours']:.0f}/{row['peak_tensor_mb_reference']:.0f} MB  ")
            per_token = ("" if row["us_per_token_ours"] is None else
                         f" ({row['us_per_token_ours']:.0f}/{row['us_per_token_reference']:.0f} us per token)")
            print(f"{preset:5s} {task:20s} {dtype:4s}{served} ours {ours:9.1f} {row['unit']:11s}{per_token} "
                  f"{row['reference_name']:28s} {ref:9.1f}  ratio {row['ratio']:.2f}{versus_ct2}  "
                  f"RSS {row['peak_rss_mb_ours']:.0f}/{row['peak_rss_mb_reference']:.0f} MB  {tensors}"
                  f"MFU {row['mfu_ours'] * 100:.1f}%  rounds: ours {spread[0]}, reference {spread[1]}", flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(results, f, indent=2)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
