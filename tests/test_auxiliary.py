"""Auxiliary tagging heads (multi-task learning, config.auxiliary_num_labels) and the collator that pads their
targets."""

import pytest
import torch
import torch.nn.functional as F

from conftest import tiny_tagger
from vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForTokenClassification
from vanilla_transformer.tokenization import train_tokenizer
from vanilla_transformer.training.models import TaggingDataCollator


def tagger(**overrides):
    return tiny_tagger(dropout=0.0, num_labels=3, auxiliary_num_labels=[5, 2], **overrides).eval()


def inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, 99, (2, 6), generator=g)
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, 4:] = 0
    labels = torch.randint(0, 3, (2, 6), generator=g)
    labels[1, 4:] = -100
    targets = torch.stack([torch.randint(0, 5, (2, 6), generator=g), torch.randint(0, 2, (2, 6), generator=g)], -1)
    targets[1, 4:] = -100
    targets[0, 0, 1] = -100  # one ignored auxiliary target
    return ids, mask, labels, targets


@pytest.mark.parametrize("use_crf", [False, True])
def test_auxiliary_loss_is_the_weighted_sum_of_cross_entropies(use_crf):
    model = tagger(use_crf=use_crf, auxiliary_loss_weight=0.3)
    ids, mask, labels, targets = inputs()
    main = model(ids, mask, labels=labels)
    both = model(ids, mask, labels=labels, auxiliary_targets=targets)
    hidden = model.model(ids, mask).last_hidden_state
    count = (labels != -100).sum()  # each auxiliary sum is divided by the main loss's token count
    expected = sum(
        F.cross_entropy(head(hidden).flatten(0, 1), targets[..., k].flatten(), ignore_index=-100, reduction="sum")
        / count
        for k, head in enumerate(model.auxiliary_classifiers)
    )
    torch.testing.assert_close(both.loss - main.loss, 0.3 * expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(both.logits, main.logits)  # predictions do not depend on the auxiliary heads
    with_count = model(ids, mask, labels=labels, auxiliary_targets=targets, num_items_in_batch=torch.tensor(20))
    torch.testing.assert_close(with_count.loss * 20, both.loss * count, rtol=1e-5, atol=1e-5)


def test_auxiliary_heads_learn_and_survive_save_load(tmp_path):
    model = tagger().train()
    ids, mask, labels, targets = inputs()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    first = None
    for _ in range(30):
        loss = model(ids, mask, labels=labels, auxiliary_targets=targets).loss
        first = first if first is not None else loss.item()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < first / 3
    model.eval().save_pretrained(tmp_path)
    loaded = VanillaTransformerForTokenClassification.from_pretrained(tmp_path).eval()
    assert loaded.config.auxiliary_num_labels == [5, 2]
    torch.testing.assert_close(
        loaded(ids, mask, labels=labels, auxiliary_targets=targets).loss,
        model(ids, mask, labels=labels, auxiliary_targets=targets).loss,
    )


def test_bad_auxiliary_targets_are_named():
    model = tagger()
    ids, mask, labels, targets = inputs()
    with pytest.raises(ValueError, match=r"auxiliary_targets have shape \(2, 6\)"):
        model(ids, mask, labels=labels, auxiliary_targets=targets[..., 0])
    bad = targets.clone()
    bad[0, 1, 1] = 2  # the second task has 2 tags
    with pytest.raises(ValueError, match=r"auxiliary_targets\[\.\.\., 1\] contain 2, outside \[0, 2\)"):
        model(ids, mask, labels=labels, auxiliary_targets=bad)
    plain = VanillaTransformerForTokenClassification(VanillaTransformerConfig.from_preset("tiny", num_labels=3))
    with pytest.raises(ValueError, match="no auxiliary heads"):
        plain(ids, mask, labels=labels, auxiliary_targets=targets)


@pytest.mark.parametrize("side", ["right", "left"])
def test_collator_pads_auxiliary_targets(side):
    tokenizer = train_tokenizer(["a b c d e f g"] * 4, vocab_size=40)
    tokenizer.padding_side = side
    features = [
        {
            "input_ids": [5, 6, 7],
            "attention_mask": [1, 1, 1],
            "labels": [0, 1, 2],
            "auxiliary_targets": [[1, 0], [2, 1], [3, -100]],
        },
        {"input_ids": [5], "attention_mask": [1], "labels": [1], "auxiliary_targets": [[4, 1]]},
    ]
    batch = TaggingDataCollator(tokenizer, pad_to_multiple_of=4)(features)
    assert batch["auxiliary_targets"].shape == (2, 4, 2)
    short = batch["auxiliary_targets"][1]
    kept, padded = (short[0], short[1:]) if side == "right" else (short[-1], short[:-1])
    assert kept.tolist() == [4, 1] and (padded == -100).all()
    assert (batch["labels"][1] == -100).sum() == 3
    assert features[0]["auxiliary_targets"] == [[1, 0], [2, 1], [3, -100]]  # the caller's rows are untouched
    assert "auxiliary_targets" not in TaggingDataCollator(tokenizer)([{"input_ids": [5], "labels": [1]}])
