"""The CRF option of the token-classification head (`config.use_crf`): exact against brute force, padding invariant,
saved and loaded like any weight, and trainable."""

import itertools

import pytest
import torch
from huggingface_hub.errors import StrictDataclassError

from conftest import tagging_accuracy_after_training, tiny_tagger
from vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForTokenClassification
from vanilla_transformer.model.modeling_vanilla_transformer import VanillaTransformerCRF

L = 3


@pytest.fixture
def crf():
    torch.manual_seed(0)
    module = VanillaTransformerCRF(VanillaTransformerConfig.from_preset("tiny", num_labels=L))
    for p in module.parameters():
        torch.nn.init.normal_(p)
    return module


def path_score(crf, emissions, path):
    score = crf.start_transitions[path[0]] + crf.end_transitions[path[-1]]
    score = score + sum(emissions[t, y] for t, y in enumerate(path))
    return score + sum(crf.transitions[a, b] for a, b in zip(path, path[1:]))


def test_likelihood_and_decoding_match_brute_force(crf):
    torch.manual_seed(1)
    T = 4
    emissions = torch.randn(1, T, L)
    labels = torch.tensor([[2, -100, 0, 1]])  # position 1 is marginalised
    paths = list(itertools.product(range(L), repeat=T))
    scores = torch.stack([path_score(crf, emissions[0], p) for p in paths])
    log_z = torch.logsumexp(scores, 0)
    gold = torch.logsumexp(torch.stack([s for s, p in zip(scores, paths) if p[0] == 2 and p[2] == 0 and p[3] == 1]), 0)
    mask = torch.ones(1, T, dtype=torch.bool)
    torch.testing.assert_close(crf.neg_log_likelihood(emissions, labels, mask), log_z - gold)
    marginals = crf.max_marginals(emissions, mask)[0]
    best = paths[int(scores.argmax())]
    assert tuple(marginals.argmax(-1).tolist()) == best
    for t in range(T):  # each entry is the best score of the paths through that tag
        for y in range(L):
            expected = max(s for s, p in zip(scores, paths) if p[t] == y)
            torch.testing.assert_close(marginals[t, y], expected)


@pytest.mark.parametrize("side", ["right", "left"])
def test_padding_is_skipped_on_either_side(crf, side):
    torch.manual_seed(2)
    emissions = torch.randn(1, 3, L)
    labels = torch.tensor([[1, 0, 2]])
    pad = torch.randn(1, 2, L) * 100  # garbage scores on padding must not matter
    padded = torch.cat([emissions, pad] if side == "right" else [pad, emissions], 1)
    padded_labels = torch.cat(
        [labels, torch.full((1, 2), -100)] if side == "right" else [torch.full((1, 2), -100), labels], 1
    )
    mask = torch.tensor([[1, 1, 1, 0, 0]] if side == "right" else [[0, 0, 1, 1, 1]], dtype=torch.bool)
    ones = torch.ones(1, 3, dtype=torch.bool)
    torch.testing.assert_close(
        crf.neg_log_likelihood(padded, padded_labels, mask), crf.neg_log_likelihood(emissions, labels, ones)
    )
    real = slice(0, 3) if side == "right" else slice(2, 5)
    torch.testing.assert_close(crf.max_marginals(padded, mask)[:, real], crf.max_marginals(emissions, ones))


