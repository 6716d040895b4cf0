"""The model card: `write_card_info` records what a run knows (data, command, hyperparameters, wall time) next to the
model; `render_card` turns that, config.json and the *_results.json files into README.md through huggingface_hub's
card API, with a model-index so the Hub shows the scores."""

import json
import os
import platform
import re
import shlex
import shutil
import sys

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from .files import read_json, write_text

TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "model_card_template.md")
CARD_INFO = "card_info.json"

TASKS = {
    "translation": dict(
        pipeline_tag="translation",
        task_type="translation",
        task_name="Translation",
        metrics=[("bleu", "sacreBLEU (cased, detokenized, 13a)"), ("chrf", "chrF")],
        auto="AutoModelForSeq2SeqLM",
        example='inputs = tokenizer(["..."], return_tensors="pt", return_token_type_ids=False)\n'
        "print(tokenizer.batch_decode(model.generate(**inputs, num_beams=4), skip_special_tokens=True))",
        description="an encoder-decoder translating {source} to {target}.",
        uses="Translating short {source} sentences of the training domain into {target}. Trained from scratch on a "
        "small corpus: expect errors on long or out-of-domain input; do not use it where mistranslation causes "
        "harm.",
    ),
    "token-classification": dict(
        pipeline_tag="token-classification",
        task_type="token-classification",
        task_name="Named-entity recognition",
        metrics=[("f1", "seqeval entity F1"), ("precision", "seqeval precision"), ("recall", "seqeval recall")],
        auto="AutoModelForTokenClassification",
        example='from transformers import pipeline\ntagger = pipeline("token-classification", model=model, '
        'tokenizer=tokenizer, aggregation_strategy="simple")\nprint(tagger("..."))',
        description="a Transformer encoder tagging named entities ({labels}).",
        uses="Tagging entities of the types {labels} in text like the training data. Trained from scratch: accuracy "
        "drops on other domains; review its output before relying on it.",
    ),
    "fill-mask": dict(
        pipeline_tag="fill-mask",
        task_type="fill-mask",
        task_name="Masked language modelling",
        metrics=[("accuracy", "masked-word accuracy"), ("perplexity", "perplexity")],
        auto="AutoModelForMaskedLM",
        example='from transformers import pipeline\nfill = pipeline("fill-mask", model=model, tokenizer=tokenizer)\n'
        'print(fill(f"... {tokenizer.mask_token} ..."))',
        description="an encoder pretrained to fill in masked words, the starting point of a tagger "
        "(`vanilla-transformer train-ner --model_name_or_path` this model).",
        uses="A starting point for fine-tuning on text like the training data (a new head is added). Trained from "
        "scratch on a small corpus: it is not a general-purpose language model.",
    ),
}

CONFIG_FIELDS = [
    "d_model",
    "encoder_layers",
    "decoder_layers",
    "encoder_attention_heads",
    "encoder_ffn_dim",
    "dropout",
    "position_embedding_type",
    "normalize_before",
    "tie_word_embeddings",
    "vocab_size",
]
HYPERPARAMETERS = [
    "learning_rate",
    "lr_scheduler_type",
    "warmup_steps",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "num_train_epochs",
    "max_steps",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "weight_decay",
    "label_smoothing",
    "bf16",
    "seed",
]


