"""HeadsegTextSplitter with the real langchain-text-splitters."""

from __future__ import annotations

import copy

import pytest

pytest.importorskip("langchain_text_splitters")

from langchain_core.documents import Document
from langchain_text_splitters import TextSplitter

from headseg.analysis.errors import HeadsegError
from headseg.integrations.langchain import HeadsegTextSplitter

from adapter_support import ECHO, ECHO_UNITS, PARAGRAPH, REPEATED, assert_tiles


def test_split_documents_exact_offsets_tiling_and_metadata(tiny_segmenter):
    meta = {"source": "river.txt", "tags": ["a", "b"]}
    original = copy.deepcopy(meta)
    docs = [Document(page_content=REPEATED, metadata=meta), Document(page_content=ECHO, metadata={"n": 2})]
    splitter = HeadsegTextSplitter(tiny_segmenter, max_chars=len(PARAGRAPH))
    assert isinstance(splitter, TextSplitter)
    chunks = splitter.split_documents(docs)
    first = [c for c in chunks if c.metadata.get("source") == "river.txt"]
    second = [c for c in chunks if c.metadata.get("n") == 2]
    assert len(first) + len(second) == len(chunks)
    # the repeated paragraph yields chunks with identical text at different offsets
    texts = [c.page_content for c in first]
    assert len(set(texts)) < len(texts)
    for doc, part in ((docs[0], first), (docs[1], second)):
        spans = [(c.metadata["start_index"], c.metadata["end_index"]) for c in part]
        assert_tiles(doc.page_content, spans, [c.page_content for c in part])
        assert all(len(c.page_content) <= len(PARAGRAPH) for c in part)
    assert all(c.metadata["tags"] == ["a", "b"] for c in first)
    # each chunk has its own copy of the metadata
    first[0].metadata["tags"].append("c")
    assert meta == original and first[1].metadata["tags"] == ["a", "b"]
    # the same chunks from split_text and transform_documents
    assert splitter.split_text(REPEATED) == texts
    assert [c.page_content for c in splitter.transform_documents(docs)] == [c.page_content for c in chunks]


def test_units_and_create_documents(tiny_segmenter):
    splitter = HeadsegTextSplitter(tiny_segmenter, level="unit")
    docs = splitter.create_documents([ECHO], metadatas=[{"k": 1}])
    assert [(d.metadata["start_index"], d.metadata["end_index"]) for d in docs] == ECHO_UNITS
    assert all(d.metadata["k"] == 1 for d in docs)
    plain = HeadsegTextSplitter(tiny_segmenter, level="unit", add_start_index=False).create_documents([ECHO])
    assert [d.metadata for d in plain] == [{}, {}, {}]


def test_token_limit_in_a_foreign_counter(tiny_segmenter):
    words = lambda s: len(s.split())
    chunks = HeadsegTextSplitter(tiny_segmenter, max_tokens=9, token_counter=words).split_text(REPEATED)
    assert "".join(chunks) == REPEATED
    assert all(words(c) <= 9 for c in chunks)


def test_langchain_constructors_and_names(tiny_segmenter, tokenizer):
    # from_huggingface_tokenizer passes length_function; chunk_size is then a token limit
    splitter = HeadsegTextSplitter.from_huggingface_tokenizer(tokenizer, segmenter=tiny_segmenter, chunk_size=15)
    chunks = splitter.split_text(REPEATED)
    assert "".join(chunks) == REPEATED
    assert all(len(tokenizer.tokenize(c)) <= 15 for c in chunks)
    assert max(len(tokenizer.tokenize(c)) for c in chunks) > 8  # a real limit, not tiny units
    by_chars = HeadsegTextSplitter(tiny_segmenter, chunk_size=60).split_text(REPEATED)
    assert "".join(by_chars) == REPEATED and all(len(c) <= 60 for c in by_chars)
    with pytest.raises(ValueError, match="overlap"):
        HeadsegTextSplitter(tiny_segmenter, chunk_overlap=10)


def test_bad_options_fail_at_construction(tiny_segmenter):
    with pytest.raises(HeadsegError, match="level"):
        HeadsegTextSplitter(tiny_segmenter, level="chapter")
    with pytest.raises(HeadsegError, match="max_chars"):
        HeadsegTextSplitter(tiny_segmenter, max_chars=0)
    with pytest.raises(HeadsegError, match="not both"):
        HeadsegTextSplitter(tiny_segmenter, model="x")


def test_create_documents_refuses_one_text_for_a_list(tiny_segmenter):
    """A str is iterable: each of its characters became a document (start_index 0 every time)."""
    splitter = HeadsegTextSplitter(tiny_segmenter)
    with pytest.raises(HeadsegError, match="texts must be a list of str"):
        splitter.create_documents(ECHO)
