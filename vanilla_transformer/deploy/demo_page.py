"""The demo page: translate a sentence and see the cross-attention, tag the entities of a text (Gradio); served by
`vanilla-transformer demo` (commands/demo.py) and as the app of a pushed Space (`build_app`).

Models come from a local directory or a Hub id; a tab shows only when its model is given. Input problems (empty text,
text longer than the model reads) and a model that fails to load are shown as messages in the page.
"""

import logging
import os

from ..loading import require
from ..model_dirs import recognise, resolve_device

logger = logging.getLogger(__name__)
INSTALL_HINT = "The demo page needs Gradio and matplotlib: pip install 'vanilla-transformer[demo]'."
ENTITY_COLORS = {"PER": "#f4a261", "LOC": "#2a9d8f", "ORG": "#e9c46a", "MISC": "#8ab17d"}
AVERAGE = "average"
DEFAULT_MODELS = ("outputs/demo", "outputs/demo-ner")  # shown when no model is given, if present


def require_gradio():
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    try:
        import gradio
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    return gradio


def input_limit(tokenizer, config) -> int:
    """The most tokens the model reads: the learned position table's size, else the tokenizer's maximum."""
    limit = tokenizer.model_max_length if tokenizer.model_max_length < 1e6 else 1024
    if config.position_embedding_type == "learned":
        limit = min(limit, config.max_position_embeddings)
    return limit


def check_text(text: str, tokenizer, limit: int, what: str) -> str | None:
    """A message for input the model cannot take (empty, too long), or None."""
    if not text or not text.strip():
        return f"Type some text to {what}."
    length = len(tokenizer(text.strip(), return_token_type_ids=False)["input_ids"])
    if length > limit:
        return f"The text is {length} tokens long; this model reads at most {limit}. Shorten it."
    return None


def failure(what: str, error: Exception) -> str:
    """One line for the page; the traceback goes to the server's log only."""
    logger.exception("%s failed", what)
    return f"{what} failed: {type(error).__name__}: {error}"


class TranslationDemo:
    """Translation by `generate` (PyTorch) or CTranslate2, and the cross-attention of the result."""

    def __init__(self, model_name_or_path: str, ctranslate2_model: str | None = None, device: str = "cpu"):
        from ..model.modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration

        found = recognise(model_name_or_path, task="translation")
        if found.format != "saved":  # (the attention is the saved model's)
            raise ValueError(
                f"{found.path!r} is an export: the page needs the saved model (and takes an export with "
                "--ctranslate2_model)."
            )
        self.found, self.name, self.device = found, found.path, resolve_device(device, "pytorch")
        self.tokenizer = found.tokenizer()
        self.model = (
            found.load(VanillaTransformerForConditionalGeneration, attn_implementation="eager").to(self.device).eval()
        )  # eager: returns the weights
        self.limit = input_limit(self.tokenizer, self.model.config)
        self.ctranslate2_model, self._ctranslate2 = ctranslate2_model, None
        self.engines = ["PyTorch"]
        try:
            require("ctranslate2")
            self.engines.append("CTranslate2")
        except ImportError:
            pass

    @property
    def layers(self) -> list[str]:
        return [AVERAGE] + [str(i + 1) for i in range(self.model.config.decoder_layers)]

    @property
    def heads(self) -> list[str]:
        return [AVERAGE] + [str(i + 1) for i in range(self.model.config.decoder_attention_heads)]

    def ctranslate2(self):
        """Loaded on first use: the exported directory if given, else converted from the PyTorch model (int8)."""
        if self._ctranslate2 is None:
            from ..deploy.translators import CTranslate2Translator

            device = "cpu" if self.device == "cpu" else resolve_device("auto", "ctranslate2")
            model = recognise(self.ctranslate2_model, task="translation") if self.ctranslate2_model else self.found
            self._ctranslate2 = CTranslate2Translator(
                model, device=device, compute_type="int8" if device == "cpu" else "int8_float16"
            )
        return self._ctranslate2

    def translate(self, text: str, num_beams: int = 1, max_new_tokens: int = 64, engine: str = "PyTorch") -> dict:
        """{"translation", "source_tokens", "target_tokens", "attention" (L, H, T, S)} or {"message"}."""
        import torch

        message = check_text(text, self.tokenizer, self.limit, "translate")
        if message:
            return {"message": message}
        with torch.inference_mode():
            enc = self.tokenizer([text.strip()], return_tensors="pt", return_token_type_ids=False).to(self.device)
            if engine == "CTranslate2":
                ids = self.ctranslate2().translate_ids(
                    [text.strip()], beam_size=int(num_beams), max_decoding_length=int(max_new_tokens)
                )[0][0]
                start = self.model.generation_config.decoder_start_token_id
                generated = torch.tensor([[start, *ids]], device=self.device)
            else:
                kwargs = dict(
                    num_beams=int(num_beams), max_new_tokens=int(max_new_tokens), max_length=None, do_sample=False
                )  # the slider replaces max_length
                generated = self.model.generate(**enc, **kwargs)
            # The attention of the shown translation: one teacher-forced pass; row i is where the decoder looked while
            # producing output token i (from the tokens before it).
            out = self.model(**enc, decoder_input_ids=generated[:, :-1], output_attentions=True)
            attention = torch.stack(out.cross_attentions)[:, 0]  # (L, H, T, S)
            return {
                "translation": self.tokenizer.decode(
                    generated[0], skip_special_tokens=True, clean_up_tokenization_spaces=False
                ),
                "source_tokens": self.tokenizer.convert_ids_to_tokens(enc["input_ids"][0]),
                "target_tokens": self.tokenizer.convert_ids_to_tokens(generated[0, 1:]),
                "attention": attention.float().cpu().numpy(),
            }


