"""Encoder pretraining by masked language modelling: the model head, whole-word masking, the pretraining command and
fine-tuning a tagger from its output."""

import random

import pytest
import torch
from huggingface_hub import ModelCard
from safetensors.torch import load_file
from transformers import AutoModelForMaskedLM, AutoModelForTokenClassification, AutoTokenizer, pipeline

from conftest import ner_args, write_conll
from vanilla_transformer import VanillaTransformerForMaskedLM
from vanilla_transformer.commands import pretrain_encoder, train_ner
from vanilla_transformer.data import DataError
from vanilla_transformer.tokenization import train_tokenizer
from vanilla_transformer.training.models import WholeWordMaskCollator


@pytest.fixture
def mlm_model(tiny_config):
    torch.manual_seed(0)
    return VanillaTransformerForMaskedLM(tiny_config).eval()


def test_masked_lm_shapes_loss_and_tied_head(mlm_model, tiny_config):
    ids = torch.randint(4, tiny_config.vocab_size, (2, 7))
    labels = torch.full_like(ids, -100)
    labels[:, 3] = ids[:, 3]
    out = mlm_model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels)
    assert out.logits.shape == (2, 7, tiny_config.vocab_size)
    expected = torch.nn.functional.cross_entropy(out.logits[:, 3], ids[:, 3])
    torch.testing.assert_close(out.loss, expected)
    assert mlm_model.lm_head.weight.data_ptr() == mlm_model.model.shared.weight.data_ptr()
    with pytest.raises(ValueError, match="labels"):
        mlm_model(input_ids=ids, labels=ids + tiny_config.vocab_size)


def test_masked_lm_save_load_and_tagger_takes_its_encoder(mlm_model, tmp_path):
    mlm_model.save_pretrained(tmp_path)
    ids = torch.randint(4, mlm_model.config.vocab_size, (1, 9))
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    torch.testing.assert_close(loaded(input_ids=ids).logits, mlm_model(input_ids=ids).logits)
    tagger = AutoModelForTokenClassification.from_pretrained(tmp_path, num_labels=3).eval()
    torch.testing.assert_close(
        tagger.model(input_ids=ids).last_hidden_state, mlm_model.model(input_ids=ids).last_hidden_state
    )
    assert tagger.classifier.weight.abs().sum() > 0  # the new head was initialised, not left empty


def test_whole_word_masking():
    tokenizer = train_tokenizer(["unbelievable tokenization of words", "a b c"] * 20, vocab_size=40)
    tokenizer.add_special_tokens({"mask_token": "<mask>"})
    collator = WholeWordMaskCollator(tokenizer, mlm_probability=0.3, seed=0)
    words = "unbelievable tokenization of words a b c".split()
    rows = [tokenizer(words, is_split_into_words=True) for _ in range(200)]
    batch = collator([{"input_ids": r["input_ids"], "attention_mask": r["attention_mask"]} for r in rows])
    original = torch.tensor([rows[0]["input_ids"]] * 200)
    word_ids = rows[0].word_ids()
    masked = batch["labels"] != -100
    assert (batch["labels"][masked] == original[masked]).all()
    assert not masked[:, -1].any()  # </s> is never chosen
    for w in range(len(words)):  # each word is masked whole or not at all
        pieces = masked[:, [i for i, x in enumerate(word_ids) if x == w]]
        assert (pieces.all(1) | ~pieces.any(1)).all(), words[w]
    assert len(set(word_ids[:-1])) == len(words) and len(word_ids) > len(words) + 1  # words of several pieces
    chosen = masked[:, [word_ids.index(w) for w in range(len(words))]].float().mean()
    assert 0.24 < chosen < 0.36
    mask_id = tokenizer.mask_token_id
    replaced = (batch["input_ids"][masked] == mask_id).float().mean()
    assert 0.7 < replaced < 0.9  # 80% <mask>, the rest random or kept
    assert (batch["input_ids"][~masked] == original[~masked]).all()


def cyclic_text(path, n=600, seed=0):
    """Sentences of consecutive words of a cycle of 12: a masked word is known from its neighbours."""
    cycle = "zero one two three four five six seven eight nine ten eleven".split()
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        start, length = rng.randrange(12), rng.randint(4, 9)
        lines.append(" ".join(cycle[(start + k) % 12] for k in range(length)))
    path.write_text("\n".join(lines) + "\n")
    return path


def mlm_args(out, *extra):
    return [
        "--output_dir",
        str(out),
        "--config_name",
        "tiny",
        "--vocab_size",
        "100",
        "--per_device_train_batch_size",
        "32",
        "--save_strategy",
        "no",
        "--disable_tqdm",
        "true",
        *extra,
    ]


