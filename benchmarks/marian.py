"""Ours against HF's MarianMTModel / BartForConditionalGeneration / BertForTokenClassification of the same shape,
fed the same random batches, in PyTorch and (ours and Marian with the same weights) in CTranslate2; the GPU
inference cases."""

import functools
import resource
import statistics
import tempfile
import time

from .common import VOCAB, analytic_flops, build, matmul_peak, measure, shape_of, tensor_peak_mb, timed, word_tokenizer

CASES = [  # (task, dtype, reference, engine serving ours, its compute type)
    ("train", "fp32", "marian", "pytorch", None),
    ("train", "bf16", "marian", "pytorch", None),
    ("greedy", "fp32", "marian", "pytorch", None),
    ("greedy", "bf16", "marian", "pytorch", None),
    ("beam", "fp32", "marian", "pytorch", None),
    ("train", "fp32", "bart", "pytorch", None),
    ("greedy", "fp32", "bart", "pytorch", None),
    ("token_classification", "fp32", "bert", "pytorch", None),
    # deployment: our model served by CTranslate2 against HF Marian in PyTorch, and against Marian served by
    # CTranslate2 too (CTranslate2's own converter), with the same compute type
    ("greedy", "fp32", "marian", "ctranslate2", "float32"),
    ("greedy", "fp32", "marian", "ctranslate2", "int8"),
    ("beam", "fp32", "marian", "ctranslate2", "float32"),
    ("beam", "fp32", "marian", "ctranslate2", "int8"),
]


UNITS = {"train": "tokens/s", "greedy": "sentences/s", "beam": "sentences/s", "token_classification": "tokens/s"}


MARIAN_NAMES = [
    ("embed.embed_tokens", "embed_tokens"),
    ("ffn_layer_norm", "final_layer_norm"),
    ("ffn.fc1", "fc1"),
    ("ffn.fc2", "fc2"),
]


def marian_with_weights_of(ours, shape: dict):
    """A MarianMTModel of the same shape holding `ours`'s weights and position table (the same logits for the same
    inputs)."""
    # The CTranslate2 cases serve both converters' exports of the same numbers: CTranslate2's speed depends on the
    # weights' values (docs/benchmarks.md), which would otherwise be counted as the converter's.
    from vanilla_transformer.model.modeling_vanilla_transformer import VanillaTransformerPositionalEmbedding

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

    import ctranslate2
    import torch
    from ctranslate2.converters.transformers import MarianMTLoader

    from vanilla_transformer.deploy.ctranslate2 import model_spec

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
        model = build(
            ("ours_tagger" if name == "ours" else name) if tagger else name, shape, spec["dropout"], attention
        )
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
            out = translator.translate_batch(sources, beam_size=beams, min_decoding_length=32, max_decoding_length=32)
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
                out = model.generate(
                    input_ids=src,
                    attention_mask=mask,
                    max_new_tokens=32,
                    min_new_tokens=32,
                    num_beams=beams,
                    do_sample=False,
                    early_stopping=False,
                )
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
    return {
        "value": units / seconds,
        "seconds": seconds,
        "peak_rss_mb": rss,
        "peak_tensor_mb": peak_tensors,
        "us_per_token": seconds * 1e6 / generated if generated else None,
        "flops": analytic_flops(task, shape, batch, src_len, 32) / seconds,
    }


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
        translators = {
            f"{name} ctranslate2 {ct}": ctranslate2_translator(name, shape, ct, torch.get_num_threads())
            for name in ("ours", "marian")
            for ct in compute_types
            if "ctranslate2" in engines
        }
        for task in tasks:
            if task not in ("greedy", "beam"):
                continue
            batch, beams = (32, 1) if task == "greedy" else (8, 4)
            src = torch.randint(4, VOCAB, (batch, 32), generator=torch.Generator().manual_seed(1))
            sources = [[f"t{i}" for i in row] for row in src.tolist()]
            cases = {}
            for name, model in models.items():
                if name == "marian" or "pytorch" in engines:
                    cases[f"{name} pytorch float32"] = lambda model=model, src=src, beams=beams: model.generate(
                        input_ids=src,
                        attention_mask=torch.ones_like(src),
                        max_new_tokens=32,
                        min_new_tokens=32,
                        num_beams=beams,
                        do_sample=False,
                        early_stopping=False,
                    )
            for label, translator in translators.items():
                cases[label] = lambda translator=translator, sources=sources, beams=beams: translator.translate_batch(
                    sources, beam_size=beams, min_decoding_length=32, max_decoding_length=32
                )
            times = {label: [] for label in cases}
            for _ in range(alternations + 1):  # the first alternation warms up
                for label, run in cases.items():
                    with torch.inference_mode():
                        start = time.perf_counter()
                        run()
                        times[label].append(time.perf_counter() - start)
            ms = {label: statistics.median(t[1:]) * 1000 for label, t in times.items()}
            reference = ms["marian pytorch float32"]
            print(
                f"{preset} {task}, one process, {alternations} alternations (ms per call of {batch} sentences x 32 "
                "new tokens; us per generated token; ratio to MarianMTModel in PyTorch fp32, and ours to Marian in "
                "the same engine):",
                flush=True,
            )
            for label, value in ms.items():
                twin = ms.get(label.replace("ours", "marian")) if label.startswith("ours") else None
                same_engine = f"  ours/Marian {twin / value:5.2f}x" if twin else ""
                print(
                    f"  {label:28s} {value:8.1f} ms {value * 1000 / (batch * 32):7.0f} us/token  "
                    f"{reference / value:5.2f}x{same_engine}",
                    flush=True,
                )
    return 0


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
                model.generate(
                    input_ids=ids,
                    attention_mask=mask,
                    max_new_tokens=32,
                    min_new_tokens=32,
                    num_beams=beams,
                    do_sample=False,
                    early_stopping=False,
                )

        out[f"{name} pytorch bfloat16"] = batch / timed(generate, device, warmup=2, reps=reps)
        del model
    sources = [[f"t{i}" for i in row] for row in src.tolist()]
    for compute_type in compute_types:
        for name in ("ours", "marian"):
            label = f"{name} ctranslate2 {compute_type}"
            try:
                translator = ctranslate2_translator(name, shape, compute_type, torch.get_num_threads(), device)
                run = functools.partial(
                    translator.translate_batch, sources, beam_size=beams, min_decoding_length=32, max_decoding_length=32
                )
                out[label] = batch / timed(run, device, warmup=2, reps=reps)
            except (ImportError, RuntimeError, ValueError) as error:  # no ctranslate2, or no CUDA build of it
                print(f"  {label}: not measured ({type(error).__name__}: {str(error).splitlines()[0]})", flush=True)
    return out


