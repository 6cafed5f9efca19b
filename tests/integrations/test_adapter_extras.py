"""Issue 35 item 20: an adapter without its extra says which extra to install; the frameworks' own
overlap keywords point at ``overlap=N``."""

from __future__ import annotations

import subprocess
import sys

import pytest

ADAPTERS = [("langchain", "langchain_core", "langchain", "HeadsegTextSplitter"),
            ("langchain", "langchain_text_splitters", "langchain", "HeadsegTextSplitter"),
            ("llamaindex", "llama_index", "llamaindex", "HeadsegNodeParser"),
            ("haystack", "haystack", "haystack", "HeadsegDocumentSplitter")]


@pytest.mark.parametrize("module, missing, extra, name", ADAPTERS)
def test_issue35_item20_import_without_the_extra_names_it(module, missing, extra, name):
    # a fresh interpreter where the framework's top-level package cannot be imported, as without the extra
    code = (f"import sys; sys.modules[{missing!r}] = None\n"
            f"try:\n    from headseg.integrations.{module} import {name}\n"
            f"except ModuleNotFoundError as exc:\n    print(exc.name); print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2, out.stdout  # the module's name, then the message: one line
    assert lines[0] == missing
    assert f"headseg.integrations.{module} needs the '{extra}' extra" in lines[1]
    assert "pip install" in lines[1] and f"[{extra}]" in lines[1] and f"module '{missing}' is missing" in lines[1]


def _langchain(**kw):
    pytest.importorskip("langchain_text_splitters")
    from headseg.integrations.langchain import HeadsegTextSplitter

    return HeadsegTextSplitter(**kw)


def _llamaindex(**kw):
    pytest.importorskip("llama_index.core")
    from headseg.integrations.llamaindex import HeadsegNodeParser

    return HeadsegNodeParser(**kw)


def _haystack(**kw):
    pytest.importorskip("haystack")
    from headseg.integrations.haystack import HeadsegDocumentSplitter

    return HeadsegDocumentSplitter(**kw)


@pytest.mark.parametrize("make, keyword", [(_langchain, "chunk_overlap"), (_llamaindex, "chunk_overlap"),
                                           (_haystack, "split_overlap"), (_haystack, "chunk_overlap")])
def test_issue35_item20_framework_overlap_points_at_overlap_n(make, keyword):
    with pytest.raises(ValueError) as info:
        make(**{keyword: 100})
    message = str(info.value)
    assert f"{keyword}=100" in message and "overlap=N" in message and "\n" not in message, message


@pytest.mark.parametrize("make, keyword", [(_langchain, "chunk_overlap"), (_llamaindex, "chunk_overlap"),
                                           (_haystack, "split_overlap")])
def test_issue35_item20_framework_overlap_zero_is_no_overlap(make, keyword):
    adapter = make(**{keyword: 0})
    runner = getattr(adapter, "runner", None) or adapter._runner  # LlamaIndex's is a private attribute
    assert not runner.options.overlap  # None: the default, no overlap
