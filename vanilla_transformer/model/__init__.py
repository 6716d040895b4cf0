"""The model itself: the files `save_pretrained` copies beside the weights, so that `trust_remote_code=True` runs them
where this package is not installed. They import only each other (relatively), transformers and torch."""
