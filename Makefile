# Every target sets up its own virtual environment (.venv) first, but test-gpu (.venv as it is), test-latest (its own
# .venv-latest) and clean (deletes .venv, .venv-latest and outputs/, every model trained there); CI (.ci/run) runs
# `make test` with the python3 on the PATH (README asks for 3.11, the oldest pyproject.toml admits), then
# `make test-latest PYTHON=python3.13` (Python 3.13, the newest releases of the dependencies).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The tested torch; pyproject.toml keeps a range for users. Override: make TORCH_PIN=torch==X.Y.Z ...
TORCH_PIN ?= torch==2.13.0
# Where torch comes from: empty (default) = your package index, which on Linux with the public PyPI is the CUDA build
# (several GB); make setup TORCH_INDEX=https://download.pytorch.org/whl/cpu takes PyTorch's CPU build instead.
TORCH_INDEX ?=

.PHONY: setup demo test lint format docs docs-serve test-latest test-gpu test-slow benchmark benchmark-peers recipe-multi30k recipe-conll recipe-multi30k-best ablations \
	recipe-conll-best clean FORCE
DATA ?= ../shared/data

EXTRAS := test,plot,tensorboard,ctranslate2,demo,wmt,serve,onnx,docs,pdf,notebooks
LATEST_VENV ?= .venv-latest

# The tested versions of every dependency (constraints.txt): a reproducible set-up. torch is installed where the venv
# has none, and replaced only when TORCH_PIN or TORCH_INDEX is given and differs from the last choice given
# ($(VENV)/.torch-choice): a torch installed by hand (a CUDA build, docs/gpu.md) is kept by every other target.
TORCH_GIVEN := $(filter-out file undefined,$(origin TORCH_PIN) $(origin TORCH_INDEX))

$(VENV)/.torch-choice: FORCE
	@mkdir -p $(VENV)
	@test -n "$(TORCH_GIVEN)" || test -e $@ || : > $@
	@if [ -n "$(TORCH_GIVEN)" ] && [ "$$(cat $@ 2>/dev/null)" != "$(TORCH_PIN) $(TORCH_INDEX)" ]; then \
		echo "$(TORCH_PIN) $(TORCH_INDEX)" > $@; fi

$(VENV)/.installed: pyproject.toml constraints.txt $(VENV)/.torch-choice
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@if ! $(PY) -c "import torch" 2>/dev/null; then \
		$(PY) -m pip install -q $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH_PIN)"; \
	elif [ -n "$(filter $(VENV)/.torch-choice,$?)" ] && [ -s $(VENV)/.torch-choice ]; then \
		$(PY) -m pip install -q --force-reinstall --no-deps $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH_PIN)"; \
	fi
	$(PY) -m pip install -q -c constraints.txt -e ".[$(EXTRAS)]"
	touch $@

setup: $(VENV)/.installed

FORCE:

# TCMalloc where it is installed, as in the recipes (recipes/tcmalloc.sh)
demo: setup
	. recipes/tcmalloc.sh && $(VENV)/bin/vanilla-transformer train-translation --output_dir outputs/demo --overwrite_output_dir true

# Two pytest workers (one thread each, tests/conftest.py): on two cores the suite's many subprocess and server waits
# overlap.
test: setup
	$(PY) -m pytest -q -n 2 tests

# The lint and format configuration of pyproject.toml ([tool.ruff]); the suite checks both too (tests/test_layout.py).
# `make format` rewrites the tree in that format.
lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

format: setup
	$(PY) -m ruff format .

# The documentation site (mkdocs.yml): built strictly into site/ (a broken link or reference is an error), or
# previewed at http://127.0.0.1:8000 with `make docs-serve`.
docs: setup
	$(PY) -m mkdocs build --strict

docs-serve: setup
	$(PY) -m mkdocs serve

# The same suite against the newest releases pyproject.toml admits, torch included (the newest your index has, from
# TORCH_INDEX; upgraded at every run), in a second venv.
test-latest:
	test -x $(LATEST_VENV)/bin/python || $(PYTHON) -m venv $(LATEST_VENV)
	$(LATEST_VENV)/bin/python -m pip install -q --upgrade pip
	$(LATEST_VENV)/bin/python -m pip install -q --upgrade $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) torch
	$(LATEST_VENV)/bin/python -m pip install -q --upgrade --upgrade-strategy eager torch -e ".[$(EXTRAS)]"
	$(LATEST_VENV)/bin/python -m pip list 2>/dev/null | grep -iE "^(torch|transformers|accelerate|datasets|tokenizers) "
	$(LATEST_VENV)/bin/python --version
	$(LATEST_VENV)/bin/python -m pytest -q -n 2 tests

# The CUDA tests (tests marked cuda) in $(VENV) as it is: install a CUDA build of torch and the package there first
# (docs/gpu.md); this target never installs anything, so it cannot replace that build.
test-gpu:
	@$(PY) -c "import sys, torch; sys.exit(None if torch.version.cuda else 'error: $(VENV) has a CPU build of torch ' \
	  + torch.__version__ + '; install a CUDA build first (docs/gpu.md)')"
	$(PY) -m pytest -q -m cuda tests

test-slow: setup
	VT_SLOW=1 $(PY) -m pytest -q tests -m slow

# The quality recipes (docs/results.md): real data from $(DATA) (override: make recipe-conll DATA=path).
recipe-multi30k: setup
	PY=$(PY) recipes/multi30k.sh $(DATA) outputs/multi30k

# The paper's Table 3 on Multi30k (docs/results.md): the recipe's model with one change per row, a fixed number of
# steps each, scored on the tuning split; rows train side by side, one core each (JOBS, STEPS, WARMUP: recipes/ablations.sh).
ablations: setup
	PY=$(PY) recipes/ablations.sh $(DATA) outputs/ablations

recipe-conll: setup
	PY=$(PY) recipes/conll.sh $(DATA) outputs/conll

# The best settings (docs/results.md): Multi30k, the recipe's model trained twice (seeds 42 and 7, side by side, one
# core each) and decoded as one ensemble; CoNLL with four members instead of two (its scores not measured).
recipe-multi30k-best: setup
	SEEDS="42 7" PY=$(PY) recipes/multi30k.sh $(DATA) outputs/multi30k-best

recipe-conll-best: setup
	SEEDS="42 7 1 2" PY=$(PY) recipes/conll.sh $(DATA) outputs/conll-best

benchmark: setup
	$(PY) scripts/benchmark.py --output outputs/benchmark.json

# Time to quality on Multi30k: our recipe, then OpenNMT-py (its own virtual environment) at the same shape, each
# trained for at most MINUTES (default 60; `make benchmark-peers MINUTES=30` passes it on) with a checkpoint every
# EVERY steps, set here: 465 for ours, 700 for OpenNMT-py (about every 2 minutes each, as in the published tables; an
# EVERY given to make is overridden: run benchmarks/peers/*.sh directly for others), every checkpoint scored
# (docs/benchmarks.md)
benchmark-peers: setup
	EVERY=465 PY=$(PY) benchmarks/peers/ours.sh $(DATA) outputs/peers/ours
	EVERY=700 PY=$(PY) benchmarks/peers/opennmt.sh $(DATA)/multi30k outputs/peers/opennmt

clean:
	rm -rf $(VENV) $(LATEST_VENV) outputs
