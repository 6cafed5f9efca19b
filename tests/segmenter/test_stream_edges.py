"""Streaming (`iter_segment`, `segment_many`) as a careless or unlucky caller meets it."""

from __future__ import annotations

import pytest

from headseg.analysis.errors import HeadsegError, InputError

TEXT = ("The committee met on Monday. It approved the budget after a long debate.\n\n"
        "Rain fell all night and the river rose quickly. Farmers moved their cattle.")


@pytest.fixture(scope="module")
def segmenter(tiny_bert):
    from headseg import Segmenter

    return Segmenter(model=tiny_bert, backend="torch", window_tokens=64)


def test_documents_read_before_the_reader_fails_are_still_segmented(segmenter):
    """A generator that fails (a disk gone) half-way through a batch: the documents it gave before
    come out first, then its error; before, the whole pending batch was lost with it."""
    def reader():
        yield "a", TEXT
        yield "b", TEXT[:70]
        raise OSError("disk gone")

    for errors in ("raise", "yield"):
        out = []
        with pytest.raises(OSError, match="disk gone"):
            for res in segmenter.iter_segment(reader(), errors=errors, batch_docs=8):
                out.append(res)
        assert [r.meta["document"] for r in out] == ["a", "b"]
        assert [r.to_dict() for r in out] == [r.to_dict(document=d) for r, d in
                                              zip(segmenter.segment_many([TEXT, TEXT[:70]]), "ab")]
    batches = []
    with pytest.raises(OSError):
        for batch in segmenter.iter_segment_batches(reader(), batch_docs=8):
            batches.append(batch)
    assert [len(b) for b in batches] == [2]


@pytest.mark.parametrize("items", [{"id": "d1", "text": TEXT}, {TEXT: 1}], ids=["one-record", "dict-of-texts"])
def test_a_mapping_is_not_taken_for_a_list_of_documents(segmenter, items):
    """Iterating a mapping gives its keys: one record became the documents "id" and "text"."""
    with pytest.raises(InputError, match="put it in a list"):
        segmenter.segment_many(items)
    with pytest.raises(InputError, match="put it in a list"):
        segmenter.iter_segment(items)
    assert segmenter.iter_segment([{"id": "d1", "text": TEXT}]) is not None


@pytest.mark.parametrize("bad", [{"text_field": 5}, {"id_field": None}])
def test_field_names_must_be_strings(segmenter, bad):
    with pytest.raises(HeadsegError, match="text_field and id_field must be strings"):
        segmenter.iter_segment([{"id": 1, "text": TEXT}], **bad)


def test_an_iterator_is_read_once_and_a_second_pass_yields_nothing(segmenter):
    """One result per item read: a generator consumed by a first pass gives a second pass no documents
    (and no error), as any Python iterator; a list can be segmented again with the same results."""
    gen = (t for t in [TEXT, TEXT[:70]])
    first = list(segmenter.iter_segment(gen))
    assert len(first) == 2 and list(segmenter.iter_segment(gen)) == []
    docs = [TEXT, TEXT[:70]]
    assert [r.to_dict() for r in segmenter.iter_segment(docs)] == [r.to_dict() for r in first]
    assert [r.to_dict() for r in segmenter.iter_segment(docs)] == [r.to_dict() for r in first]


def test_an_exception_in_a_user_sentence_splitter_fails_only_its_documents(segmenter):
    def splitter(text):
        if "river" in text:
            raise RuntimeError("splitter boom")
        return [(0, len(text))]

    out = list(segmenter.iter_segment(["No water here.", TEXT], errors="yield", sentence_splitter=splitter))
    assert out[0].text == "No water here." and [(s.start, s.end) for s in out[0]] == [(0, 14)]
    assert out[1].index == 1 and out[1].reason == "RuntimeError: splitter boom"
