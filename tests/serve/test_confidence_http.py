"""Each record's ``confidence`` (issue 48) over HTTP: the answer's records carry the library's (and the
command's) calibrated confidences, in one record and in the NDJSON of ``documents``; ``min_confidence``
keeps the boundaries at least that sure and is refused out of [0, 1] with a 422 ``{"error": ...}``; the
OpenAPI schema of a segment names the field."""

from __future__ import annotations

import json

import pytest

from .conftest import needs_serve_extra
from sample_texts import UNRELATED_TEXT

pytestmark = pytest.mark.slow

needs_serve_extra()

TEXT = UNRELATED_TEXT  # three clearly unrelated paragraphs (tests/sample_texts.py)


@pytest.fixture(scope="module")
def library():
    from headseg.api import Segmenter

    seg = Segmenter(quiet=True).segment(TEXT)
    assert len(seg) >= 2, "the text must have at least one topic boundary"
    return seg


def _want(library) -> list:
    return [None if s.confidence is None else round(s.confidence, 6) for s in library]


def test_records_carry_the_library_confidences(client, library):
    r = client.post("/v1/segment", json={"text": TEXT})
    assert r.status_code == 200, r.text
    rows = r.json()["segments"]
    assert [x["start"] for x in rows] == [s.start for s in library]
    got = [x["confidence"] for x in rows]
    assert got[0] is None and all(isinstance(c, float) and 0.0 <= c <= 1.0 for c in got[1:])
    assert got == _want(library)
    assert r.json() == library.to_dict()


def test_the_cli_gives_the_same_confidences(client, tmp_path, capsys):
    from headseg.cli import main

    src = tmp_path / "doc.txt"
    src.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert main(["segment", str(src), "--format", "jsonl", "--out", str(out), "--quiet"]) == 0
    cli = [json.loads(x)["confidence"] for x in out.read_text(encoding="utf-8").splitlines()]
    http = [x["confidence"] for x in client.post("/v1/segment", json={"text": TEXT}).json()["segments"]]
    assert http == cli and any(c is not None for c in cli)


def test_min_confidence_one_gives_one_segment(client):
    r = client.post("/v1/segment", json={"text": TEXT, "min_confidence": 1.0})
    assert r.status_code == 200, r.text
    rows = r.json()["segments"]
    assert len(rows) == 1 and rows[0]["confidence"] is None and rows[0]["text"] == TEXT


@pytest.mark.parametrize("value", [2, -0.1, "abc"])
def test_min_confidence_out_of_range_is_422(client, value):
    assert client.post("/v1/segment", json={"text": TEXT, "min_confidence": 0.5}).status_code == 200  # in range
    r = client.post("/v1/segment", json={"text": TEXT, "min_confidence": value})
    assert r.status_code == 422, r.text
    body = r.json()
    assert set(body) == {"error"} and isinstance(body["error"], str), body
    assert "min_confidence" in body["error"] and "\n" not in body["error"], body


def test_the_ndjson_of_documents_carries_it(client, library):
    r = client.post("/v1/segment", json={"documents": [{"id": "a", "text": TEXT}, {"id": "b", "text": TEXT}]})
    assert r.status_code == 200, r.text
    lines = [json.loads(x) for x in r.text.splitlines()]
    assert [x["document"] for x in lines] == ["a", "b"]
    for x in lines:
        assert [s["confidence"] for s in x["segments"]] == _want(library)
    assert lines[0] == library.to_dict("a")


def test_the_schema_of_a_segment_names_confidence(client):
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    props = schemas["Segment"]["properties"]
    assert "confidence" in props
    text = json.dumps(props["confidence"])
    assert '"number"' in text and '"null"' in text, text
    assert "min_confidence" in json.dumps(schemas["SegmentRequest"])
