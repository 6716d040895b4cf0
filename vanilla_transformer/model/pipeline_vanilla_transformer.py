"""The translation pipeline (transformers 5 removed its own).

The model file imports this file relatively (when first asked for the pipeline), so `save_pretrained` copies it beside
the weights, and config.json's `custom_pipelines` names the pipeline as
`modeling_vanilla_transformer.VanillaTranslationPipeline`: `pipeline(model=saved_dir, trust_remote_code=True)` finds it
where our package is not installed.
"""

from transformers.pipelines import Pipeline


class VanillaTranslationPipeline(Pipeline):
    """The translation pipeline of transformers' `pipeline()`: text in, translations out.

    `pipeline("vanilla-translation", model=...)` makes it once `vanilla_transformer` is imported (the task is
    `TRANSLATION_TASK`), and `pipeline(model=saved_dir, trust_remote_code=True)` without the package installed. It is
    called on a string or a list of strings, with these keyword arguments:

    Args:
        truncation: cut a text longer than the tokenizer's `model_max_length` (default True).
        **generate_kwargs: everything else goes to the model's `generate()` (`num_beams`, `max_new_tokens`,
            `num_return_sequences`, ...); `max_new_tokens` replaces the saved `max_length`.

    Returns:
        For a string, a list of `{"translation_text": ...}`, one per returned sequence; for a list of strings, one
        such dict per string (a list of them per string with `num_return_sequences` above 1).

    Raises:
        TypeError: an input that is not a string.

    Example:
        ```python
        from transformers import pipeline

        import vanilla_transformer  # noqa: F401 (registers the task)

        translate = pipeline("vanilla-translation", model="outputs/demo")
        translate("Ein Hund.")  # [{"translation_text": "A dog."}]
        translate(["Ein Hund.", "Eine Katze."], num_beams=4)  # [{"translation_text": ...}, {"translation_text": ...}]
        ```
    """

    def _sanitize_parameters(self, truncation=None, **generate_kwargs):
        preprocess = {} if truncation is None else {"truncation": truncation}
        if "max_new_tokens" in generate_kwargs:  # replaces the saved max_length (without generate's "both set" warning)
            generate_kwargs.setdefault("max_length", None)
        return preprocess, generate_kwargs, {}

    def preprocess(self, text, truncation=True):
        """A text's token ids and attention mask, as PyTorch tensors (the pipeline's first step)."""
        if not isinstance(text, str):
            raise TypeError(f"The translation pipeline takes strings, got {type(text).__name__}.")
        return self.tokenizer(text, return_tensors="pt", truncation=truncation, return_token_type_ids=False)

    def _forward(self, inputs, **generate_kwargs):
        batch = inputs["input_ids"].shape[0]
        output_ids = self.model.generate(**inputs, **generate_kwargs)
        return {"output_ids": output_ids.reshape(batch, -1, output_ids.shape[-1])}  # (B, num_return_sequences, L)

    def postprocess(self, model_outputs):
        """The generated ids of one text decoded, special tokens skipped: a list of `{"translation_text": ...}`."""
        return [
            {
                "translation_text": self.tokenizer.decode(
                    ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
                )
            }
            for ids in model_outputs["output_ids"][0]
        ]

    def __call__(self, inputs, **kwargs):
        result = super().__call__(inputs, **kwargs)
        if isinstance(inputs, list) and all(len(r) == 1 for r in result):
            return [r[0] for r in result]
        return result