def test_a_row_without_tokens_adds_nothing(crf):
    torch.manual_seed(3)
    emissions, labels = torch.randn(2, 4, L), torch.tensor([[1, 0, 2, -100], [0, 0, 1, 2]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
    with_empty = crf.neg_log_likelihood(
        torch.cat([emissions, torch.randn(1, 4, L) * 100]),
        torch.cat([labels, torch.full((1, 4), -100)]),
        torch.cat([mask, torch.zeros(1, 4, dtype=torch.bool)]),
    )
    torch.testing.assert_close(with_empty, crf.neg_log_likelihood(emissions, labels, mask))


def tagger(**overrides):
    return tiny_tagger(num_labels=L, use_crf=True, **overrides)


def test_crf_head_save_load_and_batch_padding_invariance(tmp_path):
    model = tagger().eval()
    torch.nn.init.normal_(model.crf.transitions)
    ids = torch.randint(4, 99, (2, 6))
    mask = torch.ones_like(ids)
    ids[1, 4:], mask[1, 4:] = 0, 0
    labels = torch.randint(0, L, (2, 6)).masked_fill(mask == 0, -100)
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    assert torch.isfinite(out.loss) and out.loss > 0 and out.logits.shape == (2, 6, L)
    alone = model(input_ids=ids[1:, :4], labels=labels[1:, :4])
    torch.testing.assert_close(out.logits[1, :4], alone.logits[0], rtol=0, atol=1e-5)
    model.save_pretrained(tmp_path)
    loaded = VanillaTransformerForTokenClassification.from_pretrained(tmp_path).eval()
    assert loaded.config.use_crf and torch.equal(loaded.crf.transitions, model.crf.transitions)
    again = loaded(input_ids=ids, attention_mask=mask, labels=labels)
    torch.testing.assert_close(again.logits, out.logits, rtol=0, atol=0)
    torch.testing.assert_close(again.loss, out.loss, rtol=0, atol=0)


IOB2 = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def iob2_valid(path) -> bool:
    return all(
        not IOB2[y].startswith("I-") or (t > 0 and IOB2[path[t - 1]][2:] == IOB2[y][2:]) for t, y in enumerate(path)
    )


def test_iob2_labels_decode_only_paths_iob2_allows(tmp_path):
    """With IOB2 labels the Viterbi path and the max-marginals range over valid paths only (brute force); the
    likelihood stays unconstrained; the constraints come back with a saved model."""
    config = VanillaTransformerConfig.from_preset(
        "tiny", num_labels=len(IOB2), use_crf=True, id2label=dict(enumerate(IOB2))
    )
    model = VanillaTransformerForTokenClassification(config)
    crf = model.crf
    torch.manual_seed(3)
    for p in crf.parameters():
        torch.nn.init.normal_(p)
    T = 4
    emissions = torch.randn(1, T, len(IOB2))
    emissions[0, :, IOB2.index("I-LOC")] += 4  # I-LOC everywhere would win without the constraints
    paths = list(itertools.product(range(len(IOB2)), repeat=T))
    scores = torch.stack([path_score(crf, emissions[0], p) for p in paths])
    assert not iob2_valid(paths[int(scores.argmax())])
    valid = [(s, p) for s, p in zip(scores, paths) if iob2_valid(p)]
    mask = torch.ones(1, T, dtype=torch.bool)
    marginals = crf.max_marginals(emissions, mask)[0]
    assert tuple(marginals.argmax(-1).tolist()) == max(valid, key=lambda sp: sp[0])[1]
    for t in range(T):
        for y in range(len(IOB2)):
            through = [s for s, p in valid if p[t] == y]
            if through:
                torch.testing.assert_close(marginals[t, y], max(through))
            else:  # I- first: no valid path
                assert marginals[t, y] < -1e3
    labels = torch.tensor([[0, 2, 0, 4]])  # invalid IOB2: training still scores it against all paths
    log_z = torch.logsumexp(scores, 0)
    gold = scores[paths.index((0, 2, 0, 4))]
    torch.testing.assert_close(crf.neg_log_likelihood(emissions, labels, mask), log_z - gold)
    model.save_pretrained(tmp_path)
    loaded = VanillaTransformerForTokenClassification.from_pretrained(tmp_path)
    assert torch.equal(loaded.crf.transition_penalty, crf.transition_penalty)
    assert torch.equal(loaded.crf.start_penalty, crf.start_penalty) and crf.start_penalty.min() < 0


def test_crf_learns_a_tag_grammar():
    """Tags follow a grammar the emissions cannot see alone: after a token >= 50, the next tag is 2 (else the tag is
    1 for even tokens, 0 for odd). The CRF head must get whole sequences right."""
    model = tagger(vocab_size=100, dropout=0.0)
    g = torch.Generator().manual_seed(0)

    def sample(n):
        ids = torch.randint(4, 100, (n, 8), generator=g)
        tags = (ids % 2 == 0).long()
        tags[:, 1:] = torch.where(ids[:, :-1] >= 50, 2, tags[:, 1:])
        return ids, tags

    accuracy = tagging_accuracy_after_training(model, sample, steps=250)
    assert accuracy > 0.97, accuracy


def test_use_crf_must_be_boolean():
    with pytest.raises(StrictDataclassError, match="'use_crf' expected bool, got str"):
        VanillaTransformerConfig.from_preset("tiny", use_crf="yes")