def cpu_name() -> str:
    """The CPU's model name: /proc/cpuinfo's on Linux, else what `platform` knows (often only the architecture)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def describe_hardware(training_args=None) -> str:
    """What the run trained on, for the card: the GPU or CPU model, how many of them or how many cores and threads,
    and the dtype."""
    import torch

    dtype = (
        "bf16 autocast"
        if getattr(training_args, "bf16", False)
        else ("fp16 autocast" if getattr(training_args, "fp16", False) else "fp32")
    )
    processes = getattr(training_args, "world_size", 1)
    device = getattr(training_args, "device", None)
    if device is not None and device.type == "cuda":
        return f"{processes} x {torch.cuda.get_device_name(device)}, {dtype}"
    where = f"{cpu_name()}, {os.cpu_count()} cores, {torch.get_num_threads()} threads per process"
    return f"{where}, {processes} processes, {dtype}" if processes > 1 else f"{where}, {dtype}"


# a flag whose value is a secret: --token, --hub_token, --api_key, --password (not --max_tokens)
SECRET_FLAG = re.compile(r"--?(?:[\w-]*[_-])?(?:token|key|password|secret)", re.IGNORECASE)


def shareable_words(words: list[str], secrets=None) -> list[str]:
    """A command line as it may be written into a file that is shared: the value of every flag that names a secret
    (`--hub_token X`, `--api_key=X`) replaced by `<HUB_TOKEN>` (transformers' redaction) and every absolute path
    shortened (`shareable_path`), so no credential and no absolute path of this computer is written. `secrets` ({name:
    value}, the parsed values of the secret options) hides those values however their flag was spelled."""
    secrets = {name: value for name, value in (secrets or {}).items() if isinstance(value, str) and value}
    out, hidden = [], None  # hidden: the name of the secret whose value is the next word
    for word in words:
        flag, equals, value = word.partition("=")
        path = value if equals and flag.startswith("-") else word
        known = next((name for name, secret in secrets.items() if secret in word), None)
        if hidden:
            word, hidden = f"<{hidden}>", None
        elif known:
            word = f"{flag}=<{known}>" if equals and secrets[known] not in flag else f"<{known}>"
        elif SECRET_FLAG.fullmatch(flag):
            name = flag.lstrip("-").upper().replace("-", "_")
            word, hidden = (f"{flag}=<{name}>", None) if equals else (word, name)
        elif os.path.isabs(path):
            word = word[: len(word) - len(path)] + shareable_path(path)
        out.append(word)
    return out


def shareable_path(path: str) -> str:
    """An absolute path as a shared file may show it: relative to the current directory when inside it, else its last
    two parts after `...` (a placeholder to fill in, revealing nothing of this computer's folders)."""
    relative = os.path.relpath(path)
    if not relative.startswith(os.pardir):
        return relative
    return os.path.join("...", *os.path.normpath(path).split(os.sep)[-2:])


def invoked_command(argv=None, secrets=None) -> str:
    """The command line that started this run, as a user can run it again: `vanilla-transformer train-translation
    ...` for the console command, `python scripts/run_translation.py ...` for a script, with torchrun in front when
    several processes ran it; each argument quoted for the shell where needed, and no secret or absolute path in it
    (`shareable_words`; `secrets`: {name: value} of the secret options parsed)."""
    program, args = sys.argv[0], list(sys.argv[1:] if argv is None else argv)
    if program.startswith("vanilla-transformer "):  # set by the console command (cli.dispatch)
        words = program.split()
    elif os.path.dirname(os.path.abspath(program)) == os.path.dirname(os.path.abspath(__file__)):  # python -m
        words = ["python", "-m", f"{__package__}.{os.path.splitext(os.path.basename(program))[0]}"]
    else:
        words = ["python", program]
    processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if processes > 1:
        nodes = int(os.environ.get("WORLD_SIZE", processes)) // processes
        launcher = ["torchrun", "--nproc_per_node", str(processes)] + (["--nnodes", str(nodes)] if nodes > 1 else [])
        words = launcher + (words[1:] if words[0] == "python" else [shutil.which(words[0]) or words[0]] + words[1:])
    return shlex.join(shareable_words(words + args, secrets))


# The terms the training data puts on the weights, by the data's name (dataset_label: a Hub id or the folder of the
# training files). Anything else: the card says to check the data's own terms.
DEMO_TERMS = ("apache-2.0", None, "synthetic strings generated by vanilla-transformer (Apache-2.0)")
DATA_TERMS = {
    "multi30k": (
        "other",
        "https://github.com/multi30k/dataset",
        "Multi30k, partly derived from Flickr30k: for non-commercial research and educational use, under the "
        "Flickr Terms of Use",
    ),
    "conll2003": (
        "other",
        "https://www.clips.uantwerpen.be/conll2003/ner/",
        "CoNLL-2003, Reuters Corpus (RCV1) text: research use under the Reuters/NIST research agreement",
    ),
    "wmt14": (
        "other",
        "https://www.statmt.org/wmt14/translation-task.html",
        "the WMT14 English-German corpora (Europarl, Common Crawl, News Commentary): each corpus's own terms",
    ),
}


def data_terms(dataset_name: str) -> tuple[str, str | None, str]:
    """(licence id for the card's metadata, link, sentence) for weights trained on `dataset_name`."""
    if dataset_name == "demo":
        return DEMO_TERMS
    for part in dataset_name.lower().replace("/", " ").replace("+", " ").replace("-", " ").split():
        for key, terms in DATA_TERMS.items():
            if part.startswith(key):
                return terms
    return (
        "other",
        None,
        f"{dataset_name}: the weights carry that data's terms; check them before you use or share the model",
    )


def write_card_info(
    output_dir: str,
    task: str,
    dataset_name: str,
    train_samples: int | None,
    command: str,
    training_args=None,
    languages=None,
    labels=None,
    wall_seconds=None,
    label_smoothing=None,
) -> str:
    if task not in TASKS:
        raise ValueError(f"task must be one of {sorted(TASKS)}, got {task!r}.")
    hyper = {}
    if training_args is not None:
        hyper = {k: getattr(training_args, k) for k in HYPERPARAMETERS if hasattr(training_args, k)}
        hyper["world_size"] = training_args.world_size
    if label_smoothing is not None:
        hyper["label_smoothing"] = label_smoothing
    info = dict(
        task=task,
        dataset_name=dataset_name,
        train_samples=train_samples,
        command=command,
        hyperparameters={k: v for k, v in hyper.items() if isinstance(v, (int, float, str, bool))},
        languages=list(languages or []),
        labels=list(labels or []),
        wall_seconds=wall_seconds,
        hardware=describe_hardware(training_args),
    )
    os.makedirs(output_dir, exist_ok=True)
    write_text(os.path.join(output_dir, CARD_INFO), json.dumps(info, indent=2))
    return os.path.join(output_dir, CARD_INFO)


def json_or_empty(path) -> dict:
    """A JSON object file's contents, {} where there is no such file; a damaged one is an error naming it."""
    return read_json(path, mapping=True) if os.path.isfile(path) else {}


def _collect_results(model_dir: str, task: str):
    """[(split, metric, value)] from eval_results.json (validation) and predict_results.json (test)."""
    results = []
    for filename, prefix, split in (
        ("eval_results.json", "eval", "validation"),
        ("predict_results.json", "predict", "test"),
    ):
        values = json_or_empty(os.path.join(model_dir, filename))
        for metric, _ in TASKS[task]["metrics"]:
            if f"{prefix}_{metric}" in values:
                results.append((split, metric, float(values[f"{prefix}_{metric}"])))
    return results


def card_metadata(info: dict, task: str, languages: list, name: str, results: list) -> ModelCardData:
    """The card's metadata block: the task, languages, dataset and its licence, and the scores (`results`: (split,
    metric, value))."""
    spec = TASKS[task]
    eval_results = [
        EvalResult(
            task_type=spec["task_type"],
            task_name=spec["task_name"],
            dataset_type=info["dataset_name"],
            dataset_name=info["dataset_name"],
            dataset_split=split,
            metric_type=metric,
            metric_name=dict(spec["metrics"])[metric],
            metric_value=value,
        )
        for split, metric, value in results
    ]
    licence, licence_link, terms = data_terms(info["dataset_name"])
    extra = (
        dict(license_name=f"{info['dataset_name'].lower().replace('/', '-')}-terms", license_link=licence_link)
        if licence == "other" and licence_link
        else {}
    )
    return ModelCardData(
        library_name="transformers",
        pipeline_tag=spec["pipeline_tag"],
        license=licence,
        language=languages,
        tags=["vanilla-transformer", "attention-is-all-you-need", "from-scratch", task],
        datasets=[info["dataset_name"]],
        metrics=[m for m, _ in spec["metrics"]],
        model_name=name,
        eval_results=eval_results or None,
        **extra,
    )


def render_card(model_dir: str, repo_id: str | None = None, config: dict | None = None) -> ModelCard:
    """Write README.md into `model_dir` and return the card. Needs config.json (or its contents, `config`, as read
    already) and card_info.json."""
    config = config or json_or_empty(os.path.join(model_dir, "config.json"))
    info = json_or_empty(os.path.join(model_dir, CARD_INFO))
    if not config:
        raise FileNotFoundError(f"{model_dir} has no config.json: not a saved model.")
    if not info:
        raise FileNotFoundError(f"{model_dir} has no {CARD_INFO}; write it with write_card_info first.")
    task = info["task"]
    spec = TASKS[task]
    languages = info.get("languages") or ["en"]
    labels = sorted({label[2:] for label in info.get("labels", []) if label != "O"})
    fmt = dict(source=languages[0], target=languages[-1], labels=", ".join(labels) or "entities")
    name = repo_id or os.path.basename(os.path.abspath(model_dir))
    results = _collect_results(model_dir, task)
    card_data = card_metadata(info, task, languages, name, results)
    n_params = _count_parameters(model_dir)
    auto, example = spec["auto"], spec["example"]
    head = f'from transformers import AutoTokenizer, {auto}\n\ntokenizer = AutoTokenizer.from_pretrained("{name}")\n'
    wall = info.get("wall_seconds")
    card = ModelCard.from_template(
        card_data,
        template_path=TEMPLATE,
        model_name=name,
        task_description=spec["description"].format(**fmt),
        intended_uses=spec["uses"].format(**fmt),
        config_table=[(k, config[k]) for k in CONFIG_FIELDS if k in config],
        num_parameters=n_params,
        data_description=f"{info['dataset_name']}: {info.get('train_samples') or 'unknown number of'} training examples"
        + {
            "translation": f"; languages {', '.join(languages)}",
            "token-classification": f"; labels {fmt['labels']}",
        }.get(task, "")
        + ".",
        hyperparameters=sorted(info.get("hyperparameters", {}).items()),
        steps=json_or_empty(os.path.join(model_dir, "trainer_state.json")).get("global_step", "an unknown number of"),
        wall_time=f"{wall / 60:.1f} minutes" if wall else "unknown time",
        hardware=info.get("hardware", "unknown"),
        results=[(s, m, f"{v:.4g}") for s, m, v in results],
        command=info.get("command", ""),
        data_terms=data_terms(info["dataset_name"])[2],
        usage_remote=head + f'model = {auto}.from_pretrained("{name}", trust_remote_code=True)\n' + example,
        usage_installed="import vanilla_transformer  # registers the Auto classes\n"
        + head
        + f'model = {auto}.from_pretrained("{name}")\n'
        + example,
    )
    card.save(os.path.join(model_dir, "README.md"))
    return card


def _count_parameters(model_dir: str) -> str:
    """Parameters stored in model.safetensors (tied weights are stored once)."""
    path = os.path.join(model_dir, "model.safetensors")
    if not os.path.isfile(path):
        return "unknown"
    from safetensors import safe_open

    total = 0
    with safe_open(path, "pt") as f:
        for key in f.keys():
            count = 1
            for size in f.get_slice(key).get_shape():
                count *= size
            total += count
    return f"{total:,}"


def read_card(model_dir) -> ModelCard | None:
    """The model card (README.md) of a saved directory or Hub id, or None where there is none; a card whose metadata
    block does not parse is a ValueError naming the file."""
    import yaml
    from huggingface_hub.errors import EntryNotFoundError

    local = os.path.isdir(os.fspath(model_dir))
    path = os.path.join(os.fspath(model_dir), "README.md") if local else os.fspath(model_dir)
    if local and not os.path.isfile(path):
        return None
    try:
        return ModelCard.load(path)
    except EntryNotFoundError:  # a Hub repo without a card
        return None
    except OSError:
        if local:
            raise
        return None  # a Hub id out of reach (offline): no card
    except (yaml.YAMLError, UnicodeDecodeError, ValueError) as error:  # metadata that is not a YAML mapping
        where = path if local else f"the model card of {path}"
        raise ValueError(
            f"{where} is damaged: its metadata block is not a YAML mapping "
            f"({' '.join(str(error).split())}); fix or delete it."
        ) from None


def copy_card(model_dir, output_dir) -> None:
    """The model card of `model_dir` into `output_dir` (an export): its languages, labels, license and scores go with
    the exported model, so `serve EXPORT` knows the language pair."""
    card = read_card(model_dir)
    if card is not None:
        card.save(os.path.join(output_dir, "README.md"))


def card_languages(model_dir) -> tuple[str, str] | None:
    """(source, target) from the model card's `language:` list (written by the training command), if it has one."""
    card = read_card(model_dir)
    languages = card.data.language if card is not None else None
    if isinstance(languages, list) and len(languages) >= 2:
        return str(languages[0]), str(languages[-1])
    return None
