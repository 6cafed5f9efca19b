"""The ``overlap`` option through the adapters: each chunk's offsets are the overlapped chunk's, exactly."""

from __future__ import annotations

import pytest

from headseg.api import Segmenter

TEXT = "\n\n".join(" ".join([t] * 3) for t in [
    "The committee met on Monday. It approved the budget after a long debate.",
    "Rain fell all night. The river rose quickly over its banks.",
    "The orchestra tuned its instruments. The violins began a slow melody.",
] * 3)


@pytest.fixture(scope="module")
def seg(tiny_bert):
    return Segmenter(model=tiny_bert, backend="torch", window_tokens=64)


def test_langchain_chunks_carry_overlapped_offsets(seg):
    pytest.importorskip("langchain_text_splitters")
    from langchain_core.documents import Document

    from headseg.integrations.langchain import HeadsegTextSplitter

    opts = dict(max_tokens=64, target_tokens=24)
    want = seg.segment(TEXT, overlap=1, **opts).meta["chunks"]
    docs = HeadsegTextSplitter(seg, overlap=1, **opts).split_documents([Document(page_content=TEXT)])
    assert [[d.metadata["start_index"], d.metadata["end_index"]] for d in docs] == want
    assert all(TEXT[d.metadata["start_index"]:d.metadata["end_index"]] == d.page_content for d in docs)
    assert any(a < b_prev for (a, _), (_, b_prev) in zip(want[1:], want))  # some chunks do overlap


def test_haystack_chunks_carry_overlapped_offsets(seg):
    pytest.importorskip("haystack")
    from haystack import Document

    from headseg.integrations.haystack import HeadsegDocumentSplitter

    opts = dict(max_tokens=64, target_tokens=24)
    want = seg.segment(TEXT, overlap=1, **opts).meta["chunks"]
    out = HeadsegDocumentSplitter(seg, overlap=1, **opts).run([Document(content=TEXT)])["documents"]
    assert [d.meta["split_idx_start"] for d in out] == [a for a, _ in want]
    assert [d.content for d in out] == [TEXT[a:b] for a, b in want]


OPTS = dict(max_tokens=64, target_tokens=24)


def _expected(seg):
    """Per chunk: (start, end, text, overlap_chars, token_count), recomputed from the segments."""
    r = seg.segment(TEXT, overlap=1, **OPTS)
    out = [(c.start, c.end, TEXT[c.start:c.end], s.start - c.start, c.token_count) for c, s in zip(r.chunks, r)]
    assert any(k > 0 for *_, k, _ in out) and out[0][3] == 0  # some chunks do repeat text (issue 49)
    return out


def test_langchain_chunks_say_what_they_repeat(seg):
    pytest.importorskip("langchain_text_splitters")
    from langchain_core.documents import Document

    from headseg.integrations.langchain import HeadsegTextSplitter

    docs = HeadsegTextSplitter(seg, overlap=1, **OPTS).split_documents([Document(page_content=TEXT)])
    assert [(d.metadata["start_index"], d.metadata["end_index"], d.page_content, d.metadata["overlap_chars"])
            for d in docs] == [e[:4] for e in _expected(seg)]
    plain = HeadsegTextSplitter(seg, **OPTS).split_documents([Document(page_content=TEXT)])
    assert not any("overlap_chars" in d.metadata for d in plain)


def test_haystack_chunks_say_what_they_repeat(seg):
    pytest.importorskip("haystack")
    from haystack import Document

    from headseg.integrations.haystack import HeadsegDocumentSplitter

    out = HeadsegDocumentSplitter(seg, overlap=1, **OPTS).run([Document(content=TEXT)])["documents"]
    assert [(d.meta["split_idx_start"], d.content, d.meta["overlap_chars"]) for d in out] == \
        [(a, t, k) for a, _, t, k, _ in _expected(seg)]


def test_llamaindex_chunks_say_what_they_repeat(seg):
    pytest.importorskip("llama_index.core")
    from llama_index.core import Document

    from headseg.integrations.llamaindex import HeadsegNodeParser

    nodes = HeadsegNodeParser(segmenter=seg, overlap=1, **OPTS).get_nodes_from_documents([Document(text=TEXT)])
    assert [(n.start_char_idx, n.end_char_idx, n.get_content(), n.metadata["overlap_chars"]) for n in nodes] == \
        [e[:4] for e in _expected(seg)]
    # a number for the application, not text to embed
    assert all("overlap_chars" in n.excluded_embed_metadata_keys for n in nodes)
