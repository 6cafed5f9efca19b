"""The segment tree (``level="tree"``) in the three adapters: every node emitted, parents before their
children, linked the way each framework's own hierarchical tools read (LlamaIndex's
``get_leaf_nodes``/``get_root_nodes`` and ``AutoMergingRetriever``, Haystack's ``AutoMergingRetriever``,
LangChain ids with ``parent_id``), and the flat levels unchanged."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from headseg.analysis.segments import Node, Segmentation
from sample_texts import TOPICS_TEXT

TEXT = TOPICS_TEXT
OPTS = {"level": "tree", "depth": 3}


@pytest.fixture(scope="module")
def tree():
    """A segment tree of TEXT's twelve paragraphs, built by hand (the adapters map trees; how the search
    finds one is the segmenter tests' subject): [0-4) {[0-2) {0, 1}, [2-4)}, [4-12) {[4-8), [8-12)}."""
    starts = [0] + [m.end() for m in re.finditer("\n\n", TEXT)] + [len(TEXT)]
    p = lambda a, b: (starts[a], starts[b])  # noqa: E731 - paragraphs a..b-1
    spans = [(None, 1, p(0, 4)), (0, 2, p(0, 2)), (1, 3, p(0, 1)), (1, 3, p(1, 2)), (0, 2, p(2, 4)),
             (None, 1, p(4, 12)), (5, 2, p(4, 8)), (5, 2, p(8, 12))]
    nodes = [Node(i, parent, depth, a, b, 0.1 * i, (b - a) // 4) for i, (parent, depth, (a, b)) in enumerate(spans)]
    inner = {n.parent for n in nodes}
    leaves = [n for n in nodes if n.id not in inner]
    flat = Segmentation.from_boundaries(TEXT, [n.start for n in leaves[1:]], [n.score for n in leaves[1:]],
                                        level="tree")
    segs = [replace(s, token_count=n.token_count) for s, n in zip(flat.segments, leaves)]
    return Segmentation(text=TEXT, segments=segs, level="tree", nodes=nodes)


def _serving(runner, monkeypatch, result):
    """The adapter's runner answers every text with ``result`` (its own text)."""
    async def many(texts):
        return [result for _ in texts]

    monkeypatch.setattr(runner, "segment_many", lambda texts: [result for _ in texts])
    monkeypatch.setattr(runner, "asegment_many", many)


def _spans(result):
    return [(n.start, n.end, n.depth) for n in result.nodes]


def test_langchain_documents_link_to_their_parents_by_id(tiny_segmenter, tree, monkeypatch):
    pytest.importorskip("langchain_text_splitters")
    from headseg.integrations.langchain import HeadsegTextSplitter

    splitter = HeadsegTextSplitter(tiny_segmenter, **OPTS)
    _serving(splitter.runner, monkeypatch, tree)
    docs = splitter.create_documents([TEXT], [{"source": "t.txt"}])
    assert [(d.metadata["start_index"], d.metadata["end_index"], d.metadata["depth"]) for d in docs] == _spans(tree)
    assert all(TEXT[d.metadata["start_index"]:d.metadata["end_index"]] == d.page_content for d in docs)
    by_id = {d.id: d for d in docs}
    assert len(by_id) == len(docs)
    for d, n in zip(docs, tree.nodes):
        assert d.metadata["source"] == "t.txt"
        if n.parent is None:
            assert d.metadata["parent_id"] is None
        else:  # the parent is the Document of the node's parent, and it contains the child
            p = by_id[d.metadata["parent_id"]]
            assert p is docs[n.parent]
            assert p.metadata["start_index"] <= d.metadata["start_index"] < d.metadata["end_index"] \
                <= p.metadata["end_index"]
    leaves = [d for d in docs if d.metadata["leaf"]]
    assert "".join(d.page_content for d in leaves) == TEXT
    assert [d.page_content for d in leaves] == [s.text for s in tree.segments]
    # split_text: the leaves, which tile the text
    assert splitter.split_text(TEXT) == [s.text for s in tree.segments]


def test_llamaindex_nodes_are_a_hierarchy_its_own_helpers_read(tiny_segmenter, tree, monkeypatch):
    pytest.importorskip("llama_index.core")
    from llama_index.core import Document
    from llama_index.core.node_parser import get_leaf_nodes, get_root_nodes
    from llama_index.core.schema import MetadataMode, NodeRelationship

    from headseg.integrations.llamaindex import HeadsegNodeParser

    parser = HeadsegNodeParser(segmenter=tiny_segmenter, **OPTS)
    _serving(parser._runner, monkeypatch, tree)
    nodes = parser.get_nodes_from_documents([Document(text=TEXT)])
    assert [(n.start_char_idx, n.end_char_idx, n.metadata["depth"]) for n in nodes] == _spans(tree)
    leaves, roots = get_leaf_nodes(nodes), get_root_nodes(nodes)
    assert [(n.start_char_idx, n.end_char_idx) for n in leaves] == [(s.start, s.end) for s in tree.segments]
    assert [(n.start_char_idx, n.end_char_idx) for n in roots] == \
        [(n.start, n.end) for n in tree.nodes if n.parent is None]
    by_id = {n.node_id: n for n in nodes}
    for node, ref in zip(nodes, tree.nodes):
        kids = [by_id[r.node_id] for r in node.relationships.get(NodeRelationship.CHILD, [])]
        assert [(k.start_char_idx, k.end_char_idx) for k in kids] == \
            [(c.start, c.end) for c in tree.nodes if c.parent == ref.id]
        if ref.parent is not None:
            assert by_id[node.relationships[NodeRelationship.PARENT].node_id] is nodes[ref.parent]
        assert "depth" not in node.get_content(metadata_mode=MetadataMode.EMBED)
    # reading order among the leaves: each leaf's NEXT is the following leaf
    for a, b in zip(leaves, leaves[1:]):
        assert a.relationships[NodeRelationship.NEXT].node_id == b.node_id
        assert b.relationships[NodeRelationship.PREVIOUS].node_id == a.node_id


def test_llamaindex_auto_merging_retriever_merges_leaves_into_their_parent(tiny_segmenter, tree, monkeypatch):
    pytest.importorskip("llama_index.core")
    from llama_index.core import Document
    from llama_index.core.node_parser import get_leaf_nodes
    from llama_index.core.retrievers import AutoMergingRetriever
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeRelationship, NodeWithScore
    from llama_index.core.storage import StorageContext

    from headseg.integrations.llamaindex import HeadsegNodeParser

    parser = HeadsegNodeParser(segmenter=tiny_segmenter, **OPTS)
    _serving(parser._runner, monkeypatch, tree)
    nodes = parser.get_nodes_from_documents([Document(text=TEXT)])
    storage = StorageContext.from_defaults()
    storage.docstore.add_documents(nodes)
    leaves = get_leaf_nodes(nodes)
    parent_id = next(n.relationships[NodeRelationship.PARENT].node_id for n in leaves
                     if NodeRelationship.PARENT in n.relationships)
    siblings = [n for n in leaves if NodeRelationship.PARENT in n.relationships
                and n.relationships[NodeRelationship.PARENT].node_id == parent_id]

    class Fixed(BaseRetriever):  # retrieves every child of one parent
        def _retrieve(self, query_bundle):
            return [NodeWithScore(node=n, score=1.0) for n in siblings]

    got = AutoMergingRetriever(Fixed(), storage, simple_ratio_thresh=0.5).retrieve("anything")
    assert [g.node.node_id for g in got] == [parent_id]


def test_haystack_documents_feed_its_auto_merging_retriever(tiny_segmenter, tree, monkeypatch):
    pytest.importorskip("haystack")
    from haystack import Document
    from haystack.components.retrievers.auto_merging_retriever import AutoMergingRetriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from headseg.integrations.haystack import HeadsegDocumentSplitter

    source = Document(content=TEXT, meta={"source": "t.txt"})
    splitter = HeadsegDocumentSplitter(tiny_segmenter, **OPTS)
    _serving(splitter.runner, monkeypatch, tree)
    docs = splitter.run(documents=[source])["documents"]
    root, nodes = docs[0], docs[1:]
    assert root.content == TEXT and root.meta["__level"] == 0 and root.meta["__parent_id"] is None
    assert [(d.meta["split_idx_start"], d.meta["split_idx_start"] + len(d.content), d.meta["__level"])
            for d in nodes] == _spans(tree)
    by_id = {d.id: d for d in docs}
    assert len(by_id) == len(docs)
    for d, n in zip(nodes, tree.nodes):
        parent = root if n.parent is None else nodes[n.parent]
        assert d.meta["__parent_id"] == parent.id and d.id in parent.meta["__children_ids"]
        assert d.meta["source_id"] == source.id and d.meta["source"] == "t.txt"
    assert [d.content for d in nodes if not d.meta["__children_ids"]] == [s.text for s in tree.segments]
    store = InMemoryDocumentStore()
    store.write_documents(docs)
    parent = nodes[1]  # [0-2), whose two children are leaves: retrieving both merges them into it
    kids = [by_id[i] for i in parent.meta["__children_ids"]]
    assert [k.content for k in kids] == [TEXT[n.start:n.end] for n in tree.nodes if n.parent == 1]
    got = AutoMergingRetriever(store, threshold=0.5).run(kids)["documents"]
    assert [g.id for g in got] == [parent.id]


def test_flat_levels_carry_no_tree_metadata(tiny_segmenter):
    pytest.importorskip("langchain_text_splitters")
    from headseg.integrations.langchain import HeadsegTextSplitter

    docs = HeadsegTextSplitter(tiny_segmenter, max_tokens=40).create_documents([TEXT])
    assert all(d.id is None and "parent_id" not in d.metadata and "depth" not in d.metadata for d in docs)
