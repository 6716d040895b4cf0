"""Train or load the tokenizer: a joint BPE (section 5.1 of the paper: "shared source-target vocabulary") trained with
`tokenizers` and wrapped as a transformers fast tokenizer, so `AutoTokenizer.from_pretrained(dir)` loads it back; the
corpus encoder that tokenizes a corpus into cached Arrow columns; the check that a tokenizer fits a config; and the
two tasks' features: sentence pairs into input ids and labels (`PairFeatures`), tagged words into input ids and the
labels of their pieces (`TaggingFeatures`)."""

import json
import os
import unicodedata
from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from .loading import check_json_files, local_or_hub, looks_local, own_tokenizer

# Order fixes the ids, which match VanillaTransformerConfig's defaults: pad 0, bos 1, eos 2, unk 3.
SPECIAL_TOKENS = {"pad_token": "<pad>", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
# sentencepiece-style words: spaces become "▁", which starts every word (the first one too)
WORDS_AT_SPACES = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
IDS = pa.list_(pa.int32())


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int = 8000,
    min_frequency: int = 2,
    model_max_length: int = 1024,
    show_progress: bool = False,
) -> PreTrainedTokenizerFast:
    """BPE over whitespace-marked words (sentencepiece-style "▁" so decoding restores the spaces exactly, as
    detokenized sacreBLEU needs). Encoding appends `</s>`; decoding drops the specials."""
    if not isinstance(vocab_size, int) or vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must be an integer above {len(SPECIAL_TOKENS)}, got {vocab_size!r}.")
    tok = Tokenizer(models.BPE(unk_token=SPECIAL_TOKENS["unk_token"]))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS.values()),
        show_progress=show_progress,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    if tok.get_vocab_size() <= len(SPECIAL_TOKENS):
        raise ValueError("The tokenizer's training text is empty: no tokens were learned.")
    eos = SPECIAL_TOKENS["eos_token"]
    tok.post_processor = processors.TemplateProcessing(
        single=f"$A {eos}", pair=f"$A {eos} $B {eos}", special_tokens=[(eos, tok.token_to_id(eos))]
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=model_max_length, **SPECIAL_TOKENS)


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


