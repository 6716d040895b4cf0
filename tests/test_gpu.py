"""The CUDA paths (`make test-gpu`; skipped where PyTorch sees no CUDA GPU): training steps on the GPU equal the same
steps on the CPU, the demo task learns in bf16 through the training command, generation with and without the cache
agrees, the CRF tagger, and deployment (CTranslate2 on the GPU, `translate --device cuda`)."""

import copy
import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import DEMO_FLAGS, ROOT, train_demo
from vanilla_transformer import (
    VanillaTransformerConfig,
    VanillaTransformerForConditionalGeneration,
    VanillaTransformerForMaskedLM,
    VanillaTransformerForTokenClassification,
)

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="PyTorch sees no CUDA GPU")]


def batches(config, steps: int, batch: int = 6, length: int = 11):
    """Random (input_ids, attention_mask, labels) with padded rows and ignored labels."""
    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(steps):
        ids = torch.randint(4, config.vocab_size, (batch, length), generator=g)
        mask = torch.ones_like(ids)
        mask[1, 7:] = 0
        ids[1, 7:] = config.pad_token_id
        labels = torch.randint(4, config.vocab_size, (batch, length - 2), generator=g)
        labels[2, 5:] = -100
        out.append((ids, mask, labels))
    return out


@pytest.mark.parametrize("task", ["seq2seq", "token_classification_crf"])
def test_training_steps_on_cuda_match_cpu(task):
    """From the same weights in fp32, the first step's gradients (all parameters as one vector) agree to fp32 rounding
    on the GPU and the CPU, and three SGD steps give the same losses (the GPU runs other kernels: SDPA's, the library's
    cross-entropy instead of the CPU's fused one). SGD, not Adam: Adam would blow rounding noise in gradients that are
    zero in exact arithmetic (the key projection's bias) up to full-size steps."""
    config = VanillaTransformerConfig.from_preset(
        "tiny", dropout=0.0, label_smoothing=0.1, use_crf=task.endswith("crf"), num_labels=7
    )
    torch.manual_seed(0)
    cls = VanillaTransformerForConditionalGeneration if task == "seq2seq" else VanillaTransformerForTokenClassification
    cpu_model = cls(config).train()
    gpu_model = copy.deepcopy(cpu_model).cuda()
    losses, first_gradient = {}, {}
    for device, model in (("cpu", cpu_model), ("cuda", gpu_model)):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        losses[device] = []
        for ids, mask, labels in batches(config, 3):
            if task != "seq2seq":
                labels = torch.randint(0, 7, ids.shape, generator=torch.Generator().manual_seed(int(ids[0, 0])))
                labels[1, 7:] = -100
            loss = model(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device)).loss
            loss.backward()
            first_gradient.setdefault(device, torch.cat([p.grad.cpu().flatten() for p in model.parameters()]))
            optimizer.step()
            optimizer.zero_grad()
            losses[device].append(loss.item())
    error = (first_gradient["cuda"] - first_gradient["cpu"]).norm() / first_gradient["cpu"].norm()
    assert error < 1e-5, error.item()
    torch.testing.assert_close(torch.tensor(losses["cuda"]), torch.tensor(losses["cpu"]), rtol=1e-4, atol=1e-5)


