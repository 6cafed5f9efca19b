"""Each boundary's ``confidence`` (issue 48) through the three adapters: every chunk after the first carries
metadata ``confidence`` equal to the segmentation's ``Segment.confidence``, the first none; LlamaIndex keeps
it out of the embedded and LLM text; a segment tree's nodes keep their confidences."""

from __future__ import annotations

import re

import pytest

from headseg.analysis.segments import Node, Segmentation
from headseg.api import Segmenter
from sample_texts import TOPICS_TEXT, UNRELATED_TEXT

TEXT = UNRELATED_TEXT  # three clearly unrelated paragraphs (tests/sample_texts.py)


@pytest.fixture(scope="module")
def seg():
    """The embedded model (the tiny random BERT finds no boundary worth a confidence)."""
    return Segmenter(quiet=True)


@pytest.fixture(scope="module")
def want(seg):
    """(start, confidence) of each segment of TEXT: a confidence on every boundary, none at the start."""
    result = seg.segment(TEXT)
    out = [(s.start, s.confidence) for s in result]
    assert len(out) >= 2 and out[0][1] is None and all(0.0 <= c <= 1.0 for _, c in out[1:])
    return out


def test_langchain_chunks_carry_the_confidence(seg, want):
    pytest.importorskip("langchain_text_splitters")
    from langchain_core.documents import Document

    from headseg.integrations.langchain import HeadsegTextSplitter

    docs = HeadsegTextSplitter(seg, add_start_index=True).split_documents([Document(page_content=TEXT)])
    assert [(d.metadata["start_index"], d.metadata.get("confidence")) for d in docs] == want
    assert "confidence" not in docs[0].metadata


def test_haystack_chunks_carry_the_confidence(seg, want):
    pytest.importorskip("haystack")
    from haystack import Document

    from headseg.integrations.haystack import HeadsegDocumentSplitter

    out = HeadsegDocumentSplitter(seg).run([Document(content=TEXT)])["documents"]
    assert [(d.meta["split_idx_start"], d.meta.get("confidence")) for d in out] == want
    assert "confidence" not in out[0].meta


def test_llamaindex_nodes_carry_the_confidence_unembedded(seg, want):
    pytest.importorskip("llama_index.core")
    from llama_index.core import Document
    from llama_index.core.schema import MetadataMode

    from headseg.integrations.llamaindex import HeadsegNodeParser

    nodes = HeadsegNodeParser(segmenter=seg).get_nodes_from_documents([Document(text=TEXT)])
    assert [(n.start_char_idx, n.metadata.get("confidence")) for n in nodes] == want
    assert "confidence" not in nodes[0].metadata
    for n in nodes[1:]:
        assert "confidence" in n.excluded_embed_metadata_keys and "confidence" in n.excluded_llm_metadata_keys
        for mode in (MetadataMode.EMBED, MetadataMode.LLM):
            assert "confidence" not in n.get_content(metadata_mode=mode)
        assert "confidence" in n.get_content(metadata_mode=MetadataMode.ALL)


def test_min_confidence_one_leaves_one_chunk_in_each_adapter(seg, want):
    """The ``min_confidence`` keyword: 1.0 keeps no boundary (the text is short: no size limit cuts it)."""
    got = {}
    if _has("langchain_text_splitters"):
        from langchain_core.documents import Document

        from headseg.integrations.langchain import HeadsegTextSplitter

        got["langchain"] = [d.page_content for d in HeadsegTextSplitter(seg, min_confidence=1.0).split_documents(
            [Document(page_content=TEXT)])]
    if _has("haystack"):
        from haystack import Document as HDocument

        from headseg.integrations.haystack import HeadsegDocumentSplitter

        got["haystack"] = [d.content for d in HeadsegDocumentSplitter(seg, min_confidence=1.0).run(
            [HDocument(content=TEXT)])["documents"]]
    if _has("llama_index.core"):
        from llama_index.core import Document as LDocument

        from headseg.integrations.llamaindex import HeadsegNodeParser

        got["llamaindex"] = [n.get_content() for n in HeadsegNodeParser(segmenter=seg, min_confidence=1.0)
                             .get_nodes_from_documents([LDocument(text=TEXT)])]
    if not got:
        pytest.skip("no adapter's framework is installed")
    assert got == {name: [TEXT] for name in got}


