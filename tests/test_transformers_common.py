"""transformers' own common model tests (`ModelTesterMixin`, as every in-tree model runs them) on our classes.

The wheel ships no tests, so `tests/test_modeling_common.py` is taken from the transformers sdist of the installed
version (`pip download`, cached under ~/.cache/vanilla-transformer) and imported from there: nothing of it is copied
into this repository. That sdist lacks `tests/generation/test_utils.py` and `tests/exporters/`, which it imports, so
`GenerationTesterMixin` and `ExportTesterMixin` are empty stand-ins here: the mixin's generation checks are ours
(test_generation.py, test_modeling.py). Skipped when the sdist cannot be fetched (no package index) or with
VT_TRANSFORMERS_TESTS=0.
"""

import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
from pathlib import Path

import pytest
import transformers

if os.environ.get("VT_TRANSFORMERS_TESTS", "1") == "0":
    pytest.skip("VT_TRANSFORMERS_TESTS=0", allow_module_level=True)
pytest.importorskip("parameterized", reason="transformers' common tests need `parameterized` (pip install -e .[test])")

VERSION = transformers.__version__
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "vanilla-transformer"
PACKAGE = f"transformers_{VERSION.replace('.', '_')}_common_tests"
STAND_INS = {
    "exporters/test_export.py": "class ExportTesterMixin:  # not in the transformers sdist\n    pass\n",
    "generation/test_utils.py": "class GenerationTesterMixin:  # not in the transformers sdist\n    pass\n",
}


def common_tests_package() -> Path | None:
    """The directory holding PACKAGE (transformers' test_modeling_common.py + stand-ins), fetched once."""
    package = CACHE / PACKAGE
    if (package / "test_modeling_common.py").exists():
        return CACHE
    with tempfile.TemporaryDirectory() as tmp:
        try:
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    f"transformers=={VERSION}",
                    "--no-binary",
                    ":all:",
                    "--no-deps",
                    "--no-build-isolation",
                    "-q",
                    "-d",
                    tmp,
                ],
                capture_output=True,
                text=True,
                timeout=300,
            )
        except (OSError, subprocess.TimeoutExpired):  # no pip, or an index that does not answer: skip
            return None
        archives = list(Path(tmp).glob("transformers-*.tar.gz"))
        if proc.returncode != 0 or not archives:
            return None
        with tarfile.open(archives[0]) as archive:
            member = archive.getmember(f"{archives[0].name[: -len('.tar.gz')]}/tests/test_modeling_common.py")
            source = archive.extractfile(member).read()
        staging = Path(tmp) / PACKAGE
        for name, text in {
            "__init__.py": "",
            "exporters/__init__.py": "",
            "generation/__init__.py": "",
            **STAND_INS,
        }.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            (staging / name).write_text(text)
        (staging / "test_modeling_common.py").write_bytes(source)
        CACHE.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(package, ignore_errors=True)  # an incomplete one from an interrupted run
        try:
            os.replace(staging, package)  # atomic: a concurrent or interrupted run never sees half a package
        except OSError:
            if not (package / "test_modeling_common.py").exists():
                raise
    return CACHE


root = common_tests_package()
if root is None:
    pytest.skip(
        f"could not fetch the transformers {VERSION} sdist (its tests) from the package index", allow_module_level=True
    )
# registered as a package by its location (no sys.path edit): its relative imports then find the stand-ins
spec = importlib.util.spec_from_file_location(
    PACKAGE, root / PACKAGE / "__init__.py", submodule_search_locations=[str(root / PACKAGE)]
)
sys.modules[PACKAGE] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sys.modules[PACKAGE])
common = importlib.import_module(f"{PACKAGE}.test_modeling_common")
GenerationTesterMixin = importlib.import_module(f"{PACKAGE}.generation.test_utils").GenerationTesterMixin

from vanilla_transformer import (  # noqa: E402
    VanillaTransformerConfig,
    VanillaTransformerEncoderModel,
    VanillaTransformerForConditionalGeneration,
    VanillaTransformerForMaskedLM,
    VanillaTransformerForTokenClassification,
    VanillaTransformerModel,
)

