"""The heading path in the three adapters' metadata, and ``structure`` taken as an option by each."""

from __future__ import annotations

import pytest

MD = ("# Install\n\nRun the installer. It takes a minute.\n\n## GPU\n\nPick the CUDA build. It is larger.\n\n"
      "```bash\npip install headseg\n```\n\n# Usage\n\nCall segment on a text. It returns segments.\n")


def _expected(seg, **options):
    """The heading path of each segment, as the adapters put it (no key where a chunk has none)."""
    return [list(s.headings) or None for s in seg.segment(MD, **options)]


def test_langchain_metadata_headings(tiny_segmenter):
    pytest.importorskip("langchain_text_splitters")
    from headseg.integrations.langchain import HeadsegTextSplitter

    docs = HeadsegTextSplitter(tiny_segmenter, max_tokens=24, structure="markdown").create_documents([MD])
    assert [d.metadata.get("headings") for d in docs] == _expected(tiny_segmenter, max_tokens=24, structure="markdown")
    assert docs[0].metadata["headings"] == ["Install"]
    assert "".join(d.page_content for d in docs) == MD
    plain = HeadsegTextSplitter(tiny_segmenter, max_tokens=24, structure="plain").create_documents([MD])
    assert all("headings" not in d.metadata for d in plain)


def test_llamaindex_node_metadata_headings(tiny_segmenter):
    pytest.importorskip("llama_index.core")
    from llama_index.core import Document

    from headseg.integrations.llamaindex import HeadsegNodeParser

    nodes = HeadsegNodeParser(segmenter=tiny_segmenter, max_tokens=24, structure="markdown") \
        .get_nodes_from_documents([Document(text=MD)])
    assert [n.metadata.get("headings") for n in nodes] == _expected(tiny_segmenter, max_tokens=24,
                                                                 structure="markdown")
    assert [MD[n.start_char_idx:n.end_char_idx] for n in nodes] == [n.text for n in nodes]


def test_haystack_meta_headings(tiny_segmenter):
    pytest.importorskip("haystack")
    from haystack import Document

    from headseg.integrations.haystack import HeadsegDocumentSplitter

    chunks = HeadsegDocumentSplitter(tiny_segmenter, max_tokens=24, structure="markdown") \
        .run(documents=[Document(content=MD)])["documents"]
    assert [c.meta.get("headings") for c in chunks] == _expected(tiny_segmenter, max_tokens=24, structure="markdown")
    assert any(c.meta.get("headings") == ["Install", "GPU"] for c in chunks)
