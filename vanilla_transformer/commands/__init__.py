"""The console commands, one module each (its parser and its `main(argv)`): what `vanilla-transformer COMMAND` runs,
with the help line `vanilla-transformer --help` shows. The entry point (`cli.py`) reads this table alone, so listing
the commands imports none of them."""

COMMANDS = {  # command -> (module in this package, help)
    "train-translation": (
        "train_translation",
        "Train and evaluate a translation model (Seq2SeqTrainer; flags as in "
        "transformers' run_translation.py). No data flags: the demo task.",
    ),
    "train-ner": (
        "train_ner",
        "Train and evaluate a named-entity tagger (Trainer; flags as in transformers' run_ner.py).",
    ),
    "pretrain-encoder": (
        "pretrain_encoder",
        "Pretrain an encoder on unlabelled text (masked language modelling) for train-ner --model_name_or_path.",
    ),
    "average-checkpoints": ("average_checkpoints", "Average the weights of a run's last N checkpoints."),
    "split-documents": ("split_documents", "Hold out a tuning split of a CoNLL training file, by document."),
    "split-pairs": ("split_pairs", "Hold out a tuning split of parallel text files, by line pair."),
    "translate": ("translate", "Translate a text file, one sentence per line."),
    "tag": ("tag", "Tag named entities in a text or CoNLL file."),
    "tune-decoding": ("tune_decoding", "Choose the beam size and length penalty on a tuning split (and save them)."),
    "score": ("score", "sacreBLEU and the paper's tokenized, compound-split BLEU of a translation file."),
    "ner-report": ("ner_report", "Tagging scores on entities seen in training vs unseen, per type."),
    "export-ctranslate2": ("export_ctranslate2", "Export a saved translation model to CTranslate2."),
    "export-onnx": ("export_onnx", "Export a saved tagger to ONNX (for ONNX Runtime)."),
    "serve": (
        "serve",
        "Serve translation models (LibreTranslate's API, /v1/translate) and/or a tagger (/v1/ner) over "
        "HTTP, with dynamic batching.",
    ),
    "demo": ("demo", "The demo page in the browser: translation with its attention, entity tagging (Gradio)."),
    "plot": ("plot", "PNG pictures: training curves, attention heatmaps, the position encoding."),
    "push": ("push", "Push a saved model directory (or a demo Space) to the Hugging Face Hub."),
}
