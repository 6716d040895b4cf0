"""Our classes in transformers' registries, registered when transformers loads.

`import vanilla_transformer` loads neither torch nor transformers, so that the command line starts at once. The Auto
classes (and `save_pretrained`'s `auto_map`) learn our config and models as soon as `transformers` is imported, and
`pipeline()` learns our translation task as soon as `transformers.pipelines` is, in whichever order a program imports
them and us; where transformers is already loaded, at once.
"""

import sys


class AfterImports:
    """A post-import hook: `after(trigger, ours, function)` calls `function()` once the module `trigger` has been
    imported and no module it watches (the trigger and `ours`, those `function` imports) is half-imported: at the end
    of whichever of those imports ends last. It finds no module itself; it wraps the loader that the other finders
    give the modules it watches."""

    def __init__(self):
        self.waiting = []  # (trigger, watched module names, function)
        self.loading = set()

    def after(self, trigger: str, ours: tuple[str, ...], function) -> None:
        self.waiting.append((trigger, {trigger, *ours}, function))
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)
        self.call_ready()

    def find_spec(self, name, path=None, target=None):
        if not any(name in watched for _, watched, _ in self.waiting):
            return None
        for finder in sys.meta_path:
            spec = None if finder is self else getattr(finder, "find_spec", lambda *_: None)(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = ThenCall(spec.loader, self, name)
                return spec
        return None

    def call_ready(self) -> None:
        """Call the functions whose trigger is loaded, unless a watched module is half-imported."""
        if self.loading:
            return
        ready = [entry for entry in self.waiting if entry[0] in sys.modules]
        self.waiting = [entry for entry in self.waiting if entry not in ready]
        if not self.waiting and self in sys.meta_path:
            sys.meta_path.remove(self)
        for _, _, function in ready:
            function()


class ThenCall:
    """A module's own loader, telling `hooks` when the module starts and ends loading."""

    def __init__(self, loader, hooks: AfterImports, name: str):
        self.loader, self.hooks, self.name = loader, hooks, name

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.hooks.loading.add(self.name)
        try:
            self.loader.exec_module(module)
        finally:
            self.hooks.loading.discard(self.name)
        self.hooks.call_ready()

    def __getattr__(self, name):  # get_source, get_resource_reader, ...: the module's own loader answers
        return getattr(self.loader, name)


def register_auto_classes() -> None:
    """AutoConfig, AutoModel and the task Auto classes load our models; `save_pretrained` writes them into
    config.json's `auto_map` and copies the code files next to the weights, so that `trust_remote_code=True` loads a
    saved model where this package is not installed."""
    from transformers import (
        AutoConfig,
        AutoModel,
        AutoModelForMaskedLM,
        AutoModelForSeq2SeqLM,
        AutoModelForTokenClassification,
    )

    from .model import modeling_vanilla_transformer as modeling
    from .model.configuration_vanilla_transformer import VanillaTransformerConfig

    AutoConfig.register(VanillaTransformerConfig.model_type, VanillaTransformerConfig, exist_ok=True)
    VanillaTransformerConfig.register_for_auto_class()
    for auto, model in (
        (AutoModel, modeling.VanillaTransformerModel),
        (AutoModelForSeq2SeqLM, modeling.VanillaTransformerForConditionalGeneration),
        (AutoModelForTokenClassification, modeling.VanillaTransformerForTokenClassification),
        (AutoModelForMaskedLM, modeling.VanillaTransformerForMaskedLM),
    ):
        auto.register(VanillaTransformerConfig, model, exist_ok=True)
        model.register_for_auto_class(auto.__name__)


def register_pipeline() -> None:
    """`pipeline("vanilla-translation", model=...)`."""
    from transformers import AutoModelForSeq2SeqLM
    from transformers.pipelines import PIPELINE_REGISTRY

    from .model.configuration_vanilla_transformer import TRANSLATION_TASK
    from .model.pipeline_vanilla_transformer import VanillaTranslationPipeline

    PIPELINE_REGISTRY.register_pipeline(
        TRANSLATION_TASK, pipeline_class=VanillaTranslationPipeline, pt_model=AutoModelForSeq2SeqLM, type="text"
    )


MODEL_MODULES = tuple(
    f"{__package__}.model.{name}"
    for name in (
        "configuration_vanilla_transformer",
        "modeling_vanilla_transformer",
        "kernels_vanilla_transformer",
        "ner_vanilla_transformer",
        "pipeline_vanilla_transformer",
    )
)
HOOKS = AfterImports()
HOOKS.after("transformers", MODEL_MODULES, register_auto_classes)
HOOKS.after("transformers.pipelines", MODEL_MODULES, register_pipeline)
