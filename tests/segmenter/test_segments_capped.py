"""More segments asked for than the text has units: said in meta and on the headseg logger (issue 15)."""

from __future__ import annotations

import logging

import pytest

from headseg.api import Segmenter

TEXT = "The committee met on Monday. Rain fell all night. Farmers moved their cattle."


@pytest.fixture(scope="module")
def seg(tiny_bert):
    return Segmenter(model=tiny_bert, backend="torch", unit_mode="rules")


def test_more_segments_than_units_is_capped_and_said(seg, caplog):
    units = seg.segment(TEXT, level="unit")
    assert len(units) == 3
    with caplog.at_level(logging.WARNING, logger="headseg"):
        r = seg.segment(TEXT, segments=50)
    assert "".join(s.text for s in r) == TEXT
    assert [(s.start, s.end) for s in r] == [(s.start, s.end) for s in units]
    assert r.meta["segments_requested"] == 50 and r.meta["segments_capped"] is True
    assert "50 segments requested, but the text has only 3 unit(s): returning 3 segment(s)" in caplog.text


def test_reachable_count_is_not_capped(seg, caplog):
    with caplog.at_level(logging.WARNING, logger="headseg"):
        r = seg.segment(TEXT, segments=2)
    assert len(r) == 2 and r.meta["segments_requested"] == 2 and r.meta["segments_capped"] is False
    assert caplog.text == ""
    assert "segments_requested" not in seg.segment(TEXT).meta


def test_batch_names_the_document(seg, caplog):
    with caplog.at_level(logging.WARNING, logger="headseg"):
        a, b, c = seg.segment_many([TEXT + " " + TEXT, TEXT, ""], segments=4)
    assert (len(a), len(b), len(c)) == (4, 3, 0)
    assert [x.meta["segments_capped"] for x in (a, b, c)] == [False, True, True]
    assert "document 2: 4 segments requested" in caplog.text
    assert "document 3: 4 segments requested, but the text has only 0 unit(s)" in caplog.text
    assert "document 1" not in caplog.text
