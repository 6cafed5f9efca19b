"""Every adapter takes every SegmentOptions field, including ones it never names, and refuses unknown names."""

from __future__ import annotations

import pytest

from headseg.segmenter.options import SegmentOptions

from adapter_support import ECHO, ECHO_UNITS


def _whole(text: str) -> list[tuple[int, int]]:
    """A sentence splitter that makes the whole text one unit."""
    return [(0, len(text))]


def _langchain(segmenter, **options):
    pytest.importorskip("langchain_text_splitters")
    from headseg.integrations.langchain import HeadsegTextSplitter

    splitter = HeadsegTextSplitter(segmenter, **options)
    return splitter, [(d.metadata["start_index"], d.metadata["end_index"]) for d in splitter.create_documents([ECHO])]


def _llamaindex(segmenter, **options):
    pytest.importorskip("llama_index.core")
    from llama_index.core import Document

    from headseg.integrations.llamaindex import HeadsegNodeParser

    parser = HeadsegNodeParser(segmenter, **options)
    return parser, [(n.start_char_idx, n.end_char_idx) for n in parser.get_nodes_from_documents([Document(text=ECHO)])]


def _haystack(segmenter, **options):
    pytest.importorskip("haystack")
    from haystack import Document

    from headseg.integrations.haystack import HeadsegDocumentSplitter

    splitter = HeadsegDocumentSplitter(segmenter, **options)
    chunks = splitter.run(documents=[Document(content=ECHO)])["documents"]
    return splitter, [(c.meta["split_idx_start"], c.meta["split_idx_start"] + len(c.content)) for c in chunks]


ADAPTERS = [_langchain, _llamaindex, _haystack]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_an_option_the_adapter_never_names_reaches_the_segmenter(adapter, tiny_segmenter):
    _, units = adapter(tiny_segmenter, level="unit")
    assert units == ECHO_UNITS
    _, whole = adapter(tiny_segmenter, level="unit", sentence_splitter=_whole)
    assert whole == [(0, len(ECHO))]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_the_adapter_holds_one_segment_options(adapter, tiny_segmenter):
    made, _ = adapter(tiny_segmenter, max_chars=40, penalty=0.5)
    runner = made._runner if hasattr(made, "_runner") else made.runner
    assert runner.options == SegmentOptions(max_chars=40, penalty=0.5)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_an_unknown_name_is_a_type_error(adapter, tiny_segmenter):
    with pytest.raises(TypeError, match="max_char"):
        adapter(tiny_segmenter, max_char=40)
