"""The adapters' async entry points: the frameworks' own async calls give what the sync calls give."""

from __future__ import annotations

import asyncio

import pytest

from adapter_support import OTHER, REPEATED, assert_tiles

TEXTS = [REPEATED, OTHER * 3, REPEATED + OTHER]


def test_langchain_atransform_documents(tiny_segmenter):
    pytest.importorskip("langchain_text_splitters")
    from langchain_core.documents import Document

    from headseg.integrations.langchain import HeadsegTextSplitter

    splitter = HeadsegTextSplitter(tiny_segmenter, max_chars=300)
    docs = [Document(page_content=t, metadata={"n": i}) for i, t in enumerate(TEXTS)]
    want = splitter.split_documents(docs)
    got = asyncio.run(splitter.atransform_documents(docs))
    assert [(d.page_content, d.metadata) for d in got] == [(d.page_content, d.metadata) for d in want]
    for i, text in enumerate(TEXTS):
        mine = [d for d in got if d.metadata["n"] == i]
        assert_tiles(text, [(d.metadata["start_index"], d.metadata["end_index"]) for d in mine],
                     [d.page_content for d in mine])


def test_llamaindex_aget_nodes_from_documents(tiny_segmenter):
    pytest.importorskip("llama_index.core")
    from llama_index.core import Document

    from headseg.integrations.llamaindex import HeadsegNodeParser

    parser = HeadsegNodeParser(tiny_segmenter, max_chars=300)
    docs = [Document(text=t) for t in TEXTS]
    want = parser.get_nodes_from_documents(docs)
    got = asyncio.run(parser.aget_nodes_from_documents(docs))
    key = [(n.text, n.start_char_idx, n.end_char_idx, n.ref_doc_id) for n in want]
    assert [(n.text, n.start_char_idx, n.end_char_idx, n.ref_doc_id) for n in got] == key
    for d in docs:
        mine = [n for n in got if n.ref_doc_id == d.doc_id]
        assert_tiles(d.text, [(n.start_char_idx, n.end_char_idx) for n in mine], [n.text for n in mine])


def test_haystack_run_async(tiny_segmenter):
    pytest.importorskip("haystack")
    from haystack import Document

    from headseg.integrations.haystack import HeadsegDocumentSplitter

    splitter = HeadsegDocumentSplitter(tiny_segmenter, max_chars=300)
    docs = [Document(content=t) for t in TEXTS]
    want = splitter.run(docs)["documents"]
    got = asyncio.run(splitter.run_async(docs))["documents"]
    assert [(d.content, d.meta) for d in got] == [(d.content, d.meta) for d in want]


def test_concurrent_async_calls_equal_the_sync_ones(tiny_segmenter):
    # many coroutines at once share one batcher; each still gets its own document's segments
    pytest.importorskip("langchain_text_splitters")
    from langchain_core.documents import Document

    from headseg.integrations.langchain import HeadsegTextSplitter

    splitter = HeadsegTextSplitter(tiny_segmenter)
    docs = [Document(page_content=t) for t in TEXTS * 4]
    want = [[c.page_content for c in splitter.split_documents([d])] for d in docs]

    async def all_at_once():
        return await asyncio.gather(*(splitter.atransform_documents([d]) for d in docs))

    got = [[c.page_content for c in chunks] for chunks in asyncio.run(all_at_once())]
    assert got == want
