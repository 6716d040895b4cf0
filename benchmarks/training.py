"""Training speed: our CPU kernels against torch's, GPU training at fixed and natural lengths (token budgets, packed
rows, compiled, CUDA graphs) with MFU, and the padding share of a corpus's batches."""

import json
import statistics
import time

from .common import VOCAB, analytic_flops, build, datasheet_peak, device_matmul_rate, shape_of, timed
from .marian import device_inference_cases


def cpu_kernels_benchmark(
    output: str, preset: str = "small", rounds: int = 3, steps: int = 6, batch: int = 32, length: int = 32
) -> list[dict]:
    """Milliseconds per training step (translation, AdamW, dropout 0.1, label smoothing 0.1, `batch` pairs of `length`
    tokens a side, vocabulary 8000) with our CPU kernels (kernels_vanilla_transformer.py) and with torch's
    `F.dropout` / `F.cross_entropy` in their place, one or both; fp32 (SDPA) and, where the CPU has native bf16 matrix
    products, bf16 autocast (eager attention, as the training commands choose there). All variants in one process,
    alternating, `rounds` x `steps` timed steps each after a warm-up; the median."""
    from unittest import mock

    import torch
    import torch.nn.functional as F

    from vanilla_transformer.model import modeling_vanilla_transformer as modeling
    from vanilla_transformer.model.configuration_vanilla_transformer import VanillaTransformerConfig
    from vanilla_transformer.model.kernels_vanilla_transformer import plain_cross_entropy
    from vanilla_transformer.training.precision import native_bf16

    def torch_dropout(x, p, training):
        return F.dropout(x, p, training)

    variants = {
        "ours": {"apply_dropout": modeling.apply_dropout},  # (patching a name with itself: no change)
        "torch dropout": {"apply_dropout": torch_dropout},
        "torch cross-entropy": {"cross_entropy": plain_cross_entropy},
        "torch both": {"apply_dropout": torch_dropout, "cross_entropy": plain_cross_entropy},
    }
    rows = []
    for dtype in ["fp32", "bf16"] if native_bf16("cpu") else ["fp32"]:
        torch.manual_seed(0)
        config = VanillaTransformerConfig.from_preset(preset, vocab_size=VOCAB, dropout=0.1, label_smoothing=0.1)
        model = modeling.VanillaTransformerForConditionalGeneration(config).train()
        model.set_attn_implementation("eager" if dtype == "bf16" else "sdpa")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        ids = torch.randint(4, VOCAB, (batch, length))
        labels = torch.randint(4, VOCAB, (batch, length))
        inputs = dict(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels)

        def step(model=model, inputs=inputs, optimizer=optimizer, dtype=dtype):
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
            rows.append(
                dict(
                    preset=preset,
                    dtype=dtype,
                    variant=name,
                    ms_per_step=median * 1000,
                    relative_to_ours=median / ours,
                    batch=batch,
                    length=length,
                )
            )
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


def device_training_case(
    name: str,
    shape: dict,
    device: str,
    batch: int,
    length: int,
    compile_mode: str | bool,
    reps: int,
    dropout: float = 0.1,
) -> dict:
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
    return dict(
        tokens_per_second=batch * 2 * length / seconds,
        step_seconds=seconds,
        first_step_seconds=first,
        flops_per_second=flops / seconds,
        peak_memory_gb=torch.cuda.max_memory_allocated() / 1e9 if device == "cuda" else None,
    )


def synthetic_lengths(pairs: int, seed: int = 0, longest: int = 128):
    """Source and target lengths (tokens, end of sentence included) of `pairs` sentence pairs shaped like a WMT corpus
    under a 37k BPE: log-normal sources (median 25, mean 28 tokens), each target 1.05x its source with a 15% spread,
    2 to `longest` tokens."""
    import numpy as np

    rng = np.random.default_rng(seed)
    source = rng.lognormal(3.2, 0.55, pairs)
    target = source * rng.lognormal(0.05, 0.15, pairs)
    return tuple(np.clip(np.rint(side), 2, longest).astype(np.int64) for side in (source, target))


