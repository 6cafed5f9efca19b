"""HeadsegNodeParser with the real llama-index-core."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document
from llama_index.core.node_parser import NodeParser
from llama_index.core.schema import NodeRelationship

from headseg.analysis.errors import HeadsegError
from headseg.integrations.llamaindex import HeadsegNodeParser

from adapter_support import ECHO, ECHO_UNITS, PARAGRAPH, REPEATED, assert_tiles, naive_find_offsets


def _check(doc, nodes):
    assert_tiles(doc.text, [(n.start_char_idx, n.end_char_idx) for n in nodes], [n.text for n in nodes])
    for i, n in enumerate(nodes):
        assert n.relationships[NodeRelationship.SOURCE].node_id == doc.id_
        assert n.ref_doc_id == doc.id_
        prev = n.relationships.get(NodeRelationship.PREVIOUS)
        nxt = n.relationships.get(NodeRelationship.NEXT)
        assert (prev.node_id if prev else None) == (nodes[i - 1].node_id if i else None)
        assert (nxt.node_id if nxt else None) == (nodes[i + 1].node_id if i + 1 < len(nodes) else None)


def test_nodes_exact_offsets_relationships_and_metadata(tiny_segmenter):
    docs = [Document(text=REPEATED, metadata={"source": "river.txt"}), Document(text=ECHO, metadata={"n": 2})]
    parser = HeadsegNodeParser(tiny_segmenter, max_chars=len(PARAGRAPH))
    assert isinstance(parser, NodeParser)
    nodes = parser.get_nodes_from_documents(docs)
    by_doc = {d.id_: [n for n in nodes if n.ref_doc_id == d.id_] for d in docs}
    assert sum(map(len, by_doc.values())) == len(nodes)
    texts = [n.text for n in by_doc[docs[0].id_]]
    assert len(set(texts)) < len(texts)  # repeated chunks
    for d in docs:
        _check(d, by_doc[d.id_])
        # the document's metadata, and each boundary's confidence (issue 48) after the first chunk
        assert all({k: v for k, v in n.metadata.items() if k != "confidence"} == d.metadata for n in by_doc[d.id_])
        assert [("confidence" in n.metadata) for n in by_doc[d.id_]] == [i > 0 for i in range(len(by_doc[d.id_]))]
    # no prev/next link across documents
    assert NodeRelationship.NEXT not in by_doc[docs[0].id_][-1].relationships


def test_offsets_are_not_found_by_search(tiny_segmenter):
    doc = Document(text=ECHO)
    nodes = HeadsegNodeParser(tiny_segmenter, level="unit")([doc])
    assert [(n.start_char_idx, n.end_char_idx) for n in nodes] == ECHO_UNITS
    # what LlamaIndex's own str.find would have written instead
    assert naive_find_offsets(ECHO, [n.text for n in nodes])[1] == 8 != ECHO_UNITS[1][0]
    _check(doc, nodes)


def test_options_and_serialisation(tiny_segmenter):
    words = lambda s: len(s.split())
    parser = HeadsegNodeParser(tiny_segmenter, max_tokens=9, token_counter=words)
    nodes = parser.get_nodes_from_documents([Document(text=REPEATED)])
    assert all(words(n.text) <= 9 for n in nodes)
    d = parser.to_dict()
    assert d["max_tokens"] == 9 and "token_counter" not in d and d["class_name"] == "HeadsegNodeParser"
    with pytest.raises(HeadsegError, match="segments"):
        HeadsegNodeParser(tiny_segmenter, segments=0)


def test_a_changed_option_field_is_validated_and_used_by_the_next_parse(tiny_segmenter):
    """The options are the parser's pydantic fields: assigning one (as LlamaIndex code does with its own
    parsers' fields) must change what the next parse does, and a bad value must be refused."""
    parser = HeadsegNodeParser(tiny_segmenter)
    wide = parser.get_nodes_from_documents([Document(text=REPEATED)])
    assert max(len(n.text) for n in wide) > 60
    parser.max_chars = 60
    narrow = parser.get_nodes_from_documents([Document(text=REPEATED)])
    assert max(len(n.text) for n in narrow) <= 60
    assert parser.segmenter is tiny_segmenter
    with pytest.raises(HeadsegError, match="max_chars must be a positive integer"):
        parser.max_chars = -5
    assert parser.max_chars == 60 and parser.to_dict()["max_chars"] == 60
    with pytest.raises(HeadsegError, match="not both"):
        parser.model = "some/model"
    assert parser.model is None