class CorpusEncoder:
    """texts -> the token ids `tokenizer(texts, truncation=True, max_length=max_length)` gives, for tokenizing whole
    corpora into Arrow. For the joint BPE this package trains (NFKC, words split at spaces, BPE within each word), the
    ids of a sentence are its words' ids one after the other: each distinct word is encoded once by the Rust tokenizer
    and remembered, and sentences are assembled from their words' ids in numpy, with no Python object per sentence or
    token (the word cache of fairseq's and subword-nmt's BPE scripts). A sentence with a word that does not encode
    alone as it does in context (an empty word from a double or edge space, a word starting with the space marker "▁"
    or holding a special token, one whose NFKC form holds a space) is encoded whole by the Rust tokenizer. Other fast
    tokenizers encode through the Rust tokenizer's `encode_batch_fast` (no character offsets); tokenizers with their
    own rules (a subclass, say) through their call."""

    MAX_WORDS = 1_000_000  # distinct words remembered (bounded memory on corpora of millions of distinct words)

    def __init__(self, tokenizer, max_length: int):
        self.tokenizer, self.max_length, self.rust, self.words = tokenizer, max_length, None, None
        if type(tokenizer) is not PreTrainedTokenizerFast:
            return
        self.rust = own_tokenizer(tokenizer.backend_tokenizer, max_length)
        spec = json.loads(self.rust.to_str())
        if (
            spec["normalizer"] in (None, {"type": "NFKC"})
            and spec["pre_tokenizer"] == WORDS_AT_SPACES
            and spec["model"]["type"] == "BPE"
            and not spec["model"].get("dropout")
        ):
            whole, word = self.rust.encode("a").ids, self.rust.encode("a", add_special_tokens=False).ids
            start = next(i for i in range(len(whole)) if whole[i : i + len(word)] == word)
            self.prefix, self.suffix = whole[:start], whole[start + len(word) :]  # the template's special tokens
            self.specials = [token.content for token in self.rust.get_added_tokens_decoder().values()]
            self.nfkc = spec["normalizer"] is not None
            one_word = not any(" " in s or "▁" in s for s in self.specials)  # an added "New York" spans two words
            if one_word and max_length > len(self.prefix) + len(self.suffix):
                self.words = {}

    def __getstate__(self):  # pickled (for worker processes) and hashed (naming cached data) without its memory
        return {**self.__dict__, "words": None if self.words is None else {}}

    def __call__(self, texts: list[str], target: bool = False) -> list[list[int]]:
        return self.encode(pa.array(texts, pa.string()), target).to_pylist()

    def encode(self, texts: pa.Array, target: bool = False) -> pa.Array:
        """An Arrow array of strings -> an Arrow list<int32> array of their token ids."""
        if self.words is not None:
            return self.encode_by_words(texts)
        if self.rust is not None:
            return self.encode_whole(texts.to_pylist())
        text = {"text_target" if target else "text": texts.to_pylist()}
        return pa.array(
            self.tokenizer(
                **text,
                truncation=True,
                max_length=self.max_length,
                return_token_type_ids=False,
                return_attention_mask=False,
            )["input_ids"],
            IDS,
        )

    def encode_whole(self, texts: list[str]) -> pa.Array:
        return pa.array([encoding.ids for encoding in self.rust.encode_batch_fast(texts)], IDS)

    def encode_alone(self, words: list[str]) -> dict:
        """word -> its ids as int32 bytes, or None for a word that does not encode alone as it does in a sentence."""
        encoded = {}
        for word, encoding in zip(words, self.rust.encode_batch_fast(words, add_special_tokens=False)):
            form = unicodedata.normalize("NFKC", word) if self.nfkc else word
            alone = (
                form
                and not form.startswith("▁")
                and " " not in form
                and not any(s in form or s in word for s in self.specials)
            )
            encoded[word] = np.array(encoding.ids, np.int32).tobytes() if alone else None
        return encoded

    def encode_by_words(self, texts: pa.Array) -> pa.Array:
        split = pc.split_pattern(texts, " ")  # every sentence has at least one word, maybe empty
        words = pc.dictionary_encode(split.flatten())
        distinct = words.dictionary.to_pylist()
        new = self.encode_alone([w for w in distinct if w not in self.words])
        ids = [new[w] if w in new else self.words[w] for w in distinct]
        if len(self.words) + len(new) <= self.MAX_WORDS:  # past it, words not yet remembered are encoded each time
            self.words.update(new)
        alone = np.array([i is not None for i in ids], bool)
        ids = [i or b"" for i in ids]
        word_length = np.fromiter(map(len, ids), np.int64, len(ids)) // 4  # int32 ids
        word_start = np.cumsum(word_length) - word_length
        values = np.frombuffer(b"".join(ids), np.int32)

        which = words.indices.to_numpy(zero_copy_only=False)  # (W,) the distinct word at each position
        length = word_length[which]  # (W,)
        end = np.cumsum(length)  # (W,)
        tokens = values[np.repeat(word_start[which] - (end - length), length) + np.arange(end[-1] if len(end) else 0)]
        sentence_words = split.offsets.to_numpy() - split.offsets[0].as_py()  # (S + 1,)
        sentence_tokens = np.concatenate([[0], end])[sentence_words]  # (S + 1,) where each sentence's tokens lie

        added = len(self.prefix) + len(self.suffix)
        keep = np.minimum(np.diff(sentence_tokens), self.max_length - added)  # (S,) truncation
        offsets = np.concatenate([[0], np.cumsum(keep + added)])  # (S + 1,)
        within = np.arange(keep.sum()) - np.repeat(np.cumsum(keep) - keep, keep)  # (K,) position in its sentence
        out = np.empty(offsets[-1], np.int32)
        out[np.repeat(offsets[:-1] + len(self.prefix), keep) + within] = tokens[
            np.repeat(sentence_tokens[:-1], keep) + within
        ]
        for i, token in enumerate(self.prefix):
            out[offsets[:-1] + i] = token
        for i, token in enumerate(self.suffix):
            out[offsets[1:] - len(self.suffix) + i] = token
        encoded = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(out))

        whole = np.flatnonzero(np.logical_or.reduceat(~alone[which], sentence_words[:-1])) if len(which) else []
        if len(whole) == 0:
            return encoded
        order = np.arange(len(texts))
        order[whole] = len(texts) + np.arange(len(whole))
        return pa.concat_arrays([encoded, self.encode_whole(texts.take(whole).to_pylist())]).take(order)


def load_tokenizer(name_or_path, **kwargs):
    """`AutoTokenizer.from_pretrained` with clear errors for a local path that does not exist and for a damaged
    tokenizer file (naming it)."""
    name_or_path = os.fspath(name_or_path)
    if looks_local(name_or_path) and not os.path.isdir(name_or_path):
        raise FileNotFoundError(f"Tokenizer directory {name_or_path!r} does not exist.")
    if os.path.isdir(name_or_path):
        if not any(os.path.isfile(os.path.join(name_or_path, name)) for name in ("tokenizer.json", "vocab.json")):
            raise FileNotFoundError(
                f"{name_or_path!r} holds no tokenizer (tokenizer.json): not a saved model or tokenizer directory."
            )
        check_json_files(name_or_path, TOKENIZER_FILES)
    with local_or_hub(name_or_path):
        return AutoTokenizer.from_pretrained(name_or_path, **kwargs)