def test_training_under_cuda_graphs_matches_eager():
    """torch.compile with CUDA graphs (mode "reduce-overhead", `--torch_compile_mode reduce-overhead`): three fp32
    training steps give the eager steps' losses (nothing the compiled step leaves on the module is overwritten by the
    next replay)."""
    config = VanillaTransformerConfig.from_preset("tiny", dropout=0.0)
    torch.manual_seed(0)
    eager = VanillaTransformerForConditionalGeneration(config).cuda().train()
    graphed = copy.deepcopy(eager)
    losses = {}
    for name, model, forward in (
        ("eager", eager, eager),
        ("graphs", graphed, torch.compile(graphed, mode="reduce-overhead")),
    ):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        losses[name] = []
        for ids, mask, labels in batches(config, 3, batch=8, length=16) * 2:
            torch.compiler.cudagraph_mark_step_begin()
            loss = forward(input_ids=ids.cuda(), attention_mask=mask.cuda(), labels=labels.cuda()).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses[name].append(loss.item())
    torch.testing.assert_close(torch.tensor(losses["graphs"]), torch.tensor(losses["eager"]), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("task", ["seq2seq", "token_classification", "token_classification_crf", "masked_lm"])
def test_training_step_reads_nothing_back_from_the_gpu(task):
    """Forward, loss and backward of a training step (padding, ignored labels, label smoothing, dropout on) queue
    their work without waiting for the GPU: under `torch.cuda.set_sync_debug_mode("error")` any operation that would
    read a GPU value back to the host (`.item()`, a data-dependent shape, a min/max check on the ids) raises."""
    config = VanillaTransformerConfig.from_preset(
        "tiny", label_smoothing=0.1, use_crf=task.endswith("crf"), num_labels=5
    )
    cls = {"seq2seq": VanillaTransformerForConditionalGeneration, "masked_lm": VanillaTransformerForMaskedLM}.get(
        task, VanillaTransformerForTokenClassification
    )
    model = cls(config).cuda().train()
    ids, mask, labels = batches(config, 1)[0]
    if task != "seq2seq":  # one label per input token
        labels = torch.randint(
            0,
            5 if task.startswith("token") else config.vocab_size,
            ids.shape,
            generator=torch.Generator().manual_seed(4),
        ).masked_fill(mask == 0, -100)
    ids, mask, labels = ids.cuda(), mask.cuda(), labels.cuda()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.isfinite(loss).item()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_crf_tagger_decodes_on_cuda_as_on_cpu():
    """Eval mode: the CRF's max-marginals (argmax = Viterbi path) and the sequence loss agree across devices."""
    config = VanillaTransformerConfig.from_preset("tiny", dropout=0.0, use_crf=True, num_labels=5)
    torch.manual_seed(1)
    model = VanillaTransformerForTokenClassification(config).eval()
    ids, mask, _ = batches(config, 1)[0]
    labels = torch.randint(0, 5, ids.shape, generator=torch.Generator().manual_seed(2)).masked_fill(mask == 0, -100)
    with torch.no_grad():
        cpu = model(input_ids=ids, attention_mask=mask, labels=labels)
        gpu = model.cuda()(input_ids=ids.cuda(), attention_mask=mask.cuda(), labels=labels.cuda())
    torch.testing.assert_close(gpu.loss.cpu(), cpu.loss, rtol=1e-4, atol=1e-5)
    assert torch.equal(gpu.logits.argmax(-1).cpu()[mask.bool()], cpu.logits.argmax(-1)[mask.bool()])


@pytest.mark.parametrize("num_beams", [1, 4])
def test_cached_generation_equals_uncached_on_cuda(num_beams):
    config = VanillaTransformerConfig.from_preset("tiny", dropout=0.0)
    torch.manual_seed(2)
    model = VanillaTransformerForConditionalGeneration(config).cuda().eval()
    ids, mask, _ = batches(config, 1)[0]
    kwargs = dict(
        input_ids=ids.cuda(), attention_mask=mask.cuda(), max_new_tokens=12, num_beams=num_beams, do_sample=False
    )
    with torch.no_grad():
        cached = model.generate(**kwargs, use_cache=True)
        uncached = model.generate(**kwargs, use_cache=False)
    assert cached.device.type == "cuda" and cached.shape[1] > 1
    assert torch.equal(cached, uncached)


def test_demo_task_learns_in_bf16_on_cuda(tmp_path_factory, caplog):
    """The training command picks the GPU by itself (no --use_cpu) and trains the demo task in bf16 autocast to >= 95%
    exact match on held-out strings."""
    flags = list(DEMO_FLAGS)
    flags[flags.index("--bf16") + 1] = "true"
    with caplog.at_level("INFO"):
        model_dir = train_demo(tmp_path_factory, "run_translation", flags, "eval_exact_match")
    assert "Device: cuda:0 x 1 process(es), bf16 autocast" in caplog.text
    assert json.loads((model_dir / "train_results.json").read_text())["train_samples"] > 0


@pytest.fixture(scope="module")
def gpu_trained_model(tmp_path_factory):
    """The small demo model, trained on the GPU in fp32."""
    return train_demo(tmp_path_factory, "run_translation", DEMO_FLAGS, "eval_exact_match")


def held_out():
    from vanilla_transformer import data

    return [pair["src"] for pair in data.make_demo_translation(100, seed=99, max_length=10)["translation"]]


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "vanilla_transformer.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=600,
    )


def test_translate_command_on_cuda_equals_cpu(gpu_trained_model, tmp_path):
    """`translate --device cuda` (PyTorch) writes the same lines as `--device cpu`, every one correct."""
    from vanilla_transformer import data

    sources = held_out()
    (tmp_path / "in.txt").write_text("\n".join(sources) + "\n")
    outputs = {}
    for device in ("cuda", "cpu"):
        proc = cli(
            "translate",
            gpu_trained_model,
            "--input",
            tmp_path / "in.txt",
            "--output",
            tmp_path / f"{device}.txt",
            "--engine",
            "pytorch",
            "--device",
            device,
            "--quiet",
        )
        assert proc.returncode == 0, proc.stderr
        outputs[device] = (tmp_path / f"{device}.txt").read_text().splitlines()
    assert outputs["cuda"] == outputs["cpu"]
    assert sum(o == data.demo_translate(s) for o, s in zip(outputs["cuda"], sources)) >= 0.95 * len(sources)


def ctranslate2_cuda():
    try:
        import ctranslate2
    except ImportError:
        return None
    return ctranslate2 if ctranslate2.get_cuda_device_count() > 0 else None