def attention_figure(result: dict | None, layer: str = AVERAGE, head: str = AVERAGE):
    """A heatmap of cross-attention: output tokens (rows) attending to source tokens (columns)."""
    from ..attention_pictures import draw_attention, pyplot

    plt = pyplot()
    if not result or "attention" not in result:
        return None
    attention = result["attention"]  # (L, H, T, S)
    attention = attention.mean(0) if layer == AVERAGE else attention[int(layer) - 1]  # (H, T, S)
    attention = attention.mean(0) if head == AVERAGE else attention[int(head) - 1]  # (T, S)
    rows, cols = result["target_tokens"], result["source_tokens"]
    fig, ax = plt.subplots(figsize=(min(12, 3.5 + 0.35 * len(cols)), min(10, 2 + 0.3 * len(rows))))
    draw_attention(ax, attention, rows, cols, f"layer {layer}, head {head}")
    fig.tight_layout()
    plt.close(fig)
    return fig


class NerDemo:
    """The token-classification pipeline: entity spans (grouped) and per-token labels."""

    def __init__(self, model_name_or_path: str, device: str = "cpu"):
        from transformers import pipeline

        from ..model.modeling_vanilla_transformer import VanillaTransformerForTokenClassification

        found = recognise(model_name_or_path, "pytorch", "tagging")  # (the page runs transformers' pipeline)
        self.name = found.path
        self.tokenizer = found.tokenizer()
        model = found.load(VanillaTransformerForTokenClassification).eval()
        self.limit = input_limit(self.tokenizer, model.config)
        self.pipeline = pipeline(
            "token-classification", model=model, tokenizer=self.tokenizer, device=resolve_device(device, "pytorch")
        )

    def tag(self, text: str) -> dict:
        """{"entities": [{"entity", "start", "end", "word", "score"}], "tokens": [[token, label, score]]} or
        {"message"}."""
        message = check_text(text, self.tokenizer, self.limit, "tag")
        if message:
            return {"message": message}
        entities = self.pipeline(text, aggregation_strategy="simple")
        tokens = self.pipeline(text, aggregation_strategy="none", ignore_labels=[])
        return {
            "entities": [
                {
                    "entity": e["entity_group"],
                    "start": skip_spaces(text, int(e["start"]), int(e["end"])),
                    "end": int(e["end"]),
                    "word": e["word"],
                    "score": float(e["score"]),
                }
                for e in entities
            ],
            "tokens": [[t["word"], t["entity"], round(float(t["score"]), 3)] for t in tokens],
        }


def skip_spaces(text: str, start: int, end: int) -> int:
    """A span's start after its leading whitespace (word-initial sub-tokens' offsets include the space before)."""
    while start < end and text[start].isspace():
        start += 1
    return start


def load_demo(cls, name, *args, strict: bool = False):
    """(demo, None) or (None, message) for a model that fails to load; `strict`: its error is raised instead."""
    if strict:
        return cls(name, *args), None
    try:
        return cls(name, *args), None
    except Exception as error:  # noqa: BLE001 - any failure becomes a message in the page
        return None, failure(f"Loading the model {name!r}", error)


