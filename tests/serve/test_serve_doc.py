"""Issue 49 item 14: docs/serve.md's list of request options is the schema the service validates with.

The table between the ``options`` markers in docs/serve.md is made from
:func:`headseg.serve.requests.option_schema` (the schema of ``/openapi.json``
and of the viewer's form); the test fails when they differ.  Rewrite it with
``python -m tests.serve.test_serve_doc --write-doc`` from the repository root.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "serve.md"
BEGIN = "<!-- options: made from headseg.serve.requests.option_schema(); python -m tests.serve.test_serve_doc --write-doc -->\n"
END = "<!-- /options -->\n"

#: JSON Schema's MAX_COUNT (2**53) written as people read it
_BIG = {2 ** 53: "2**53"}


def _number(value) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return _BIG.get(value, f"{value:,}")


def options_table() -> str:
    """The Markdown table of the request options: name, accepted values, default, meaning."""
    from headseg.serve.requests import option_schema

    rows = ["| option | values | default | meaning |", "|---|---|---|---|"]
    for name, spec in option_schema().items():
        if "enum" in spec:
            values = ", ".join(f"`{v}`" for v in spec["enum"])
        else:
            values = f"{spec['type']} {_number(spec['minimum'])} to {_number(spec['maximum'])}"
        default = f"`{spec['default']}`" if "default" in spec else "none"
        meaning = spec.get("description", "").replace("|", "\\|")
        rows.append(f"| `{name}` | {values} | {default} | {meaning} |")
    return "\n".join(rows) + "\n"


def documented() -> str:
    text = DOC.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise ValueError(f"{DOC} has no options markers")
    return text[text.index(BEGIN) + len(BEGIN):text.index(END)]


def test_the_documented_options_are_the_schema():
    assert documented() == options_table(), \
        "docs/serve.md's option table is stale: python -m tests.serve.test_serve_doc --write-doc"


def test_the_table_names_every_option_and_value_a_request_accepts():
    """Read back without the generator: the names are those the request parser accepts, the levels and
    structures those the options' validation accepts (the registries themselves)."""
    from headseg.segmenter.levels import level_names
    from headseg.segmenter.structure import STRUCTURES
    from headseg.serve.requests import HTTP_OPTIONS

    rows = {m[0]: m[1] for m in re.findall(r"^\| `([a-z_]+)` \| ([^|]*) \|", documented(), flags=re.M)}
    assert list(rows) == list(HTTP_OPTIONS)
    assert re.findall(r"`([a-z]+)`", rows["level"]) == list(level_names())
    assert re.findall(r"`([a-z]+)`", rows["structure"]) == list(STRUCTURES)


if __name__ == "__main__" and sys.argv[1:] == ["--write-doc"]:
    text = DOC.read_text(encoding="utf-8")
    DOC.write_text(text[:text.index(BEGIN) + len(BEGIN)] + options_table() + text[text.index(END):], encoding="utf-8")