def _has(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


# --- a segment tree (level="tree"): built by hand, its nodes' confidences known ------------------------------

TREE_TEXT = TOPICS_TEXT


@pytest.fixture(scope="module")
def tree():
    """[0-4) {[0-2) {0, 1}, [2-4)}, [4-12) {[4-8), [8-12)} over TOPICS_TEXT's twelve paragraphs; each node
    but the first of its text a confidence of its own (the boundary opening it at its level)."""
    starts = [0] + [m.end() for m in re.finditer("\n\n", TREE_TEXT)] + [len(TREE_TEXT)]
    p = lambda a, b: (starts[a], starts[b])  # noqa: E731 - paragraphs a..b-1
    spans = [(None, 1, p(0, 4)), (0, 2, p(0, 2)), (1, 3, p(0, 1)), (1, 3, p(1, 2)), (0, 2, p(2, 4)),
             (None, 1, p(4, 12)), (5, 2, p(4, 8)), (5, 2, p(8, 12))]
    sure = [None, None, None, 0.25, 0.5, 0.875, 0.125, 0.625]  # none where a node opens at the text's start
    nodes = [Node(i, parent, depth, a, b, 0.1 * i, (b - a) // 4, (), c)
             for i, ((parent, depth, (a, b)), c) in enumerate(zip(spans, sure))]
    inner = {n.parent for n in nodes}
    leaves = [n for n in nodes if n.id not in inner]
    flat = Segmentation.from_boundaries(TREE_TEXT, [n.start for n in leaves[1:]], [n.score for n in leaves[1:]],
                                        level="tree", confidence=[n.confidence for n in leaves[1:]])
    return Segmentation(text=TREE_TEXT, segments=flat.segments, level="tree", nodes=nodes)


def _serving(runner, monkeypatch, result):
    """The adapter's runner answers every text with ``result``."""
    async def many(texts):
        return [result for _ in texts]

    monkeypatch.setattr(runner, "segment_many", lambda texts: [result for _ in texts])
    monkeypatch.setattr(runner, "asegment_many", many)


def _tree_want(tree):
    return [(n.start, n.depth, n.confidence) for n in tree.nodes]


def test_langchain_tree_documents_keep_node_confidences(seg, tree, monkeypatch):
    pytest.importorskip("langchain_text_splitters")
    from headseg.integrations.langchain import HeadsegTextSplitter

    splitter = HeadsegTextSplitter(seg, level="tree", add_start_index=True)
    _serving(splitter.runner, monkeypatch, tree)
    docs = splitter.create_documents([TREE_TEXT])
    assert [(d.metadata["start_index"], d.metadata["depth"], d.metadata.get("confidence")) for d in docs] == \
        _tree_want(tree)


def test_haystack_tree_documents_keep_node_confidences(seg, tree, monkeypatch):
    pytest.importorskip("haystack")
    from haystack import Document

    from headseg.integrations.haystack import HeadsegDocumentSplitter

    splitter = HeadsegDocumentSplitter(seg, level="tree")
    _serving(splitter.runner, monkeypatch, tree)
    out = splitter.run([Document(content=TREE_TEXT)])["documents"]
    root, nodes = out[0], out[1:]  # the whole document first, as Haystack's hierarchical splitter writes it
    assert "confidence" not in root.meta
    assert [(d.meta["split_idx_start"], d.meta["__level"], d.meta.get("confidence")) for d in nodes] == \
        _tree_want(tree)


def test_llamaindex_tree_nodes_keep_node_confidences(seg, tree, monkeypatch):
    pytest.importorskip("llama_index.core")
    from llama_index.core import Document
    from llama_index.core.schema import MetadataMode

    from headseg.integrations.llamaindex import HeadsegNodeParser

    parser = HeadsegNodeParser(segmenter=seg, level="tree")
    _serving(parser._runner, monkeypatch, tree)
    nodes = parser.get_nodes_from_documents([Document(text=TREE_TEXT)])
    assert [(n.start_char_idx, n.metadata["depth"], n.metadata.get("confidence")) for n in nodes] == \
        _tree_want(tree)
    for n in nodes:
        assert "confidence" not in n.get_content(metadata_mode=MetadataMode.EMBED)