REFERENCE_NAMES = {
    "marian": "MarianMTModel",
    "bart": "BartForConditionalGeneration",
    "bert": "BertForTokenClassification",
}


def case_dtypes_and_engines(engines) -> tuple[list[str], list[str]]:
    """The dtypes (bf16 only where its matrix products are native: elsewhere every model runs them ~60x slower than
    fp32 in a reference kernel, which measures nothing but that kernel, and takes hours) and the engines installed."""
    from vanilla_transformer.training.precision import native_bf16

    dtypes = ["fp32", "bf16"] if native_bf16("cpu") else ["fp32"]
    if "bf16" not in dtypes:
        print("no native bf16 matrix products on this CPU (no AVX-512/AMX): bf16 cases skipped")
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        engines = [e for e in engines if e == "pytorch"]
        print(
            "ctranslate2 is not installed: CTranslate2 cases skipped (pip install 'vanilla-transformer[ctranslate2]')"
        )
    return dtypes, list(engines)


def case_row(case: tuple, preset: str, dropout: float, runs: dict, peak: float) -> dict:
    """One case's row: medians over the rounds of `runs` ("ours", "reference", "reference_ctranslate2")."""
    task, dtype, reference, engine, compute_type = case
    ours_runs, ref_runs, ref_ct2_runs = runs["ours"], runs["reference"], runs["reference_ctranslate2"]
    ours = statistics.median(r["value"] for r in ours_runs)
    ref = statistics.median(r["value"] for r in ref_runs)
    ref_ct2 = statistics.median(r["value"] for r in ref_ct2_runs) if ref_ct2_runs else None
    return dict(
        task=task,
        preset=preset,
        dtype=dtype,
        engine=engine,
        compute_type=compute_type,
        dropout=dropout,
        ours=ours,
        reference=ref,
        reference_name=REFERENCE_NAMES[reference],
        unit=UNITS[task],
        ratio=ours / ref,
        peak_rss_mb_ours=max(r["peak_rss_mb"] for r in ours_runs),
        peak_rss_mb_reference=max(r["peak_rss_mb"] for r in ref_runs),
        reference_ctranslate2=ref_ct2,
        ratio_ctranslate2=ours / ref_ct2 if ref_ct2 else None,
        peak_tensor_mb_ours=None if engine == "ctranslate2" else max(r["peak_tensor_mb"] for r in ours_runs),
        peak_tensor_mb_reference=max(r["peak_tensor_mb"] for r in ref_runs),
        mfu_ours=statistics.median(r["flops"] for r in ours_runs) / peak,
        **{
            f"us_per_token_{side}": None
            if side_runs[0]["us_per_token"] is None
            else statistics.median(r["us_per_token"] for r in side_runs)
            for side, side_runs in (("ours", ours_runs), ("reference", ref_runs))
        },
    )


