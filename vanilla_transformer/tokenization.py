"""Train or load the tokenizer: a joint BPE (section 5.1 of the paper: "shared source-target vocabulary") trained with
`tokenizers` and wrapped as a transformers fast tokenizer, so `AutoTokenizer.from_pretrained(dir)` loads it back; and
the checks of saved directories (tokenizer, translation model, CTranslate2 export) before they are loaded."""

import json
import os
from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

# Order fixes the ids, which match VanillaTransformerConfig's defaults: pad 0, bos 1, eos 2, unk 3.
SPECIAL_TOKENS = {"pad_token": "<pad>", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}


def train_tokenizer(texts: Iterable[str], vocab_size: int = 8000, min_frequency: int = 2,
                    model_max_length: int = 1024, show_progress: bool = False) -> PreTrainedTokenizerFast:
    """BPE over whitespace-marked words (sentencepiece-style "▁" so decoding restores the spaces exactly, as
    detokenized sacreBLEU needs). Encoding appends `</s>`; decoding drops the specials."""
    if not isinstance(vocab_size, int) or vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must be an integer above {len(SPECIAL_TOKENS)}, got {vocab_size!r}.")
    tok = Tokenizer(models.BPE(unk_token=SPECIAL_TOKENS["unk_token"]))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=list(SPECIAL_TOKENS.values()), show_progress=show_progress)
    tok.train_from_iterator(texts, trainer=trainer)
    if tok.get_vocab_size() <= len(SPECIAL_TOKENS):
        raise ValueError("The tokenizer's training text is empty: no tokens were learned.")
    eos = SPECIAL_TOKENS["eos_token"]
    tok.post_processor = processors.TemplateProcessing(
        single=f"$A {eos}", pair=f"$A {eos} $B {eos}", special_tokens=[(eos, tok.token_to_id(eos))]
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=model_max_length, **SPECIAL_TOKENS)


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def looks_local(name_or_path) -> bool:
    """A path rather than a Hub id ("name" or "owner/name"): it exists, or it is written as a path."""
    text = os.fspath(name_or_path)
    return (os.path.exists(text) or text.startswith((".", "/", "~")) or text.count("/") > 1
            or (os.path.sep != "/" and os.path.sep in text))


class CorpusEncoder:
    """texts -> the token ids `tokenizer(texts, truncation=True, max_length=max_length)` gives, for tokenizing whole
    corpora. A plain fast tokenizer (the joint BPE this package trains) encodes through a copy of its Rust tokenizer's
    `encode_batch_fast`, which skips the character offsets and the per-sentence Python objects of the tokenizer's call
    (several times faster); other tokenizers (with their own target-side rules, say) through their call."""

    def __init__(self, tokenizer, max_length: int):
        self.tokenizer, self.max_length, self.rust = tokenizer, max_length, None
        if type(tokenizer) is PreTrainedTokenizerFast:
            self.rust = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
            self.rust.enable_truncation(max_length)
            self.rust.no_padding()

    def __call__(self, texts: list[str], target: bool = False) -> list[list[int]]:
        if self.rust is not None:
            return [encoding.ids for encoding in self.rust.encode_batch_fast(texts)]
        text = {"text_target" if target else "text": texts}
        return self.tokenizer(**text, truncation=True, max_length=self.max_length, return_token_type_ids=False,
                              return_attention_mask=False)["input_ids"]


def is_ctranslate2_dir(path) -> bool:
    return os.path.isfile(os.path.join(path, "model.bin"))


def check_translation_model_dir(path) -> None:
    """A clear error for a missing directory or one that holds something other than a translation model."""
    from transformers import PretrainedConfig

    if looks_local(path):
        if not os.path.isdir(path):
            raise FileNotFoundError(f"Model directory {str(path)!r} does not exist.")
        if is_ctranslate2_dir(path):
            return
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise FileNotFoundError(f"{str(path)!r} has no config.json: not a saved model (save_pretrained) nor an "
                                    "exported CTranslate2 model (model.bin).")
    architectures = PretrainedConfig.get_config_dict(path)[0].get("architectures") or []
    if architectures and "VanillaTransformerForConditionalGeneration" not in architectures:
        raise ValueError(f"{str(path)!r} holds a {', '.join(architectures)}, not a translation model "
                         "(VanillaTransformerForConditionalGeneration).")


def load_tokenizer(name_or_path, **kwargs):
    """`AutoTokenizer.from_pretrained` with clear errors for a local path that does not exist and for a damaged
    tokenizer file (naming it)."""
    name_or_path = os.fspath(name_or_path)
    if looks_local(name_or_path) and not os.path.isdir(name_or_path):
        raise FileNotFoundError(f"Tokenizer directory {name_or_path!r} does not exist.")
    if os.path.isdir(name_or_path):
        if not any(os.path.isfile(os.path.join(name_or_path, name)) for name in ("tokenizer.json", "vocab.json",
                                                                                   "tokenizer_config.json")):
            raise FileNotFoundError(f"{name_or_path!r} holds no tokenizer (tokenizer.json): not a saved model or "
                                    "tokenizer directory.")
        check_json_files(name_or_path, TOKENIZER_FILES)
    return AutoTokenizer.from_pretrained(name_or_path, **kwargs)


def check_json_files(directory, names, advice: str = "") -> None:
    """An OSError naming the first of `names` in `directory` that exists but is not valid JSON (truncated, corrupted);
    `advice` ("; export it again ...") ends the message."""
    for name in names:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            try:
                with open(path, encoding="utf-8") as f:
                    json.load(f)
            except (ValueError, UnicodeDecodeError) as error:
                raise OSError(f"{path} is truncated or corrupted (not valid JSON: {error}){advice}.") from None


def check_tokenizer_matches_config(tokenizer, config) -> None:
    """A tokenizer whose special tokens or size disagree with the model config would train or decode garbage."""
    for name in ("pad_token_id", "eos_token_id"):
        tok_id, cfg_id = getattr(tokenizer, name), getattr(config, name)
        if tok_id is not None and cfg_id is not None and tok_id != cfg_id:
            raise ValueError(f"Tokenizer {name}={tok_id} disagrees with the model config {name}={cfg_id}.")
    if len(tokenizer) > config.vocab_size:
        raise ValueError(f"Tokenizer has {len(tokenizer)} tokens but the model's vocab_size is {config.vocab_size}.")
