"""Issue 35 item 18: /docs works offline: every script and style it uses comes from the service itself."""

from __future__ import annotations

import re

from .conftest import needs_serve_extra

needs_serve_extra()


def _client():
    from fastapi.testclient import TestClient

    from headseg.serve.app import create_app
    from headseg.serve.host import ServeConfig

    return TestClient(create_app(ServeConfig()))  # no `with`: no lifespan, so no model loads


def test_issue35_item18_docs_page_is_self_contained():
    r = _client().get("/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    page = r.text
    assert "openapi.json" in page
    # no asset from elsewhere: no absolute URL in src/href, no CSS import, no fetch of another origin
    refs = re.findall(r"""(?:src|href)\s*=\s*["']([^"']*)["']""", page) + re.findall(r"@import\s+url\(([^)]*)\)", page)
    assert all(not re.match(r"(?i)^(https?:)?//", ref) for ref in refs), refs
    assert not re.search(r"(?i)https?://", page), re.findall(r"(?i)https?://\S+", page)


def test_issue35_item18_the_openapi_json_it_renders_is_served():
    client = _client()
    spec = client.get("/openapi.json").json()
    assert "/v1/segment" in spec["paths"]
    assert client.get("/redoc").status_code == 404  # ReDoc loaded its script from a CDN too: not offered