@pytest.mark.parametrize("compute_type", ["float32", "float16", "int8_float16"])
def test_ctranslate2_on_cuda_decodes_like_generate(gpu_trained_model, tmp_path, compute_type):
    """The export served by CTranslate2 on the GPU: float32 gives generate's greedy tokens for every sentence, float16
    and int8_float16 nearly all (they round)."""
    if ctranslate2_cuda() is None:
        pytest.skip("ctranslate2 is not installed or was built without CUDA")
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from vanilla_transformer.deploy.ctranslate2 import export_ctranslate2
    from vanilla_transformer.deploy.translators import make_translator, translate_lines

    sources = held_out()
    tokenizer = AutoTokenizer.from_pretrained(gpu_trained_model)
    model = AutoModelForSeq2SeqLM.from_pretrained(gpu_trained_model).cuda().eval()
    batch = tokenizer(sources, return_tensors="pt", padding=True, return_token_type_ids=False).to("cuda")
    with torch.no_grad():
        expected = tokenizer.batch_decode(
            model.generate(**batch, max_new_tokens=16, do_sample=False), skip_special_tokens=True
        )
    exported = export_ctranslate2(gpu_trained_model, tmp_path / "ct2")
    translate = make_translator(exported, "ctranslate2", device="cuda", compute_type=compute_type, max_new_tokens=16)
    assert translate.translator.device == "cuda"
    got = translate_lines(translate, sources)
    same = sum(a == b for a, b in zip(got, expected))
    assert same == len(sources) if compute_type == "float32" else same >= 0.97 * len(sources), (same, len(sources))


def test_translate_command_ctranslate2_on_cuda(gpu_trained_model, tmp_path):
    if ctranslate2_cuda() is None:
        pytest.skip("ctranslate2 is not installed or was built without CUDA")
    from vanilla_transformer import data

    sources = held_out()
    (tmp_path / "in.txt").write_text("\n".join(sources) + "\n")
    proc = cli("export-ctranslate2", gpu_trained_model, tmp_path / "ct2", "--quantization", "int8_float16")
    assert proc.returncode == 0, proc.stderr
    proc = cli("translate", tmp_path / "ct2", "--input", tmp_path / "in.txt", "--device", "cuda", "--quiet")
    assert proc.returncode == 0, proc.stderr
    outputs = proc.stdout.splitlines()
    assert sum(o == data.demo_translate(s) for o, s in zip(outputs, sources)) >= 0.95 * len(sources)


def test_token_budget_batches_train_on_cuda(tmp_path, caplog):
    """`--max_tokens` batches on the GPU: batches padded to a multiple of 8 there, within the budget, loss finite."""
    from test_token_batches import FLAGS

    from vanilla_transformer.commands import train_translation

    with caplog.at_level("INFO"):
        metrics = train_translation.main(["--output_dir", str(tmp_path), *FLAGS])
    assert "Device: cuda:0" in caplog.text and metrics["train_loss"] == metrics["train_loss"]  # not NaN
    assert (tmp_path / "model.safetensors").is_file()


@pytest.mark.parametrize("implementation", ["sdpa", "flex_attention"])
def test_packed_rows_on_cuda_compute_each_pair_alone_and_train_under_cuda_graphs(implementation):
    """Packed rows (`--packing`) on the GPU with SDPA's kernels or flex attention's block masks: each pair's logits
    equal the pair run alone, and training steps compiled with CUDA graphs over packed batches (one shape) give the
    losses of eager SDPA steps."""
    from test_packing import LENGTH, ROWS, pairs_and_batch, spans

    config = VanillaTransformerConfig.from_preset("tiny", dropout=0.0, d_model=64)  # heads of 16: flex's least
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(config).cuda().eval()
    model.set_attn_implementation(implementation)
    _, _, packed = pairs_and_batch(config)
    packed = {k: v.cuda() for k, v in packed.items()}
    with torch.no_grad():
        logits = model(**packed).logits
        for row in range(ROWS):
            sources = spans(packed, row, "attention_mask")
            for pair, (t0, t1) in spans(packed, row).items():
                s0, s1 = sources[pair]
                alone = model(
                    input_ids=packed["input_ids"][row : row + 1, s0:s1], labels=packed["labels"][row : row + 1, t0:t1]
                ).logits[0]
                torch.testing.assert_close(logits[row, t0:t1], alone, rtol=1e-4, atol=1e-4)
    losses = {}
    batches_of_one_shape = [pairs_and_batch(config, seed)[2] for seed in range(4)]
    for name in ("eager", "compiled"):
        torch.manual_seed(0)
        model = VanillaTransformerForConditionalGeneration(config).cuda().train()
        model.set_attn_implementation(implementation if name == "compiled" else "sdpa")
        forward = torch.compile(model, mode="reduce-overhead") if name == "compiled" else model
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        losses[name] = []
        for batch in batches_of_one_shape:
            torch.compiler.cudagraph_mark_step_begin()
            loss = forward(**{k: v.cuda() for k, v in batch.items()}).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses[name].append(loss.item())
    assert {tuple(b["input_ids"].shape) for b in batches_of_one_shape} == {(ROWS, LENGTH)}
    torch.testing.assert_close(torch.tensor(losses["compiled"]), torch.tensor(losses["eager"]), rtol=1e-3, atol=1e-4)
