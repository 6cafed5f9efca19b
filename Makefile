# Two commands do all the setup on a fresh machine:
#   make demo   – install into .venv (first time only) and segment the bundled sample
#   make test   – install into .venv (first time only) and run the test suite
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0

.PHONY: demo test install

$(BIN)/headseg: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# The CPU build of torch first: a plain `torch` requirement would pull a multi-GB CUDA build.
	$(BIN)/pip install -q "$(TORCH_SPEC)"
	$(BIN)/pip install -q -e ".[test,export,tui,ray]"
	touch $(BIN)/headseg

install: $(BIN)/headseg

demo: install
	$(BIN)/headseg segment examples/sample.txt

test: install
	$(BIN)/python -m pytest -q -p no:cacheprovider
