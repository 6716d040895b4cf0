"""The translation pipeline (transformers 5 removed its own).

The model file imports this file relatively (when first asked for the pipeline), so `save_pretrained` copies it beside
the weights, and config.json's `custom_pipelines` names the pipeline as
`modeling_vanilla_transformer.VanillaTranslationPipeline`: `pipeline(model=saved_dir, trust_remote_code=True)` finds it
where our package is not installed.
"""

from transformers.pipelines import Pipeline


class VanillaTranslationPipeline(Pipeline):
    """`pipeline("vanilla-translation", model=...)("Ein Hund.")` -> `[{"translation_text": "A dog."}]`.

    Keyword arguments other than `truncation` go to `generate()` (`num_beams`, `max_new_tokens`, ...).
    """

    def _sanitize_parameters(self, truncation=None, **generate_kwargs):
        preprocess = {} if truncation is None else {"truncation": truncation}
        if "max_new_tokens" in generate_kwargs:  # replaces the saved max_length (without generate's "both set" warning)
            generate_kwargs.setdefault("max_length", None)
        return preprocess, generate_kwargs, {}

    def preprocess(self, text, truncation=True):
        if not isinstance(text, str):
            raise TypeError(f"The translation pipeline takes strings, got {type(text).__name__}.")
        return self.tokenizer(text, return_tensors="pt", truncation=truncation, return_token_type_ids=False)

    def _forward(self, inputs, **generate_kwargs):
        batch = inputs["input_ids"].shape[0]
        output_ids = self.model.generate(**inputs, **generate_kwargs)
        return {"output_ids": output_ids.reshape(batch, -1, output_ids.shape[-1])}  # (B, num_return_sequences, L)

    def postprocess(self, model_outputs):
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
