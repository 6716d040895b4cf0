# Every target sets up its own virtual environment (.venv) first; `make test` is what CI runs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU wheel of torch 2.13.0 lies on our machines; pyproject.toml keeps a range for users.
TORCH_PIN ?= torch==2.13.0

.PHONY: setup demo test test-slow benchmark recipe-multi30k recipe-conll clean
DATA ?= ../shared/data

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_PIN)" -e ".[test,plot,tensorboard]"
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(PY) scripts/run_translation.py --output_dir outputs/demo

test: setup
	$(PY) -m pytest -q tests

test-slow: setup
	VT_SLOW=1 $(PY) -m pytest -q tests -m slow

# The quality recipes (README "Results"): real data from $(DATA), about an hour of training each on a 2-core CPU.
recipe-multi30k: setup
	PY=$(PY) recipes/multi30k.sh $(DATA) outputs/multi30k

recipe-conll: setup
	PY=$(PY) recipes/conll.sh $(DATA) outputs/conll

benchmark: setup
	$(PY) scripts/benchmark.py --output outputs/benchmark.json

clean:
	rm -rf $(VENV) outputs
