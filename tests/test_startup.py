"""The command line starts without torch or transformers, and our models join transformers' registries in whichever
order a program imports the two (each case in a fresh interpreter)."""

import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "datasets", "matplotlib", "evaluate")


def fresh_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["translate", "--help"],
        ["tag"],
        ["tag", "model", "--batch_size", "0"],
        ["nosuch"],
        ["export-onnx", "--help"],
        ["serve", "--help"],
        ["demo", "--help"],
        ["score", "--help"],
        ["plot", "--help"],
        ["split-documents", "--help"],
        ["ner-report", "--help"],
        ["average-checkpoints", "--help"],
        ["push", "--help"],
    ],
)
def test_help_and_argument_errors_load_no_heavy_module(argv):
    """`vanilla-transformer ... --help` and a mistake in the arguments are answered before torch, transformers,
    datasets, matplotlib or evaluate load (the training commands' flags are transformers' TrainingArguments: not
    these)."""
    proc = fresh_python(
        f"import sys\nfrom vanilla_transformer.cli import main\ntry:\n    main({argv!r})\n"
        f"except SystemExit:\n    pass\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]", (argv, proc.stdout[-500:])
    if argv == ["tag"]:
        assert "error: the following arguments are required: model_dir" in proc.stderr


def test_package_import_is_light():
    proc = fresh_python(
        "import sys, vanilla_transformer\nprint(vanilla_transformer.__version__, "
        f"sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    assert proc.returncode == 0 and proc.stdout.split(maxsplit=1)[1].strip() == "[]", proc.stdout + proc.stderr


REGISTERED = (
    "from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoModelForTokenClassification\n"
    "config = AutoConfig.for_model('vanilla_transformer', d_model=16, encoder_layers=1, decoder_layers=1, "
    "encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, "
    "vocab_size=50)\n"
    "print(type(AutoModelForSeq2SeqLM.from_config(config)).__name__, "
    "type(AutoModelForTokenClassification.from_config(config)).__name__)\n"
    "print(config.auto_map['AutoConfig'])\n"
)


@pytest.mark.parametrize(
    "first",
    [
        "import vanilla_transformer",  # us, then transformers
        "import transformers\nimport vanilla_transformer",  # transformers first: registered at once
        # our module loads it
        "from vanilla_transformer.model.configuration_vanilla_transformer import VanillaTransformerConfig",
        "import vanilla_transformer.model.modeling_vanilla_transformer",
        "from vanilla_transformer import VanillaTransformerForConditionalGeneration",
    ],
)
def test_auto_classes_know_our_models_in_any_import_order(first):
    proc = fresh_python(first + "\n" + REGISTERED)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == [
        "VanillaTransformerForConditionalGeneration",
        "VanillaTransformerForTokenClassification",
        "configuration_vanilla_transformer.VanillaTransformerConfig",
    ], proc.stdout


@pytest.mark.parametrize(
    "first",
    ["import vanilla_transformer\nimport transformers", "from vanilla_transformer import VanillaTranslationPipeline"],
)
def test_pipeline_task_registered_when_pipelines_load(first):
    proc = fresh_python(
        first + "\nimport sys\nprint('transformers.pipelines' in sys.modules)\n"
        "from transformers.pipelines import PIPELINE_REGISTRY\n"
        "from vanilla_transformer import TRANSLATION_TASK\n"
        "print(TRANSLATION_TASK in PIPELINE_REGISTRY.get_supported_tasks())"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded_before, registered = proc.stdout.split()
    assert registered == "True"
    assert loaded_before == ("True" if "Pipeline" in first else "False")  # `import transformers` alone: not yet