def test_pretraining_learns_and_the_tagger_starts_from_it(tmp_path):
    text = cyclic_text(tmp_path / "text.txt")
    write_conll(tmp_path / "c.txt", [(["Anna", "lives", "in", "Berlin", "."], ["B-PER", "O", "O", "B-LOC", "O"])] * 5)
    out = tmp_path / "encoder"
    metrics = pretrain_encoder.main(
        mlm_args(
            out,
            "--train_file",
            str(text),
            "--train_conll_file",
            str(tmp_path / "c.txt"),
            "--max_steps",
            "800",
            "--learning_rate",
            "3e-3",
            "--warmup_steps",
            "20",
            "--validation_split_percentage",
            "10",
            "--mlm_probability",
            "0.2",
        )
    )
    assert metrics["eval_accuracy"] > 0.6  # chance: 1 in 12 words
    card = ModelCard.load(out / "README.md")  # the model card, as the other training commands write it
    assert card.data.pipeline_tag == "fill-mask" and card.data.datasets == [tmp_path.name]
    scores = {r.metric_type: r.metric_value for r in card.data.eval_results}
    assert scores == pytest.approx({"accuracy": metrics["eval_accuracy"], "perplexity": metrics["eval_perplexity"]})
    assert "AutoModelForMaskedLM.from_pretrained" in card.text and "--train_conll_file" in card.text
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.mask_token == "<mask>"
    fill = pipeline("fill-mask", model=AutoModelForMaskedLM.from_pretrained(out), tokenizer=tokenizer)
    assert fill("two three four <mask> six seven")[0]["token_str"].strip("▁ ") == "five"
    encoder = load_file(out / "model.safetensors")
    train_ner.main(
        ner_args(
            tmp_path,
            tmp_path / "ner",
            "--model_name_or_path",
            str(out),
            "--max_steps",
            "1",
            "--learning_rate",
            "1e-9",
            "--do_train",
        )
    )
    tagger = load_file(tmp_path / "ner" / "model.safetensors")
    key = "model.encoder.layers.0.ffn.fc1.weight"
    torch.testing.assert_close(tagger[key], encoder[key], rtol=0, atol=1e-6)
    assert AutoTokenizer.from_pretrained(tmp_path / "ner").get_vocab() == AutoTokenizer.from_pretrained(out).get_vocab()


def test_pretraining_with_character_features_and_split_punctuation(tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("Two young, White males are outside near many bushes.\n\nA girl (in red) climbs.\n" * 20)
    sentences = pretrain_encoder.load_sentences(
        pretrain_encoder.DataTrainingArguments(train_file=[str(text)], split_punctuation=True)
    )
    assert sentences[0] == ["Two", "young", ",", "White", "males", "are", "outside", "near", "many", "bushes", "."]
    assert sentences[1] == ["A", "girl", "(", "in", "red", ")", "climbs", "."]
    out = tmp_path / "encoder"
    pretrain_encoder.main(
        mlm_args(
            out,
            "--train_file",
            str(text),
            "--split_punctuation",
            "true",
            "--max_steps",
            "2",
            "--config_overrides",
            "char_cnn_dim=8,relative_attention_max_distance=4",
            "--max_tokens",
            "64",
            "--eval_max_tokens",
            "64",
        )
    )  # batches by a token budget too
    model = AutoModelForMaskedLM.from_pretrained(out)
    assert model.model.encoder.char_features.token_chars[4:20, 0].any()  # spelling table filled and saved


def test_pretraining_splits_words_as_the_tagger_reads_them(tmp_path):
    """--split_punctuation splits a line into the words `tag` reads from it (CoNLL-2003's tokenization): an
    abbreviation, a decimal number, a thousands separator, a possessive stay as CoNLL writes them."""
    from vanilla_transformer.deploy.taggers import words_of

    line = "The U.S. economy grew 3.5 per cent, Acme's 1,000 staff said."
    text = tmp_path / "text.txt"
    text.write_text(line + "\n")
    sentences = pretrain_encoder.load_sentences(
        pretrain_encoder.DataTrainingArguments(train_file=[str(text)], split_punctuation=True)
    )
    assert sentences == [[word for word, _, _ in words_of(line)]]
    assert sentences[0] == [
        "The",
        "U.S.",
        "economy",
        "grew",
        "3.5",
        "per",
        "cent",
        ",",
        "Acme",
        "'s",
        "1,000",
        "staff",
        "said",
        ".",
    ]


def test_pretraining_bad_input(tmp_path):
    with pytest.raises(ValueError, match="--train_file"):
        pretrain_encoder.main(mlm_args(tmp_path / "o"))
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    with pytest.raises(DataError, match="empty.txt: file is empty"):
        pretrain_encoder.main(mlm_args(tmp_path / "o", "--train_file", str(empty)))
    text = cyclic_text(tmp_path / "text.txt", n=20)
    with pytest.raises(ValueError, match="--mlm_probability"):
        pretrain_encoder.main(mlm_args(tmp_path / "o", "--train_file", str(text), "--mlm_probability", "1.5"))
    bad = tmp_path / "bad.txt"
    bad.write_text("EU B-ORG\nrejects\n")
    with pytest.raises(DataError, match="bad.txt, line 2"):
        pretrain_encoder.main(mlm_args(tmp_path / "o", "--train_conll_file", str(bad)))
