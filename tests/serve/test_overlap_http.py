"""``overlap`` over HTTP (issue 49, item 18): accepted for the topic level; the answer's records are the
overlapped chunks, each saying what it repeats (``overlap_chars``), as the library's ``to_dict``."""

from __future__ import annotations

import json

import pytest

from .conftest import TOPICS, needs_serve_extra

pytestmark = pytest.mark.slow

needs_serve_extra()

BODY = {"max_tokens": 64, "target_tokens": 24, "overlap": 1}


def test_overlapped_chunks_over_http_are_the_library_records(client):
    from headseg.api import Segmenter

    r = client.post("/v1/segment", json={"text": TOPICS, **BODY})
    assert r.status_code == 200, r.text
    want = Segmenter(quiet=True).segment(TOPICS, **BODY)
    assert r.json() == want.to_dict()
    rows = r.json()["segments"]
    assert [[x["start"], x["end"]] for x in rows] == want.meta["chunks"]
    assert rows[0]["overlap_chars"] == 0 and any(x["overlap_chars"] > 0 for x in rows)
    for x, s in zip(rows, want):
        assert x["text"] == TOPICS[x["start"]:x["end"]] and x["text"][x["overlap_chars"]:] == s.text
        assert x["token_count"] <= 64
    many = client.post("/v1/segment", json={"documents": [{"id": "a", "text": TOPICS}], **BODY})
    assert many.status_code == 200, many.text
    assert [json.loads(x) for x in many.text.splitlines()] == [want.to_dict("a")]


def test_without_overlap_the_records_say_none(client):
    r = client.post("/v1/segment", json={"text": TOPICS, "max_tokens": 40})
    assert r.status_code == 200
    assert {x["overlap_chars"] for x in r.json()["segments"]} == {None}
    assert "".join(x["text"] for x in r.json()["segments"]) == TOPICS


def test_the_schema_describes_overlap_and_overlap_chars(client):
    spec = client.get("/openapi.json").json()
    text = json.dumps(spec)
    assert '"overlap"' in text and '"overlap_chars"' in text
