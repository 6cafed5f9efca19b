"""``level: tree`` over HTTP: the answer nests the nodes as the library's ``to_dict`` does, for one text and
for a batch, and the tree's options are refused where they do not apply."""

from __future__ import annotations

import json

import pytest

from .conftest import needs_serve_extra

pytestmark = pytest.mark.slow

needs_serve_extra()

TEXT = "\n\n".join([
    "Boil a large pot of salted water for the pasta. Add the spaghetti and stir it so the strands do not stick. "
    "Cook it for nine minutes until it is firm to the bite. Drain it and keep a cup of the cooking water.",
    "Bread needs flour, water, yeast and salt. Knead the dough for ten minutes until it is smooth. Leave it to "
    "rise in a warm place for an hour. Bake the loaf in a hot oven until the crust is brown.",
    "The telescope was pointed at Jupiter after sunset. Its four largest moons appeared as bright points beside "
    "the planet. The great red spot rotated into view near midnight. Observers sketched the cloud bands by hand.",
    "Saturn rose later in the night. Its rings were tilted towards the Earth and looked wide open. The moon "
    "Titan shone faintly to the east. A camera recorded a thousand frames of the planet.",
])


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
