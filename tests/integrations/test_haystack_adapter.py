"""HeadsegDocumentSplitter with the real haystack-ai."""

from __future__ import annotations

import pytest

pytest.importorskip("haystack")

from haystack import Document, Pipeline
from haystack.core.errors import SerializationError

from headseg.analysis.model import embedded_model_path
from headseg.integrations.haystack import HeadsegDocumentSplitter

from adapter_support import ECHO, ECHO_UNITS, PARAGRAPH, REPEATED, assert_tiles


def _check(doc, chunks):
    starts = [c.meta["split_idx_start"] for c in chunks]
    spans = list(zip(starts, starts[1:] + [len(doc.content)]))
    assert_tiles(doc.content, spans, [c.content for c in chunks])
    assert [c.meta["split_id"] for c in chunks] == list(range(len(chunks)))
    assert all(c.meta["source_id"] == doc.id for c in chunks)


def test_run_in_a_pipeline_exact_offsets_and_meta(tiny_segmenter):
    docs = [Document(content=REPEATED, meta={"source": "river.txt"}), Document(content=ECHO, meta={"n": 2}),
            Document(content="")]
    splitter = HeadsegDocumentSplitter(tiny_segmenter, max_chars=len(PARAGRAPH))
    pipe = Pipeline()
    pipe.add_component("split", splitter)
    chunks = pipe.run({"split": {"documents": docs}})["split"]["documents"]
    first = [c for c in chunks if c.meta["source_id"] == docs[0].id]
    second = [c for c in chunks if c.meta["source_id"] == docs[1].id]
    assert len(first) + len(second) == len(chunks)  # the empty document is skipped
    texts = [c.content for c in first]
    assert len(set(texts)) < len(texts)
    _check(docs[0], first)
    _check(docs[1], second)
    assert all(c.meta["source"] == "river.txt" for c in first) and all(c.meta["n"] == 2 for c in second)
    assert all(c.meta["page_number"] == 1 for c in chunks)


def test_units_pages_and_warm_up(tiny_segmenter):
    splitter = HeadsegDocumentSplitter(tiny_segmenter, level="unit")
    splitter.warm_up()
    doc = Document(content=ECHO)
    chunks = splitter.run(documents=[doc])["documents"]
    assert [(c.meta["split_idx_start"], c.meta["split_idx_start"] + len(c.content)) for c in chunks] == ECHO_UNITS
    paged = "Page one ends here.\fPage two starts.\f\fPage four. "
    chunks = splitter.run(documents=[Document(content=paged)])["documents"]
    for c in chunks:
        s = c.meta["split_idx_start"]
        lead = len(c.content) - len(c.content.lstrip("\f"))
        assert c.meta["page_number"] == 1 + paged[: s + lead].count("\f")
    assert {c.meta["page_number"] for c in chunks} >= {1, 2, 4}
    with pytest.raises(ValueError, match="no content"):
        splitter.run(documents=[Document(content=None)])
    with pytest.raises(TypeError):
        splitter.run(documents=["text"])


def test_warm_up_loads_the_model_once_and_serialises(tiny_bert, tmp_path):
    d = tmp_path / "tiny"
    tiny_bert.model.save_pretrained(d)
    tiny_bert.tokenizer.save(d)
    splitter = HeadsegDocumentSplitter(model=str(d), backend="torch", device="cpu", max_tokens=12,
                                       token_counter=str(embedded_model_path()))
    assert not splitter.runner.loaded
    splitter.warm_up()
    seg = splitter.runner.segmenter
    splitter.warm_up()
    assert splitter.runner.segmenter is seg
    chunks = splitter.run(documents=[Document(content=REPEATED)])["documents"]
    assert "".join(c.content for c in chunks) == REPEATED
    data = splitter.to_dict()
    again = HeadsegDocumentSplitter.from_dict(data)
    assert again.to_dict() == data and data["init_parameters"]["max_tokens"] == 12
    with pytest.raises(SerializationError):
        HeadsegDocumentSplitter(seg).to_dict()
    with pytest.raises(SerializationError):
        HeadsegDocumentSplitter(model=str(d), token_counter=len).to_dict()
