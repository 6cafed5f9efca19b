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