def print_case(row: dict, runs: dict) -> None:
    """One line per case, with the spread across rounds (how noisy the machine was)."""
    spread = [
        f"{min(r['value'] for r in runs[side]):.1f}-{max(r['value'] for r in runs[side]):.1f}"
        for side in ("ours", "reference")
    ]
    ours, ref, ref_ct2 = row["ours"], row["reference"], row["reference_ctranslate2"]
    served = "" if row["engine"] == "pytorch" else f" ctranslate2 {row['compute_type']}"
    versus_ct2 = "" if ref_ct2 is None else f"  vs Marian in ctranslate2 {ref_ct2:.1f}: {ours / ref_ct2:.2f}"
    tensors = (
        ""
        if row["peak_tensor_mb_ours"] is None
        else f"tensors {row['peak_tensor_mb_ours']:.0f}/{row['peak_tensor_mb_reference']:.0f} MB  "
    )
    per_token = (
        ""
        if row["us_per_token_ours"] is None
        else f" ({row['us_per_token_ours']:.0f}/{row['us_per_token_reference']:.0f} us per token)"
    )
    print(
        f"{row['preset']:5s} {row['task']:20s} {row['dtype']:4s}{served} ours {ours:9.1f} {row['unit']:11s}"
        f"{per_token} {row['reference_name']:28s} {ref:9.1f}  ratio {row['ratio']:.2f}{versus_ct2}  "
        f"RSS {row['peak_rss_mb_ours']:.0f}/{row['peak_rss_mb_reference']:.0f} MB  {tensors}"
        f"MFU {row['mfu_ours'] * 100:.1f}%  rounds: ours {spread[0]}, reference {spread[1]}",
        flush=True,
    )


def compare_with_references(args) -> list[dict]:
    """Every case of CASES that `args` selects (--presets, --tasks, --engines, --compute_types), ours and the reference
    alternating in child processes for `args.rounds` rounds; prints a line per case, returns the rows."""
    presets = ["tiny"] if args.quick else args.presets or ["small", "base"]
    rounds = 1 if args.quick else args.rounds
    dtypes, engines = case_dtypes_and_engines(args.engines)
    peaks = {dt: matmul_peak(dt) for dt in dtypes}
    print("matmul peak: " + ", ".join(f"{dt} {peak / 1e9:.0f} GFLOP/s" for dt, peak in peaks.items()))
    results = []
    for preset in presets:
        shape = dict(shape_of(preset), vocab=args.vocab_size or VOCAB)
        for case in CASES:
            task, dtype, reference, engine, compute_type = case
            if (
                (args.tasks and task not in args.tasks)
                or dtype not in dtypes
                or engine not in engines
                or (compute_type is not None and compute_type not in args.compute_types)
            ):
                continue
            base = dict(task=task, dtype=dtype, shape=shape, reps=args.reps, dropout=args.dropout)
            ct2 = dict(engine=engine, compute_type=compute_type)
            specs = {"ours": dict(base, model="ours", **ct2), "reference": dict(base, model=reference)}
            if engine == "ctranslate2":
                specs["reference_ctranslate2"] = dict(base, model=reference, **ct2)
            runs = {"ours": [], "reference": [], "reference_ctranslate2": []}
            for _ in range(rounds):  # alternate the models
                for side, spec in specs.items():
                    runs[side].append(measure(spec))
            results.append(case_row(case, preset, args.dropout, runs, peaks[dtype]))
            print_case(results[-1], runs)
    return results
