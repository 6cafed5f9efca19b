"""Issue 35 item 21: a document's id travels with its segmentation into every serialisation."""

from __future__ import annotations

import json

import pytest

TEXT = "The committee met on Monday. It approved the budget. Rain fell all night. The river rose quickly."


@pytest.fixture(scope="module")
def segmenter(tiny_bert_dir):
    from headseg import Segmenter

    return Segmenter(model=str(tiny_bert_dir), backend="torch", quiet=True)


@pytest.mark.parametrize("item", [{"id": "a", "text": TEXT}, ("a", TEXT), {"id": 7, "text": TEXT}])
def test_issue35_item21_iter_segment_keeps_the_id_in_to_dict(segmenter, item):
    want = "7" if isinstance(item, dict) and item["id"] == 7 else "a"
    (r,) = segmenter.iter_segment([item])
    assert r.meta["document"] == want
    assert r.to_dict()["document"] == want
    assert {rec["document"] for rec in r.to_records()} == {want}
    assert json.loads(r.to_json())["document"] == want
    assert r.to_dict(document="given")["document"] == "given"  # a name given at the call wins


def test_issue35_item21_a_plain_text_has_no_id(segmenter):
    (r,) = segmenter.iter_segment([TEXT])
    assert r.to_dict()["document"] is None and r.to_dict() == segmenter.segment(TEXT).to_dict()
