# Two commands do all the setup on a fresh machine:
#   make demo   – install into .venv (first time only) and segment the bundled sample
#   make test   – install (first time only) and run the test suite: the whole suite in .venv, then the
#                 analysis and segmenter tests on transformers 5 without the export extra in .venv-tf5
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
VENV_TF5 ?= .venv-tf5
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= test,export,tui,ray,langchain,llamaindex,haystack

.PHONY: demo test test-main test-tf5 install install-tf5

$(BIN)/headseg: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# The CPU build of torch first: a plain `torch` requirement would pull a multi-GB CUDA build.
	$(BIN)/pip install -q "$(TORCH_SPEC)"
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	touch $(BIN)/headseg

$(VENV_TF5)/bin/headseg: pyproject.toml
	$(PYTHON) -m venv $(VENV_TF5)
	$(VENV_TF5)/bin/pip install -q --upgrade pip
	$(VENV_TF5)/bin/pip install -q "$(TORCH_SPEC)"
	# No export extra: optimum-onnx pins transformers<4.58, and the segmenter must not need it.
	$(VENV_TF5)/bin/pip install -q -e ".[test,tui]" "transformers>=5,<6"
	touch $(VENV_TF5)/bin/headseg

install: $(BIN)/headseg

install-tf5: $(VENV_TF5)/bin/headseg

demo: install
	$(BIN)/headseg segment examples/sample.txt

test-main: install
	$(BIN)/python -m pytest -q -p no:cacheprovider

test-tf5: install-tf5
	$(VENV_TF5)/bin/python -m pytest -q -p no:cacheprovider tests/analysis tests/segmenter

test: test-main test-tf5
