"""What every benchmark case shares: model shapes, the same architecture built in each library, FLOPs and peaks,
timing, and one measurement in a child process (so its peak RSS is its own)."""

import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
VOCAB = 8000


def shape_of(preset: str) -> dict:
    from vanilla_transformer import PRESETS

    p = PRESETS[preset]
    return dict(
        d_model=p["d_model"], layers=p["encoder_layers"], heads=p["encoder_attention_heads"], ffn=p["encoder_ffn_dim"]
    )


def build(name: str, shape: dict, dropout: float = 0.0, attention: str = "sdpa"):
    """The same architecture in each library: post-LN, ReLU, scaled sinusoidal (Marian) or learned (BART/BERT)
    positions, embeddings tied with the output projection, `dropout` on the embeddings and sub-layer outputs only.
    `attention` is ours only (the training commands pick eager for bf16 training on a CPU)."""
    from transformers import (
        BartConfig,
        BartForConditionalGeneration,
        BertConfig,
        BertForTokenClassification,
        MarianConfig,
        MarianMTModel,
    )

    from vanilla_transformer import (
        VanillaTransformerConfig,
        VanillaTransformerForConditionalGeneration,
        VanillaTransformerForTokenClassification,
    )

    d, n, h, f, vocab = shape["d_model"], shape["layers"], shape["heads"], shape["ffn"], shape.get("vocab", VOCAB)
    common = dict(
        vocab_size=vocab,
        d_model=d,
        encoder_layers=n,
        decoder_layers=n,
        encoder_attention_heads=h,
        decoder_attention_heads=h,
        encoder_ffn_dim=f,
        decoder_ffn_dim=f,
        activation_function="relu",
        dropout=dropout,
        attention_dropout=0.0,
        activation_dropout=0.0,
        max_position_embeddings=512,
        scale_embedding=True,
        pad_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=1,
        bos_token_id=1,
        tie_word_embeddings=True,
    )
    if name in ("ours", "ours_tagger"):
        model = (
            VanillaTransformerForConditionalGeneration(VanillaTransformerConfig(**common))
            if name == "ours"
            else VanillaTransformerForTokenClassification(VanillaTransformerConfig(**common, num_labels=9))
        )
        model.set_attn_implementation(attention)
        return model
    if name == "marian":
        return MarianMTModel(MarianConfig(**common, share_encoder_decoder_embeddings=True))
    if name == "bart":
        return BartForConditionalGeneration(BartConfig(**common, forced_eos_token_id=None))
    if name == "bert":
        return BertForTokenClassification(
            BertConfig(
                vocab_size=vocab,
                hidden_size=d,
                num_hidden_layers=n,
                num_attention_heads=h,
                intermediate_size=f,
                hidden_act="relu",
                hidden_dropout_prob=dropout,
                attention_probs_dropout_prob=0.0,
                max_position_embeddings=512,
                num_labels=9,
            )
        )
    raise ValueError(name)


def analytic_flops(task: str, shape: dict, batch: int, src: int, tgt: int) -> float:
    """Matmul FLOPs of one measured unit (a training step, a generate call, a tagging forward): per layer and token,
    2 x (attention projections + FFN) + 2 x 2 x (keys attended) x d_model for scores and values, the output projection
    over the vocabulary spread over the decoder layers; training = 3 x forward (backward = 2 x forward)."""
    d, n, f, vocab = shape["d_model"], shape["layers"], shape["ffn"], shape.get("vocab", VOCAB)
    enc_tok = 2 * (4 * d * d + 2 * d * f) + 2 * 2 * src * d  # projections + FFN + scores/values
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
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<unk>")),
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
    )


# Dense bf16 matrix-product peaks from the vendors' datasheets (TFLOP/s, no sparsity), by device name: what the model
# FLOPs utilisation (MFU) on a GPU is measured against. A GPU not listed gets MFU against the measured matmul rate only.
DENSE_BF16_PEAK_TFLOPS = [
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.4),
    ("H200", 989.4),
    ("H20", 148.0),
    ("GH200", 989.4),
    ("B200", 2250.0),
    ("A100", 312.0),
    ("L40S", 362.0),
    ("L4", 121.0),
]


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


def measure(spec: dict) -> dict:
    path = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))  # `benchmarks` importable from anywhere
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--_child", json.dumps(spec)],
        capture_output=True,
        text=True,
        env={**os.environ, "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": path},
    )
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child {spec} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
