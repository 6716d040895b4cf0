import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.environ.get("VT_SHARED_DATA", os.path.join(ROOT, "..", "shared", "data"))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
torch.set_num_threads(min(2, torch.get_num_threads()))


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: longer runs on real data (opt-in: VT_SLOW=1 or -m slow)")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("VT_SLOW") == "1" or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow test: set VT_SLOW=1 to run")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def tiny_config():
    from vanilla_transformer import VanillaTransformerConfig

    return VanillaTransformerConfig.from_preset("tiny", dropout=0.0)


def subprocess_env():
    """Environment for a child Python in which `vanilla_transformer` cannot be imported."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["HF_HUB_OFFLINE"] = "1"
    return env


# Prepended to child-process scripts: makes our package unimportable there even when it is pip-installed (as in
# `make test`), so the child sees what a user with only transformers installed sees.
BLOCK_PACKAGE = """
import sys
class _NoVanillaTransformer:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("vanilla_transformer", "hub_card"):
            raise ImportError(f"{name} is blocked in this process")
        return None
sys.meta_path.insert(0, _NoVanillaTransformer())
"""


def tagging_accuracy_after_training(model, sample, steps: int, lr: float = 3e-3) -> float:
    """Train a tagger with AdamW on `sample(64)` batches of (ids, tags) for `steps` steps; return its token accuracy
    on a fresh `sample(200)` in eval mode."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        ids, tags = sample(64)
        loss = model(input_ids=ids, labels=tags).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    ids, tags = sample(200)
    with torch.no_grad():
        return (model(input_ids=ids).logits.argmax(-1) == tags).float().mean().item()


def randomize_deviations(model):
    """The relative-position bias starts at zero (the paper's model) and the character table empty; give them values
    so the invariants test them: random spellings, about half the tokens starting a word, specials (ids < 4) too."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "relative_bias" in name:
                param.normal_(generator=g)
        for name, buffer in model.named_buffers():
            if name.endswith("token_chars"):
                buffer.copy_(torch.randint(2, 255, buffer.shape, generator=g))
                buffer[:, 5:] = 0
                buffer[torch.rand(buffer.shape[0], generator=g) < 0.5, 0] = 1
                buffer[:4, 0] = 1
