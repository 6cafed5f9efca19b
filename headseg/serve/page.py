"""The viewer page at ``GET /`` and the API page at ``GET /docs``: plain HTML and JavaScript (``static/``), no build step.

Paste a text (the page opens with the bundled sample, :func:`headseg.sample_text`,
and its "Sample" button loads it again), choose the options (a field per option a
request takes, made from their schema), segment it through ``POST /v1/segment``, and
see the segments, each boundary's strength (its ``confidence`` where the records
carry one, else its ``score``), and a plot of boundary strength along the text
(inline SVG) under the headings the segments open.  Both pages carry their icon
inline (:data:`ICON`), so a browser asks for no ``/favicon.ico``.
"""

from __future__ import annotations

import base64
import json
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping


#: the pages' icon: three boundary bars, inline as a data: URI (base64, so the page holds no "http://")
ICON = "data:image/svg+xml;base64," + base64.b64encode(
    b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
    b'fill="#1d2330"/><rect x="3" y="8" width="2" height="5" fill="#3b6fd8"/><rect x="7" y="3" width="2" '
    b'height="10" fill="#d8743b"/><rect x="11" y="6" width="2" height="7" fill="#2f9e6e"/></svg>').decode("ascii")


def _static(name: str) -> str:
    return resources.files(__package__).joinpath("static").joinpath(name).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def _template() -> tuple[str, str]:
    """The page with its icon, and the sample it opens with: read once, not per ``GET /``."""
    from headseg import sample_text

    return _static("index.html").replace("{{ICON}}", ICON), sample_text()


def docs_html() -> str:
    """The API page at ``GET /docs`` (``static/docs.html``): it lists ``/openapi.json`` with its own script, no
    asset from elsewhere (Swagger UI's come from a CDN, and the service runs offline)."""
    return _static("docs.html").replace("{{ICON}}", ICON)


def page_html(options: Mapping[str, Mapping[str, Any]], needs_key: bool) -> str:
    """The page, told the options a request takes (their JSON Schema: the form is made from it),
    whether an API key is needed, and the sample text it opens with."""
    page, sample = _template()
    # "<" escaped: the options' help and the sample are text, and "</script>" in them must not end the block
    config = json.dumps({"options": dict(options), "needsKey": bool(needs_key), "sample": sample})
    return page.replace("{{CONFIG}}", config.replace("<", "\\u003c"))