# What being in transformers' auto mappings tells its tests (which heads get labels, which class is the base model);
# set in the test module's namespace only, not in transformers' real mappings.
for names, classes in (
    ("MODEL_MAPPING_NAMES", (VanillaTransformerModel, VanillaTransformerEncoderModel)),
    ("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", (VanillaTransformerForConditionalGeneration,)),
    ("MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES", (VanillaTransformerForTokenClassification,)),
    ("MODEL_FOR_MASKED_LM_MAPPING_NAMES", (VanillaTransformerForMaskedLM,)),
):
    setattr(common, names, {**getattr(common, names), "vanilla-transformer": tuple(c.__name__ for c in classes)})


class VanillaTransformerModelTester:
    """The tiny shapes of transformers' Marian/BART testers, and their masks: `ids.ne(pad_token_id)`, bool."""

    def __init__(
        self,
        parent,
        encoder_decoder=True,
        overrides=None,
        batch_size=13,
        seq_length=7,
        vocab_size=99,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=4,
    ):
        self.parent, self.encoder_decoder, self.is_training = parent, encoder_decoder, True
        self.overrides = overrides or {}
        self.batch_size, self.seq_length, self.vocab_size = batch_size, seq_length, vocab_size
        self.hidden_size, self.num_hidden_layers = hidden_size, num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.encoder_seq_length = self.decoder_seq_length = seq_length

    def get_config(self):
        return VanillaTransformerConfig(
            vocab_size=self.vocab_size,
            d_model=self.hidden_size,
            encoder_layers=self.num_hidden_layers,
            decoder_layers=self.num_hidden_layers,
            encoder_attention_heads=self.num_attention_heads,
            decoder_attention_heads=self.num_attention_heads,
            encoder_ffn_dim=self.intermediate_size,
            decoder_ffn_dim=self.intermediate_size,
            dropout=0.1,
            attention_dropout=0.1,
            max_position_embeddings=50,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
            decoder_start_token_id=0,
            num_labels=3,
            is_encoder_decoder=self.encoder_decoder,
            **self.overrides,
        )

    def prepare_config_and_inputs_for_common(self):
        input_ids = common.ids_tensor([self.batch_size, self.seq_length], self.vocab_size).clamp(3)
        input_ids[:, -1] = 2
        inputs = dict(input_ids=input_ids, attention_mask=input_ids.ne(1))  # bool, as Marian's tester makes it
        if self.encoder_decoder:
            decoder_input_ids = common.ids_tensor([self.batch_size, self.seq_length], self.vocab_size).clamp(3)
            inputs.update(decoder_input_ids=decoder_input_ids, decoder_attention_mask=decoder_input_ids.ne(1))
        return self.get_config(), inputs


class VanillaTransformerModelTest(common.ModelTesterMixin, GenerationTesterMixin, unittest.TestCase):
    all_model_classes = (VanillaTransformerModel, VanillaTransformerForConditionalGeneration)
    is_encoder_decoder = True
    test_missing_keys = True
    test_can_init_all_missing_weights_before_2023 = True

    overrides = {}

    def setUp(self):
        self.model_tester = VanillaTransformerModelTester(self, overrides=self.overrides)


class VanillaTransformerTaggerTest(common.ModelTesterMixin, unittest.TestCase):
    all_model_classes = (
        VanillaTransformerEncoderModel,
        VanillaTransformerForTokenClassification,
        VanillaTransformerForMaskedLM,
    )
    is_encoder_decoder = False
    test_missing_keys = True
    test_can_init_all_missing_weights_before_2023 = True

    overrides = {}

    def setUp(self):
        self.model_tester = VanillaTransformerModelTester(self, encoder_decoder=False, overrides=self.overrides)


class VanillaTransformerDeviationsTest(VanillaTransformerModelTest):
    """The deliberate deviations from the paper, all at once: pre-LN, relative positions, learned absolute positions,
    token dropout, unscaled attention. (Untied embeddings and label smoothing are ours to test: the common tests embed
    decoder inputs with the encoder's table and expect the plain cross-entropy.)"""

    overrides = dict(
        normalize_before=True,
        relative_attention_max_distance=4,
        position_embedding_type="learned",
        token_dropout=0.1,
        scale_attention=False,
    )


class VanillaTransformerTaggerDeviationsTest(VanillaTransformerTaggerTest):
    """The tagger of the CoNLL recipe (CRF, relative positions, pre-LN, token dropout) but for its character features
    and auxiliary heads: they need the tokenizer's vocabulary (`set_token_characters`) and auxiliary labels, which
    these tests do not give."""

    overrides = dict(use_crf=True, relative_attention_max_distance=4, normalize_before=True, token_dropout=0.1)
