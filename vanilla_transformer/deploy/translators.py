"""Translate text files with a trained model, served by PyTorch (`generate`) or by CTranslate2.

Both engines decode as the model's generation_config.json says (its beams and length penalty: what the training
command evaluated with, or what `tune-decoding` chose), unless a call asks otherwise; an export carries that file.
Lines are translated in batches sorted by length (less padding) and written back in input order, one output line per
input line; empty lines stay empty and are not sent to the model.
"""

import os
import tempfile
import time

from ..console import sentence_progress
from ..files import file_stats, read_lines, write_lines
from ..loading import require
from ..model_dirs import ModelDir, default_threads, recognise, resolve_device, special_token_id
from .batches import nonblank_batches


class PyTorchTranslator:
    """`model.generate` on batches of sentences; `engine_seconds` adds up the time spent in it; `backend`: the Rust
    tokenizer (`tokenizers.Tokenizer`)."""

    workers, engine_seconds = 1, 0.0  # batches it runs at once; seconds in `generate`

    def __init__(
        self,
        model: ModelDir,
        num_beams: int | None = None,
        max_new_tokens: int | None = None,
        device: str = "cpu",
        threads: int = 0,
        ensemble_with=(),
    ):
        import torch

        from ..model.modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration

        if threads:
            torch.set_num_threads(threads)
        self.tokenizer = model.tokenizer()
        self.backend = self.tokenizer.backend_tokenizer
        self.model = model.load(VanillaTransformerForConditionalGeneration).to(device).eval()
        # a learned position table bounds both sides, as in a CTranslate2 export: the input is cut to it and at most
        # its rows less one new tokens are decoded (a position past it would be an error for every request)
        config = self.model.config
        learned = getattr(config, "position_embedding_type", None) == "learned"
        self.longest = config.max_position_embeddings - 1 if learned else None
        self.max_input = min(self.tokenizer.model_max_length, config.max_position_embeddings) if learned else None
        if max_new_tokens is not None and self.longest is not None and max_new_tokens > self.longest:
            raise ValueError(
                f"--max_new_tokens {max_new_tokens} is over this model's limit of {self.longest} new "
                f"tokens (its learned position table has {config.max_position_embeddings} rows: "
                "max_position_embeddings)."
            )
        if ensemble_with:  # the models decode as one (translation_ensemble.py)
            from ..translation_ensemble import translation_ensemble

            self.model = translation_ensemble(self.model, self.tokenizer, ensemble_with)
        self.generate_kwargs = dict(do_sample=False)  # the beams and length penalty: the model's generation config
        if num_beams is not None:
            self.generate_kwargs["num_beams"] = num_beams
        if max_new_tokens is not None:
            # max_length=None: the limit replaces the saved generation_config.max_length (no "both set" warning)
            self.generate_kwargs.update(max_new_tokens=max_new_tokens, max_length=None)

    def __call__(
        self, sentences: list[str], num_beams: int | None = None, max_new_tokens: int | None = None
    ) -> list[str]:
        """Translations of `sentences`; `num_beams` / `max_new_tokens` override the translator's for this call."""
        return [best for best, *_ in self.hypotheses(sentences, 1, num_beams, max_new_tokens)]

    def set_decoding(self, num_beams: int, length_penalty: float) -> None:
        """Decode every later call with these beams and length penalty."""
        self.generate_kwargs.update(num_beams=num_beams, length_penalty=length_penalty)

    def hypotheses(
        self, sentences: list[str], n: int, num_beams: int | None = None, max_new_tokens: int | None = None
    ) -> list[list[str]]:
        """The `n` best translations of each sentence, best first (beam search's n-best: `num_return_sequences`;
        `num_beams` at least `n`)."""
        import torch

        batch = self.tokenizer(
            sentences,
            return_tensors="pt",
            padding=True,
            truncation=True,
            max_length=self.max_input,
            return_token_type_ids=False,
        ).to(self.model.device)
        kwargs = dict(self.generate_kwargs)
        if num_beams is not None:
            kwargs["num_beams"] = num_beams
        if max_new_tokens is not None:
            kwargs.update(max_new_tokens=max_new_tokens, max_length=None)
        if self.longest is not None:  # (max_length counts the decoder's start token; transformers' default is 20)
            asked = kwargs.get("max_new_tokens") or (self.model.generation_config.max_length or 20) - 1
            kwargs.update(max_new_tokens=min(asked, self.longest), max_length=None)
        # the beams: asked for, else the generation config's; a config that names none (transformers' default
        # GenerationConfig has num_beams None) decodes greedily
        beams = kwargs.get("num_beams") or self.model.generation_config.num_beams or 1
        if n > 1:
            beams = max(n, beams)
            kwargs.update(num_beams=beams, num_return_sequences=n)
        if beams == 1:
            kwargs["length_penalty"] = 1.0  # (greedy search has none; a saved one would be refused)
        start = time.perf_counter()
        with torch.inference_mode():
            output = self.model.generate(**batch, **kwargs)
        self.engine_seconds += time.perf_counter() - start
        texts = self.tokenizer.batch_decode(output, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        return [texts[i : i + n] for i in range(0, len(texts), n)]


class CTranslate2Translator:
    """CTranslate2's `Translator` on an exported directory, or on a saved PyTorch model converted on the fly.

    `workers`: CTranslate2 workers, each running one batch on `threads` / `workers` threads, so calls from that many
    threads run at once (the server's `--workers`). `parallel` (on a CPU): `threads` one-thread workers, each call split
    into that many batches run at once, instead of one batch on `threads` threads - for translating many sentences.
    One thread per batch never waits for the others at every operation (measured: docs/design.md). `engine_seconds`
    adds up the time spent in `translate_batch`. An export runs without torch or transformers (their imports take
    seconds): text <-> tokens through the export's Rust tokenizer, `backend`."""

    engine_seconds = 0.0

    def __init__(
        self,
        model: ModelDir,
        num_beams: int | None = None,
        max_new_tokens: int | None = None,
        compute_type: str = "default",
        threads: int = 0,
        device: str = "cpu",
        parallel: bool = False,
        workers: int = 1,
    ):
        require("ctranslate2")
        self._tmp = None
        if model.format != "ctranslate2":
            from .ctranslate2 import export_ctranslate2  # (torch and transformers)

            self._tmp = tempfile.TemporaryDirectory(prefix="vanilla-ct2-")
            model = recognise(export_ctranslate2(model, os.path.join(self._tmp.name, "model")))
        # its files were checked when recognised: CTranslate2's own errors do not name a damaged one
        export_config = model.json("config.json")
        self.backend, settings = model.export_tokenizer()
        threads = threads or default_threads()
        self.split = parallel and device == "cpu"
        self.workers = threads if self.split else workers
        self.translator = self.open(model, device, compute_type, threads)
        limit = settings.get("model_max_length")  # transformers' "no limit" is a huge number
        limit = limit if isinstance(limit, int) and limit < 1e6 else 1024
        # the export's position table bounds both sides (an older export without the count: unchecked)
        positions = export_config.get("max_positions")
        self.longest = positions - 1 if isinstance(positions, int) and positions > 1 else None  # new tokens at most
        if max_new_tokens is not None and self.longest is not None and max_new_tokens > self.longest:
            raise ValueError(
                f"--max_new_tokens {max_new_tokens} is over this export's limit of {self.longest} new "
                f"tokens (its position table has {positions} rows: the model's max_position_embeddings)."
            )
        decoding = decoding_options(model)
        self.options = dict(
            beam_size=num_beams or decoding["beam_size"],
            length_penalty=decoding["length_penalty"],
            min_decoding_length=0,
            max_decoding_length=self.new_tokens(max_new_tokens or 256),
            max_input_length=min(limit, positions) if self.longest else limit,
        )
        # straight through the Rust tokenizer, also without the Python wrapper's per-token conversions (measured:
        # docs/design.md)
        self.backend.enable_truncation(self.options["max_input_length"])
        self.vocab = self.backend.get_vocab()
        self.unk_id = special_token_id(self.backend, settings, "unk_token", "<unk>")

    def open(self, export: ModelDir, device: str, compute_type: str, threads: int):
        """CTranslate2's `Translator` on `export`: `self.workers` workers sharing `threads`; damaged files named."""
        try:
            return require("ctranslate2").Translator(
                export.path,
                device=device,
                compute_type=compute_type,
                inter_threads=self.workers,
                intra_threads=max(1, threads // self.workers),
            )
        except RuntimeError as error:
            if any(word in str(error).lower() for word in ("cuda", "cublas")):
                raise  # the system's CUDA set-up, not the files
            raise OSError(
                f"{os.path.join(export.path, 'model.bin')} is truncated or corrupted ({error}){export.advice}."
            ) from None

    def new_tokens(self, asked: int) -> int:
        """`asked` new tokens at most, within the export's position table (a decoding step past it would have no
        position)."""
        return min(asked, self.longest) if self.longest is not None else asked

    def translate_ids(self, sentences: list[str], n: int = 1, **options) -> list[list[list[int]]]:
        """The `n` best hypotheses of each sentence as token ids; `options` override `translate_batch`'s (beam_size,
        ...; the beam at least `n`)."""
        sources = [encoding.tokens for encoding in self.backend.encode_batch(sentences)]
        options = {**self.options, **options}
        if n > 1:
            options.update(num_hypotheses=n, beam_size=max(n, options["beam_size"]))
        start = time.perf_counter()
        results = self.translator.translate_batch(sources, **options)
        self.engine_seconds += time.perf_counter() - start
        return [[[self.vocab.get(token, self.unk_id) for token in tokens] for tokens in r.hypotheses] for r in results]

    def __call__(
        self, sentences: list[str], num_beams: int | None = None, max_new_tokens: int | None = None
    ) -> list[str]:
        """Translations of `sentences`; `num_beams` / `max_new_tokens` override the translator's for this call."""
        return [best for best, *_ in self.hypotheses(sentences, 1, num_beams, max_new_tokens)]

    def set_decoding(self, num_beams: int, length_penalty: float) -> None:
        """Decode every later call with these beams and length penalty."""
        self.options.update(beam_size=num_beams, length_penalty=length_penalty)

    def hypotheses(
        self, sentences: list[str], n: int, num_beams: int | None = None, max_new_tokens: int | None = None
    ) -> list[list[str]]:
        """The `n` best translations of each sentence, best first (`num_hypotheses`; the beam at least `n`)."""
        options = {} if num_beams is None else dict(beam_size=num_beams)
        if max_new_tokens is not None:
            options["max_decoding_length"] = self.new_tokens(max_new_tokens)
        if self.split and self.workers > 1:  # one batch per worker, run at once
            options["max_batch_size"] = -(-len(sentences) // self.workers)
        return [
            [self.backend.decode(ids, skip_special_tokens=True) for ids in hypotheses]
            for hypotheses in self.translate_ids(sentences, n, **options)
        ]


def decoding_options(export: ModelDir) -> dict:
    """CTranslate2's beam size and length penalty from the export's generation_config.json (written by
    export-ctranslate2 from the model's), else transformers' defaults: 1 beam, length penalty 1. Both engines rank a
    finished hypothesis by its summed log-probability over its length to the power `length_penalty`, and translate
    alike up to a penalty of 1; above it transformers' beam search, which does not stop at the first finished beam,
    finds longer translations than CTranslate2's."""
    values = export.json("generation_config.json")
    return {"beam_size": int(values.get("num_beams") or 1), "length_penalty": float(values.get("length_penalty", 1.0))}


def make_translator(model_dir, engine: str = "auto", device: str = "cpu", **kwargs):
    """A translator: a callable from a list of sentences to their translations.

    Args:
        model_dir: a saved translation model or a CTranslate2 export (a path or Hub id), or its already recognised
            `model_dirs.ModelDir` (then its engine is used).
        engine: "auto" (CTranslate2 for an export, else PyTorch), "pytorch" or "ctranslate2" (which converts a saved
            model on the fly).
        device: "cpu", "cuda" or "auto" (a CUDA GPU where the engine sees one).
        **kwargs: the engine's options: `num_beams`, `max_new_tokens`, `threads`; PyTorch's `ensemble_with` (more
            saved models, decoding as one); CTranslate2's `compute_type`, `workers`, `parallel`.

    Returns:
        A `PyTorchTranslator` or `CTranslate2Translator`; call it on sentences, or `hypotheses(sentences, n)` for
        the n best of each.

    Raises:
        FileNotFoundError: no such directory, or an incomplete export.
        ValueError: not a translation model, an engine that cannot run it, or options the engine does not take.

    Example:
        ```python
        from vanilla_transformer.deploy.translators import make_translator

        translate = make_translator("outputs/demo")
        translate(["ein kleines haus"])
        ```
    """
    found = (
        model_dir.holding("translation")
        if isinstance(model_dir, ModelDir)
        else recognise(model_dir, engine, "translation")
    )
    engine = found.engine
    kwargs["device"] = resolve_device(device, engine)
    if engine != "pytorch" and kwargs.pop("ensemble_with", None):
        raise ValueError(
            "--ensemble_with: an ensemble decodes with the PyTorch engine (--engine pytorch, saved "
            "models); CTranslate2 runs one model."
        )
    if engine == "pytorch":
        kwargs.pop("compute_type", None)
        kwargs.pop("parallel", None)
        if kwargs.pop("workers", 1) != 1:
            raise ValueError("workers: several batches at once need the CTranslate2 engine; PyTorch runs one.")
        return PyTorchTranslator(found, **kwargs)
    return CTranslate2Translator(found, **kwargs)


def translate_lines(translate, lines: list[str], batch_size: int = 64, progress: bool = False) -> list[str]:
    """Translate `lines` with `translate` (a list of sentences -> their translations) in batches of similar length;
    returns one line per input line, in input order; empty lines stay empty."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}.")
    batches, scatter = nonblank_batches(lines, "", batch_size)
    done = []
    with sentence_progress(sum(map(len, batches)), progress) as bar:
        for batch in batches:
            done.append([text.replace("\n", " ") for text in translate([line.strip() for line in batch])])
            bar.update(len(batch))
    return scatter(done)


def translate_file(
    model_dir,
    input_path=None,
    output_path=None,
    engine: str = "auto",
    batch_size: int = 64,
    progress: bool = True,
    **kwargs,
) -> dict:
    """Translate a text file, one sentence a line, into another: what `vanilla-transformer translate` runs.

    Args:
        model_dir: as `make_translator`'s.
        input_path: the file to read (None or "-": stdin); output_path: the file to write, atomically (None: stdout).
        engine: as `make_translator`'s; batch_size: sentences per batch (per CTranslate2 worker).
        progress: a progress bar on stderr.
        **kwargs: `make_translator`'s options.

    Returns:
        The counts and speed: sentences, lines, seconds, sentences per second, the engine's seconds.
    """
    translate = make_translator(model_dir, engine, parallel=True, **kwargs)
    lines = read_lines(input_path, allow_empty=True)  # no lines in, none out
    start = time.perf_counter()
    outputs = translate_lines(translate, lines, batch_size * translate.workers, progress)
    seconds = time.perf_counter() - start
    write_lines(output_path, outputs)
    return file_stats(sum(1 for line in lines if line.strip()), len(lines), seconds, translate.engine_seconds)
