"""The viewer page at ``GET /`` and the API page at ``GET /docs``: plain HTML and JavaScript (``static/``), no build step.

Paste a text, choose the options (a field per option a request takes, made
from their schema), segment it through ``POST /v1/segment``, and see the segments,
each boundary's score, and a plot of boundary strength along the text (inline SVG).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping


def _static(name: str) -> str:
    return resources.files(__package__).joinpath("static").joinpath(name).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def _template() -> str:
    return _static("index.html")


def docs_html() -> str:
    """The API page at ``GET /docs`` (``static/docs.html``): it lists ``/openapi.json`` with its own script, no
    asset from elsewhere (Swagger UI's come from a CDN, and the service runs offline)."""
    return _static("docs.html")


def page_html(options: Mapping[str, Mapping[str, Any]], needs_key: bool) -> str:
    """The page, told the options a request takes (their JSON Schema: the form is made from it) and
    whether an API key is needed."""
    # "<" escaped: the options' help is text, and "</script>" in it must not end the data block
    config = json.dumps({"options": dict(options), "needsKey": bool(needs_key)}).replace("<", "\\u003c")
    return _template().replace("{{CONFIG}}", config)
