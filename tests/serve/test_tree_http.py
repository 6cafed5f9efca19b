"""``level: tree`` over HTTP: the answer nests the nodes as the library's ``to_dict`` does, for one text and
for a batch, and the tree's options are refused where they do not apply."""

from __future__ import annotations

import json

import pytest

from sample_texts import PARAGRAPHS

from .conftest import needs_serve_extra

pytestmark = pytest.mark.slow

needs_serve_extra()

TEXT = "\n\n".join(PARAGRAPHS[i] for i in (0, 2, 3, 4))  # pasta, bread, Jupiter, Saturn


def test_a_tree_over_http_is_the_library_tree(client):
    from headseg.api import Segmenter

    body = {"level": "tree", "depth": 2, "max_tokens": 60}
    r = client.post("/v1/segment", json={"text": TEXT, **body})
    assert r.status_code == 200, r.text
    want = Segmenter(quiet=True).segment(TEXT, level="tree", depth=2, max_tokens=60).to_dict()
    assert r.json() == want and "tree" in want
    assert "".join(n["text"] for n in want["tree"]) == TEXT
    many = client.post("/v1/segment", json={"documents": [{"id": "a", "text": TEXT}], **body})
    assert many.status_code == 200, many.text
    lines = [json.loads(x) for x in many.text.splitlines()]
    assert lines == [{**want, "document": "a"}]
    bad = client.post("/v1/segment", json={"text": TEXT, "depth": 2})
    assert bad.status_code in (400, 422) and "depth" in bad.json()["error"]
