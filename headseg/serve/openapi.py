"""The service's OpenAPI description: the package's version, and named schemas for what goes in and out.

FastAPI derives ``/openapi.json`` from the routes; the body of ``POST
/v1/segment`` is read and validated by the service itself
(:mod:`.requests`), so FastAPI sees no model and lists no schema.
:func:`install` names them under ``components/schemas``: ``SegmentRequest``
(:func:`~.requests.request_schema`, the schema the form and the docs are made
from), ``Segmentation`` (the answer: ``Segmentation.to_dict()``'s record, with
its ``Segment`` and ``TreeNode``, made from the one record schema,
``RECORD_SCHEMA``), ``DocumentError`` (a failed document's
NDJSON line) and ``Refusal`` (``{"error": ...}``), and refers to them from the
operation, so ``/docs`` shows them and a client generator can use them.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from .requests import request_schema

#: the components every path refers to, by name
REF = "#/components/schemas/"

#: what each record field means, for the schema's descriptions (the fields and their types are
#: :data:`~headseg.analysis.segments.RECORD_SCHEMA`'s)
MEANINGS = {
    "document": "the document's id (null for one text)",
    "index": "its number among the segments",
    "start": "first character (Python string index)",
    "end": "one past the last character: text == document[start:end]",
    "score": "strength of the boundary that opens it (0 at the text's start; rounded to 6 decimals)",
    "confidence": "calibrated probability, from 0.01 to 0.99, that the boundary opening it is a topic boundary "
                  "(null at the text's start and for units; to 3 decimals)",
    "text": "the characters [start, end) of the document",
    "token_count": "model tokens in it",
    "headings": "the Markdown headings it lies under, outermost first (empty in plain text)",
    "id": "the node's number in the document, pre-order",
    "parent": "the id of its tree node's parent (null: depth 1)",
    "depth": "1 for the document's children",
    "overlap_chars": "with overlap: characters at the start of text that repeat the segment before "
                     "(the segment is text[overlap_chars:]); null without overlap",
}

_JSON_TYPES = {str: "string", int: "integer", float: "number", list: "array"}


def _field(f) -> dict[str, Any]:
    """The JSON Schema of one :class:`~headseg.analysis.segments.RecordField`."""
    kind = _JSON_TYPES[f.type]
    prop: dict[str, Any] = {"type": [kind, "null"] if f.optional else kind}
    if f.type is list:
        prop["items"] = {"type": "string"}  # the one list field, headings: strings
    if f.name in MEANINGS:
        prop["description"] = MEANINGS[f.name]
    return prop


def record_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schemas of an answer: ``Segmentation`` (one record), ``Segment``, ``TreeNode``,
    ``DocumentError`` and ``Refusal``, referring to each other under :data:`REF`; a segment's and a
    node's fields are :data:`~headseg.analysis.segments.RECORD_SCHEMA`'s (a node: ``TREE_FIELDS``)."""
    from headseg.analysis.segments import RECORD_SCHEMA, TREE_FIELDS
    from headseg.segmenter.levels import level_names

    def obj(properties: dict, description: str, required: list[str] | None = None) -> dict:
        return {"type": "object", "description": description, "properties": properties,
                "required": list(properties) if required is None else required, "additionalProperties": False}

    fields = {f.name: _field(f) for f in RECORD_SCHEMA}
    # the document's id is the record's own, not each segment's (to_dict)
    segment = obj({name: prop for name, prop in fields.items() if name != "document"},
                  "one segment; the segments tile the document")
    node = obj({**{name: fields[name] for name in TREE_FIELDS},
                "children": {"type": "array", "items": {"$ref": REF + "TreeNode"},
                             "description": "its parts, tiling it (empty: a leaf, one of the segments)"}},
               "one node of a segment tree (level tree)")
    record = obj({
        "document": fields["document"],
        "level": {"type": "string", "enum": list(level_names()), "description": "the level asked for"},
        "segments": {"type": "array", "items": {"$ref": REF + "Segment"},
                     "description": "the segments in order (for a tree: its leaves)"},
        "tree": {"type": "array", "items": {"$ref": REF + "TreeNode"},
                 "description": "level tree only: the document's children, nested"},
    }, "the answer for one document: Segmentation.to_dict(), as headseg segment --format json writes it",
        required=["document", "level", "segments"])
    failed = obj({"document": {"type": "string", "description": "the document's id"},
                  "error": {"type": "string", "description": "why it failed, one line"}},
                 "a document that failed, as its line in an NDJSON answer (the others are answered)")
    refusal = obj({"error": {"type": "string", "description": "why, one line"}}, "every refusal, whatever its status")
    return {"Segmentation": record, "Segment": segment, "TreeNode": node, "DocumentError": failed,
            "Refusal": refusal}


def describe(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` (FastAPI's OpenAPI dict) with the named schemas in it and ``POST /v1/segment`` referring to
    them: its body, its answers (JSON for ``text``, NDJSON for ``documents``) and its refusals."""
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    schemas.update({"SegmentRequest": request_schema(), **record_schemas()})
    op = spec["paths"]["/v1/segment"]["post"]
    # headseg serve's own 400 (refusals.http_protocol), answered before the app sees the request
    op.setdefault("responses", {}).setdefault("400", {"description": "not an HTTP/1.1 request it can parse"})
    op["requestBody"] = {"required": True, "content": {"application/json": {"schema": {"$ref": REF + "SegmentRequest"}}}}
    for status, answer in op["responses"].items():
        if status == "200":
            answer["content"] = {
                "application/json": {"schema": {"$ref": REF + "Segmentation"}},
                "application/x-ndjson": {"schema": {
                    "description": "one line per document, in input order",
                    "oneOf": [{"$ref": REF + "Segmentation"}, {"$ref": REF + "DocumentError"}]}}}
        else:
            answer["content"] = {"application/json": {"schema": {"$ref": REF + "Refusal"}}}
    return spec


def install(app: FastAPI) -> None:
    """Make ``app``'s OpenAPI say the package's version and carry the named schemas (:func:`describe`)."""
    from headseg import __version__

    app.version = __version__
    plain = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:  # FastAPI caches the spec there: described once
            app.openapi_schema = describe(plain())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