def length_batches(
    strategy: str, source, target, max_tokens: int, seed: int = 0, packing_length: int | None = None
) -> list[list[int]]:
    """One epoch's batches (index lists, in training order) of pairs with these lengths. "tokens": `--max_tokens`
    (TokenBudgetBatchSampler, padded to a multiple of 8); "packed": `--packing` (PackedBatchSampler: (row, pair) keys,
    rows of `packing_length` tokens); "random": the Trainer's
    default, shuffled batches of a fixed number of pairs, as many as the budget holds at the mean length; "grouped":
    the same number of pairs with
    `--group_by_length` (transformers' LengthGroupedSampler)."""
    import numpy as np
    import torch
    from transformers.trainer_pt_utils import LengthGroupedSampler

    from vanilla_transformer.training.batching import PackedBatchSampler, TokenBudgetBatchSampler

    if strategy == "tokens":
        return list(TokenBudgetBatchSampler(source, target, max_tokens, seed=seed, pad_to_multiple_of=8))
    if strategy == "packed":  # (row, pair) keys
        return list(PackedBatchSampler(source, target, packing_length, max_tokens // packing_length, seed=seed))
    size = int(max_tokens // np.maximum(source, target).mean())
    generator = torch.Generator().manual_seed(seed)
    order = (
        torch.randperm(len(source), generator=generator).tolist()
        if strategy == "random"
        else list(LengthGroupedSampler(size, lengths=source.tolist(), generator=generator))
    )
    return [order[i : i + size] for i in range(0, len(order) - size + 1, size)]


def device_lengths_case(
    name: str,
    shape: dict,
    device: str,
    strategy: str,
    compile_model: bool,
    max_tokens: int,
    steps: int,
    dropout: float = 0.1,
    packing_length: int | None = None,
    attention: str = "sdpa",
) -> dict:
    """Training tokens/s on sentences of natural lengths (`synthetic_lengths`): real source + target tokens (padding
    excluded) per second over `steps` batches of `strategy` (`length_batches`), bf16 autocast, fused AdamW; compiled
    with dynamic shapes, or static ones for packed rows (`compile_model` "reduce-overhead": with CUDA graphs). The
    batches are run twice and the second pass is timed: a long run meets every batch shape again and again, and the
    first pass pays what is paid once per shape (compilation, kernel plans, allocations). MFU counts the real tokens'
    FLOPs. `attention`: our model's backend."""
    import torch

    from vanilla_transformer.training.batching import PackedSeq2SeqCollator, default_packing_length

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
            inputs.append(
                {
                    k: v.to(device)
                    for k, v in collate(
                        [
                            dict(
                                row=row,
                                input_ids=torch.randint(4, vocab, (int(source[i]),), generator=g).tolist(),
                                labels=torch.randint(4, vocab, (int(target[i]),), generator=g).tolist(),
                            )
                            for row, i in batch
                        ]
                    ).items()
                }
            )
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
        forward = torch.compile(
            model, dynamic=not static, mode=compile_model if isinstance(compile_model, str) else None
        )
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
    flops = sum(
        analytic_flops("train", shape, 1, int(s), int(t)) for b in batches for s, t in zip(source[b], target[b])
    )
    return dict(
        tokens_per_second=real / seconds,
        step_seconds=seconds / len(batches),
        warmup_seconds=first,
        flops_per_second=flops / seconds,
        padding=1 - real / padded_total,
        pairs_per_step=sum(len(b) for b in batches) / len(batches),
        packing_length=length if strategy == "packed" else None,
        shapes=len({(tuple(batch["input_ids"].shape), tuple(batch["labels"].shape)) for batch in inputs}),
        peak_memory_gb=torch.cuda.max_memory_allocated() / 1e9 if device == "cuda" else None,
    )


LENGTH_CASES = [  # (model, batches, compiled, budget multiple): in order of importance
    ("ours", "tokens", False, 1),
    ("ours", "packed", False, 1),
    ("ours", "packed", "default", 1),
    ("ours", "packed", "reduce-overhead", 1),
    ("marian", "grouped", False, 1),
    ("marian", "random", False, 1),
    ("marian", "tokens", False, 1),
    ("ours", "tokens", True, 1),
    ("marian", "grouped", True, 1),
    ("ours", "tokens", True, 4),
    ("marian", "random", True, 1),
]


def device_lengths_benchmark(
    shape: dict,
    device: str,
    max_tokens: int,
    steps: int,
    peak,
    measured,
    deadline: float,
    result: dict,
    save,
    compile_modes=(False,),
    packing_length: int | None = None,
    attention: str = "sdpa",
) -> None:
    """Every LENGTH_CASES row on one device (none starts after `deadline`, a perf_counter time): ours with token
    budgets against Marian with the Trainer's sentence batches, random or grouped by length."""
    import torch

    wanted = {
        False: False in compile_modes,
        True: "dynamic" in compile_modes,
        "default": "default" in compile_modes,
        "reduce-overhead": "reduce-overhead" in compile_modes and device == "cuda",
    }
    for name, strategy, compiled, multiple in [case for case in LENGTH_CASES if wanted[case[2]]]:
        batching = {"tokens": "--max_tokens", "packed": "--packing"}.get(strategy, strategy + " batches")
        label = f"{name} {batching} {max_tokens * multiple}{COMPILE_LABELS[compiled] if compiled else ''}"
        label += f" {attention}" if name == "ours" and attention != "sdpa" else ""
        if time.perf_counter() > deadline:
            result["skipped"].append(dict(task="lengths", case=label))
            print(f"lengths {label}: skipped (time budget)", flush=True)
            continue
        try:
            row = device_lengths_case(
                name,
                shape,
                device,
                strategy,
                compiled,
                max_tokens * multiple,
                steps,
                packing_length=packing_length,
                attention=attention,
            )
        except Exception as error:  # noqa: BLE001 - one failed case (e.g. out of memory) is reported
            message = str(error).splitlines()[0] if str(error) else ""
            print(f"lengths {label}: failed ({type(error).__name__}: {message})", flush=True)
            continue
        finally:
            if device == "cuda":
                torch.cuda.empty_cache()
        row.update(
            case=label,
            model=name,
            batches=strategy,
            compiled=compiled,
            max_tokens=max_tokens * multiple,
            attention=attention if name == "ours" else "sdpa",
            dtype="bf16",
            mfu=None if peak is None else row["flops_per_second"] / peak,
            matmul_fraction=row["flops_per_second"] / measured,
        )
        result["lengths"].append(row)
        mfu = "" if row["mfu"] is None else f"MFU {row['mfu'] * 100:.1f}%  "
        print(
            f"lengths {label:42s} {row['tokens_per_second']:10.0f} real tokens/s  {mfu}padding "
            f"{row['padding'] * 100:4.1f}%  {row['pairs_per_step']:5.0f} pairs/step  {row['shapes']} shapes  step "
            f"{row['step_seconds'] * 1000:.1f} ms  warm-up {row['warmup_seconds']:.1f} s  peak "
            f"{row['peak_memory_gb'] or 0:.1f} GB",
            flush=True,
        )
        save()


COMPILE_LABELS = {False: "", "default": " compiled", "reduce-overhead": " CUDA graphs", True: " compiled dynamic"}


def device_benchmark(
    device: str,
    presets,
    compile_modes,
    vocab: int,
    batch: int,
    length: int,
    reps: int,
    compute_types,
    time_budget: float,
    output: str,
    tasks=("train", "greedy", "beam"),
    steps: int = 40,
    packing_length: int | None = None,
    attention: str = "sdpa",
) -> int:
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
    print(
        f"device: {name}; bf16 matmul measured {measured / 1e12:.1f} TFLOP/s, datasheet dense bf16 "
        f"{'unknown' if peak is None else f'{peak / 1e12:.0f} TFLOP/s'}; torch {torch.__version__}",
        flush=True,
    )
    result = dict(
        device=name,
        torch=torch.__version__,
        matmul_tflops=measured / 1e12,
        datasheet_tflops=None if peak is None else peak / 1e12,
        vocab=vocab,
        batch=batch,
        length=length,
        training=[],
        inference=[],
        lengths=[],
        skipped=[],
    )
    plan = []  # (what, preset, compile mode): inference on the first shape only, before the slow compiled cases
    for preset in presets:
        plan += [("train", preset, False)] if "train" in tasks and False in compile_modes else []
        plan += [(task, preset, False) for task in ("greedy", "beam") if task in tasks and preset == presets[0]]
        plan += [
            ("train", preset, mode)
            for mode in compile_modes
            if mode in ("default", "reduce-overhead") and "train" in tasks
        ]

    def save():
        with open(output, "w") as f:
            json.dump(result, f, indent=2)

    if "lengths" in tasks:
        device_lengths_benchmark(
            dict(shape_of(presets[0]), vocab=vocab),
            device,
            batch * length,
            steps,
            peak,
            measured,
            started + time_budget,
            result,
            save,
            compile_modes,
            packing_length,
            attention,
        )
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
                    print(
                        f"{preset} train {model_name}: failed ({type(error).__name__}: "
                        f"{str(error).splitlines()[0] if str(error) else ''})",
                        flush=True,
                    )
                if device == "cuda":
                    torch.cuda.empty_cache()
            for model_name, row in rows.items():
                row.update(
                    preset=preset,
                    model=model_name,
                    compiled=compiled,
                    dtype="bf16",
                    mfu=None if peak is None else row["flops_per_second"] / peak,
                    matmul_fraction=row["flops_per_second"] / measured,
                )
                result["training"].append(row)
            ratio = rows["ours"]["tokens_per_second"] / rows["marian"]["tokens_per_second"] if len(rows) == 2 else None
            for model_name, row in rows.items():
                mfu = "" if row["mfu"] is None else f"MFU {row['mfu'] * 100:.1f}%  "
                print(
                    f"{preset:4s} train bf16{label:12s} {model_name:6s} "
                    f"{row['tokens_per_second']:10.0f} tokens/s  {mfu}(of measured matmul "
                    f"{row['matmul_fraction'] * 100:.1f}%)  step {row['step_seconds'] * 1000:.1f} ms  "
                    f"first step {row['first_step_seconds']:.1f} s  peak "
                    f"{row['peak_memory_gb'] or 0:.1f} GB",
                    flush=True,
                )
            if ratio is not None:
                print(f"{preset:4s} train bf16{label}: ours / Marian {ratio:.2f}x", flush=True)
        else:
            rates = device_inference_cases(shape, device, what, compute_types, reps)
            reference = rates.get("marian pytorch bfloat16")
            for label, rate in rates.items():
                result["inference"].append(
                    dict(
                        preset=preset,
                        task=what,
                        case=label,
                        sentences_per_second=rate,
                        ratio_to_marian_pytorch=rate / reference if reference else None,
                    )
                )
                print(
                    f"{preset:4s} {what:6s} {label:32s} {rate:9.1f} sentences/s  "
                    f"{rate / reference:5.2f}x Marian in PyTorch",
                    flush=True,
                )
        save()
    save()
    print(f"wrote {output} ({time.perf_counter() - started:.0f} s)")
    return 0


def padding_report(
    prefix: str,
    source_lang: str,
    target_lang: str,
    budgets,
    batch_size: int = 64,
    vocab_size: int = 8000,
    seed: int = 42,
    multiple: int = 1,
    packing_lengths=(64, 128, 256),
) -> list[dict]:
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
    from vanilla_transformer.training.batching import PackedBatchSampler, TokenBudgetBatchSampler

    pairs = load_parallel_text(prefix, source_lang, target_lang)["translation"]
    sources, targets = [p[source_lang] for p in pairs], [p[target_lang] for p in pairs]
    tokenizer = train_tokenizer(sources + targets, vocab_size=vocab_size)
    lengths = [
        np.array([len(ids) for ids in tokenizer(texts, truncation=True, max_length=128)["input_ids"]])
        for texts in (sources, targets)
    ]

    def share(batches):
        real = padded = 0
        for batch in batches:
            for side in lengths:
                real += side[batch].sum()
                padded += len(batch) * (-(-side[batch].max() // multiple) * multiple)
        return dict(
            batches=len(batches), padding=1 - real / padded, mean_tokens=padded / len(batches) / 2
        )  # padded tokens per batch and side

    n = len(lengths[0])
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    grouped = list(
        LengthGroupedSampler(batch_size, lengths=lengths[0].tolist(), generator=torch.Generator().manual_seed(seed))
    )
    rows = [
        dict(
            batching=f"random, {batch_size} pairs",
            **share([order[i : i + batch_size] for i in range(0, n, batch_size)]),
        ),
        dict(
            batching=f"group_by_length, {batch_size} pairs",
            **share([grouped[i : i + batch_size] for i in range(0, n, batch_size)]),
        ),
    ]
    for budget in budgets:
        sampler = TokenBudgetBatchSampler(*lengths, budget, seed=seed, pad_to_multiple_of=multiple)
        rows.append(dict(batching=f"--max_tokens {budget}", **share(list(sampler))))
    for budget, length in [(b, n) for b in budgets for n in packing_lengths if n <= b and multiple == 1]:
        sampler = PackedBatchSampler(*lengths, length, budget // length, seed=seed)  # one shape: no multiple
        real = sum(side.sum() for side in lengths)
        rows.append(
            dict(
                batching=f"--max_tokens {budget} --packing (rows of {length})",
                batches=len(sampler),
                padding=1 - real / (2 * len(sampler) * (budget // length) * length),
                mean_tokens=budget // length * length,
            )
        )
    for row in rows:
        print(
            f"padded to a multiple of {multiple}: {row['batching']:44s} {row['batches']:6d} batches  "
            f"{row['mean_tokens']:7.0f} padded tokens per batch and side  padding {row['padding'] * 100:5.1f}%",
            flush=True,
        )
    return rows