def translate_tab(gr, name, ctranslate2_model=None, device="cpu", strict=False):
    demo, error = load_demo(TranslationDemo, name, ctranslate2_model, device, strict=strict)
    if error:
        gr.Markdown(error, elem_id="translate-status")
        return
    gr.Markdown(
        f"Model: `{name}`. Type a sentence in the source language; the heatmap shows which source tokens "
        "each target token attends to (decoder cross-attention)."
    )
    with gr.Row():
        with gr.Column():
            source = gr.Textbox(label="Source text", lines=3, elem_id="source")
            with gr.Row():
                beams = gr.Slider(
                    1,
                    8,
                    value=min(8, demo.model.generation_config.num_beams or 1),
                    step=1,
                    label="Beam size",
                    elem_id="num-beams",
                )
                max_new = gr.Slider(
                    1,
                    256,
                    value=min(256, demo.model.generation_config.max_length or 128),
                    step=1,
                    label="Maximum length (tokens)",
                    elem_id="max-new-tokens",
                )
            engine = gr.Radio(demo.engines, value="PyTorch", label="Engine", elem_id="engine")
            button = gr.Button("Translate", variant="primary", elem_id="translate-button")
        with gr.Column():
            status = gr.Markdown("", elem_id="translate-status")
            translation = gr.Textbox(label="Translation", lines=3, interactive=False, elem_id="translation")
            with gr.Row():
                layer = gr.Dropdown(demo.layers, value=AVERAGE, label="Layer", elem_id="layer")
                head = gr.Dropdown(demo.heads, value=AVERAGE, label="Head", elem_id="head")
            plot = gr.Plot(label="Cross-attention", elem_id="attention")
    result = gr.State(None)

    def run(text, num_beams, max_new_tokens, engine_name, layer_name, head_name):
        try:
            out = demo.translate(text, num_beams, max_new_tokens, engine_name)
        except Exception as error:  # noqa: BLE001
            out = {"message": failure("Translation", error)}
        if "message" in out:
            return out["message"], "", None, None
        return "", out["translation"], out, attention_figure(out, layer_name, head_name)

    inputs = [source, beams, max_new, engine, layer, head]
    button.click(run, inputs, [status, translation, result, plot], api_name="translate")
    source.submit(run, inputs, [status, translation, result, plot], api_name=False)
    for chooser in (layer, head):
        chooser.change(attention_figure, [result, layer, head], plot, api_name=False)


def ner_tab(gr, name, device="cpu", strict=False):
    demo, error = load_demo(NerDemo, name, device, strict=strict)
    if error:
        gr.Markdown(error, elem_id="ner-status")
        return
    gr.Markdown(f"Model: `{name}`. Type English text; the tagger marks the named entities.")
    with gr.Row():
        with gr.Column():
            text = gr.Textbox(label="Text", lines=3, elem_id="ner-text")
            button = gr.Button("Tag entities", variant="primary", elem_id="ner-button")
        with gr.Column():
            status = gr.Markdown("", elem_id="ner-status")
            spans = gr.HighlightedText(
                label="Entities", color_map=ENTITY_COLORS, combine_adjacent=False, elem_id="entities"
            )
            table = gr.Dataframe(
                headers=["token", "label", "score"], label="Per-token labels", interactive=False, elem_id="tokens"
            )

    def run(value):
        try:
            out = demo.tag(value)
        except Exception as error:  # noqa: BLE001
            out = {"message": failure("Tagging", error)}
        if "message" in out:
            return out["message"], None, None
        highlighted = {
            "text": value,
            "entities": [{k: e[k] for k in ("entity", "start", "end")} for e in out["entities"]],
        }
        return "", highlighted, out["tokens"]

    button.click(run, text, [status, spans, table], api_name="tag")
    text.submit(run, text, [status, spans, table], api_name=False)


def build_app(
    translation_model: str | None = None,
    ner_model: str | None = None,
    ctranslate2_model: str | None = None,
    device: str = "cpu",
    strict: bool = False,
):
    """The Gradio Blocks page: a Translate tab and/or a Tag entities tab; `device` "auto" or "cuda" runs the models
    on a CUDA GPU. A model that fails to load is a message in its tab, or with `strict` an error raised here."""
    gr = require_gradio()
    if not translation_model and not ner_model:
        raise ValueError(
            "Give a translation model (MODEL_DIR or --translation_model) and/or --ner_model; with "
            "neither, outputs/demo (`make demo` trains it) is shown if it exists."
        )
    with gr.Blocks(title="vanilla-transformer") as app:
        gr.Markdown("# vanilla-transformer\nThe Transformer of *Attention Is All You Need*, trained from scratch.")
        with gr.Tabs():
            if translation_model:
                with gr.Tab("Translate", id="translate"):
                    translate_tab(gr, translation_model, ctranslate2_model, device, strict)
            if ner_model:
                with gr.Tab("Tag entities", id="ner"):
                    ner_tab(gr, ner_model, device, strict)
    return app