def check_tokenizer_matches_config(tokenizer, config) -> None:
    """A tokenizer whose special tokens or size disagree with the model config would train or decode garbage."""
    for name in ("pad_token_id", "eos_token_id"):
        tok_id, cfg_id = getattr(tokenizer, name), getattr(config, name)
        if tok_id is not None and cfg_id is not None and tok_id != cfg_id:
            raise ValueError(f"Tokenizer {name}={tok_id} disagrees with the model config {name}={cfg_id}.")
    if len(tokenizer) > config.vocab_size:
        raise ValueError(f"Tokenizer has {len(tokenizer)} tokens but the model's vocab_size is {config.vocab_size}.")


class PairFeatures:
    """Arrow batches of pairs -> `input_ids` and `labels`. Its hash (what it reads) names the tokenized-data cache:
    other flags leave the cache valid."""

    def __init__(self, tokenizer, max_source_length: int, max_target_length: int, languages: tuple):
        self.source = CorpusEncoder(tokenizer, max_source_length)
        self.target = CorpusEncoder(tokenizer, max_target_length)
        self.languages = languages

    def __call__(self, batch):
        pairs = batch["translation"].combine_chunks()  # an Arrow batch: the sentences without a dict per pair
        src, tgt = self.languages
        return pa.table(
            {
                "input_ids": self.source.encode(pairs.field(src)),
                "labels": self.target.encode(pairs.field(tgt), target=True),
            }
        )

    def of_python_batch(self, batch) -> dict:
        """The same for a stream's batches (Python lists)."""
        return self({"translation": pa.chunked_array([pa.array(batch["translation"])])}).to_pydict()


def inside(label: str, vocab: dict) -> str:
    """The tag of a non-first sub-token with --label_all_tokens."""
    inner = "I-" + label[2:]
    return inner if label.startswith("B-") and inner in vocab else label


class TaggingFeatures:
    """Sentences (with their document context) -> input ids and the labels of their words' pieces: the first piece
    of each word of the sentence (every piece with `all_tokens`), -100 for special tokens and context."""

    def __init__(self, tokenizer, max_seq_length: int, label_list: list[str], aux_label2id: list[dict]):
        self.tokenizer, self.max_seq_length, self.aux_label2id = tokenizer, max_seq_length, aux_label2id
        self.label2id = {label: i for i, label in enumerate(label_list)}

    def __call__(self, batch, all_tokens: bool):
        enc = self.tokenizer(
            batch["tokens"],
            is_split_into_words=True,
            truncation=True,
            max_length=self.max_seq_length,
            return_token_type_ids=False,
        )
        aux = batch.get("auxiliary_tags")
        enc["labels"] = []
        if aux is not None:
            enc["auxiliary_targets"] = []  # (length, tasks) per sentence, at the positions that have a label
        for i, tags in enumerate(batch["ner_tags"]):
            previous, row, aux_row = None, [], []
            for word in enc.word_ids(i):
                first_piece, previous = word != previous, word
                if word is None or not batch["first"][i] <= word < batch["last"][i] or not (first_piece or all_tokens):
                    row.append(-100)  # special token, context, or a non-first sub-token
                    aux_row.append([-100] * len(self.aux_label2id))
                    continue
                row.append(self.label2id[tags[word] if first_piece else inside(tags[word], self.label2id)])
                if aux is not None:
                    aux_row.append(
                        [
                            vocab.get(tag if first_piece else inside(tag, vocab), -100)
                            for tag, vocab in zip(aux[i][word], self.aux_label2id)
                        ]
                    )
            enc["labels"].append(row)
            if aux is not None:
                enc["auxiliary_targets"].append(aux_row)
        return enc

    def one(self, words, tags, first, last, auxiliary_tags=None, all_tokens: bool = False) -> dict:
        """The features of one sentence (mention replacement re-encodes sentences as it changes them)."""
        batch = {"tokens": [words], "ner_tags": [tags], "first": [first], "last": [last]}
        if auxiliary_tags is not None:
            batch["auxiliary_tags"] = [auxiliary_tags]
        return {k: v[0] for k, v in self(batch, all_tokens).items()}
