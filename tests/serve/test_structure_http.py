"""``structure`` in an HTTP request: the answer carries each segment's heading path, as the library's."""

from __future__ import annotations

import pytest

from .conftest import needs_serve_extra

pytestmark = pytest.mark.slow

needs_serve_extra()

MD = ("# Install\n\nRun the installer. It takes a minute.\n\n## GPU\n\nPick the CUDA build. It is larger.\n\n"
      "```bash\npip install headseg\n```\n")


def test_structure_and_headings_over_http(client):
    from headseg.api import Segmenter

    r = client.post("/v1/segment", json={"text": MD, "max_tokens": 24, "structure": "markdown"})
    assert r.status_code == 200, r.text
    want = Segmenter(quiet=True).segment(MD, max_tokens=24, structure="markdown").to_dict()
    assert r.json() == want
    assert r.json()["segments"][0]["headings"] == ["Install"]
    bad = client.post("/v1/segment", json={"text": MD, "structure": "rst"})
    assert bad.status_code in (400, 422)
    assert "structure" in bad.json()["error"] and "\n" not in bad.json()["error"]
