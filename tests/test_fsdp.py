"""Fully sharded data parallelism (FSDP2) with our model: two processes on gloo / CPU, each holding half of the
parameters, train like one process on the same data, and the shards gather into a model that loads with
`from_pretrained`; `--fsdp` where the Trainer cannot shard is refused."""

import json
import os
import subprocess

import pytest
import torch

from conftest import ROOT, torchrun_two
from vanilla_transformer import VanillaTransformerForConditionalGeneration
from vanilla_transformer.commands import train_translation


def test_two_sharded_processes_train_like_one(tmp_path):
    proc = subprocess.run(
        [*torchrun_two(), os.path.join(ROOT, "tests", "fsdp_worker.py"), str(tmp_path)],
        env=dict(os.environ, OMP_NUM_THREADS="1"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert abs(result["local"] - result["total"] / 2) <= 0.01 * result["total"]  # half the parameters each
    assert result["losses"] == pytest.approx(result["reference_losses"], rel=1e-5)
    assert result["losses"][-1] < result["losses"][0]  # it learned
    loaded = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path / "sharded")
    reference = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path / "reference").state_dict()
    assert loaded.state_dict().keys() == reference.keys()
    for name, value in loaded.state_dict().items():
        torch.testing.assert_close(value, reference[name], rtol=1e-4, atol=1e-6, msg=name)
    assert loaded.lm_head.weight.data_ptr() == loaded.model.shared.weight.data_ptr()  # still tied


def test_fsdp_without_a_gpu_is_refused(tmp_path):
    with pytest.raises(ValueError, match="--fsdp shards the model only on GPUs"):
        train_translation.main(["--output_dir", str(tmp_path), "--fsdp", "full_shard", "--max_steps", "1"])
