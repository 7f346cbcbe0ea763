# `make demo` and `make test` create (or refresh) the virtual environment in .venv and install what they need.
# GPU users: make test TORCH_SPEC="torch==2.13.0" TORCH_INDEX="--index-url https://download.pytorch.org/whl/cu128"
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
PYTEST_ARGS ?=
PY := $(VENV)/bin/python

.PHONY: install demo test bench clean

$(VENV)/.installed: setup.cfg pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(TORCH_INDEX) "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(VENV)/bin/hf-longdoc demo --output-dir out/demo-contextualizer

test: install
	$(PY) -m pytest -q $(PYTEST_ARGS)

bench: install
	$(VENV)/bin/hf-longdoc bench --models contextualizer,bert --lengths 512,1024,2048,4096,8192

clean:
	rm -rf $(VENV) out build src/*.egg-info
