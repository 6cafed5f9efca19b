"""The viewer page at ``GET /``: plain HTML and JavaScript (``static/index.html``), no build step.

Paste a text, segment it through ``POST /v1/segment``, and see the segments,
each boundary's score, and a plot of boundary strength along the text (inline SVG).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Sequence


@lru_cache(maxsize=1)
def _template() -> str:
    return resources.files(__package__).joinpath("static").joinpath("index.html").read_text(encoding="utf-8")


def page_html(options: Sequence[str], needs_key: bool) -> str:
    """The page, told which options a request takes and whether an API key is needed."""
    config = json.dumps({"options": list(options), "needsKey": bool(needs_key)})
    # "</" cannot occur in config's JSON of option names; the page reads it from a data block
    return _template().replace("{{CONFIG}}", config)
