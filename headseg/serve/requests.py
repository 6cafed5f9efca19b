"""What ``POST /v1/segment`` accepts: the body read within its limit, parsed and validated.

A body is a JSON object with either ``text`` (one document; the answer is one
JSON record) or ``documents``, a list of ``{"id", "text"}`` (the answer is
NDJSON, one record per document, in order), plus any of the command-line
segmentation options of :class:`~headseg.segmenter.options.SegmentOptions`
(``level``, ``segments``, ``min_chars``, ``max_chars``, ``max_tokens``,
``target_tokens``, ``penalty``).  Options that name a file or a callable
(``token_counter``, ``sentence_splitter``) are not accepted: a request never
makes the server open a path.  With ``overlap`` (the topic level), the answer's records are the
overlapped chunks, each with ``overlap_chars`` (what its text repeats of the segment before), as
``headseg segment --overlap`` writes them.  Every refusal is a :class:`RequestError` with a status and one line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any, AsyncIterator, Callable

from headseg.analysis.errors import HeadsegError, shown
from headseg.segmenter import options as segment_options
from headseg.segmenter.options import SegmentOptions

#: the options a request may set: those with a command-line flag of ``headseg segment``
HTTP_OPTIONS = tuple(f.name for f in fields(SegmentOptions) if "cli" in f.metadata)
#: how many unknown fields a refusal names (the rest are counted)
UNKNOWN_SHOWN = 5


def option_schema() -> dict[str, dict[str, Any]]:
    """The JSON Schema of each option a request may set, made from the options' fields
    (:func:`headseg.segmenter.options.option_schema`: the registered levels, the flags' help)."""
    return segment_options.option_schema(HTTP_OPTIONS)


def request_schema() -> dict[str, Any]:
    """The JSON Schema of a request body: ``text`` or ``documents``, and the options."""
    document = {"type": "object", "properties": {"id": {"type": ["string", "integer"]}, "text": {"type": "string"}},
                "required": ["text"], "additionalProperties": False}
    return {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "one document: the answer is one JSON record"},
            "documents": {"type": "array", "minItems": 1, "items": document,
                          "description": "several documents: the answer is NDJSON, in order"},
            **option_schema(),
        },
        "oneOf": [{"required": ["text"]}, {"required": ["documents"]}],
        "additionalProperties": False,
    }


class RequestError(Exception):
    """A refused request: HTTP ``status`` and a one-line ``reason``."""

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class SegmentRequest:
    """A validated request: document ids and texts, the options, and whether it was a list."""

    ids: list[str]
    texts: list[str]
    options: SegmentOptions
    many: bool

    @property
    def characters(self) -> int:
        """Characters over all documents."""
        return sum(len(t) for t in self.texts)


async def read_body(chunks: AsyncIterator[bytes], content_length: str | None, limit: int) -> bytes:
    """The body from ``chunks``, refusing (413) one announced or found to be over ``limit`` bytes."""
    if content_length is not None:
        try:
            announced = int(content_length)
        except ValueError:
            raise RequestError(400, "Content-Length is not a number") from None
        if announced > limit:
            raise RequestError(413, f"request body of {announced} bytes is over the limit of {limit}")
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > limit:
            raise RequestError(413, f"request body is over the limit of {limit} bytes")
    return bytes(body)


def parse_request(body: bytes, max_documents: int) -> SegmentRequest:
    """The :class:`SegmentRequest` in ``body``; :class:`RequestError` (422) naming the first problem."""
    if not body.strip():
        raise RequestError(422, "empty body: send a JSON object with 'text' or 'documents'")
    try:
        data = json.loads(body.decode("utf-8"), parse_int=_bounded(int), parse_float=_bounded(float))
    except UnicodeDecodeError as exc:
        raise RequestError(422, f"body is not valid UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise RequestError(422, f"body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") \
            from None
    except RecursionError:
        raise RequestError(422, "body is not valid JSON: nested too deeply") from None
    if not isinstance(data, dict):
        raise RequestError(422, f"body must be a JSON object, not {_kind(data)}")
    unknown = sorted(set(data) - {"text", "documents", *HTTP_OPTIONS})
    if unknown:
        # a name is echoed as it is unless long; a body of thousands of stray fields names the first few
        names = [u if len(u) <= 40 else shown(u) for u in unknown[:UNKNOWN_SHOWN]]
        more = f" and {len(unknown) - UNKNOWN_SHOWN} more" if len(unknown) > UNKNOWN_SHOWN else ""
        raise RequestError(422, f"unknown field(s): {', '.join(names)}{more} (options: {', '.join(HTTP_OPTIONS)})")
    if "text" not in data and "documents" not in data:
        raise RequestError(422, "'text' (one document) or 'documents' (a list) is required")
    if "text" in data and "documents" in data:
        raise RequestError(422, "give only one of 'text' (one document) or 'documents' (a list), not both")
    try:
        options = SegmentOptions.of({k: data[k] for k in HTTP_OPTIONS if k in data})
    except HeadsegError as exc:
        raise RequestError(422, str(exc)) from None
    if "text" in data:
        return SegmentRequest([""], [_text(data["text"], "text")], options, many=False)
    docs = data["documents"]
    if not isinstance(docs, list) or not docs:
        raise RequestError(422, "'documents' must be a non-empty list of {\"id\", \"text\"} objects")
    if len(docs) > max_documents:
        raise RequestError(422, f"{len(docs)} documents in one request; at most {max_documents}")
    ids, texts = [], []
    for i, d in enumerate(docs):
        if not isinstance(d, dict) or set(d) - {"id", "text"} or "text" not in d:
            raise RequestError(422, f"documents[{i}] must be an object with 'text' and optionally 'id'")
        doc_id = d.get("id", str(i))
        if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
            raise RequestError(422, f"documents[{i}].id must be a string or an integer, not {_kind(doc_id)}")
        ids.append(str(doc_id))
        texts.append(_text(d["text"], f"documents[{i}].text"))
    return SegmentRequest(ids, texts, options, many=True)


#: the most characters a JSON number may have: far past any option's range (the options name what is out of it), and
#: well below the 4,300 digits past which Python refuses to convert an integer string (a ValueError, not a JSON error)
MAX_NUMBER_CHARS = 1000


def _bounded(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    """``json.loads``' hook for one kind of number: its length bounded (422 past :data:`MAX_NUMBER_CHARS`)
    before ``convert`` sees it (``1e400`` becomes inf, which the options refuse by name)."""
    def parse(literal: str) -> Any:
        if len(literal) > MAX_NUMBER_CHARS:
            raise RequestError(422, f"a number of {len(literal)} characters in the body; numbers have at most "
                                    f"{MAX_NUMBER_CHARS}")
        return convert(literal)

    return parse


def _text(value: Any, where: str) -> str:
    """``value`` if it is a string of valid Unicode (no lone surrogates), else 422."""
    if not isinstance(value, str):
        raise RequestError(422, f"{where} must be a string, not {_kind(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise RequestError(422, f"{where} holds a lone surrogate (\\ud800-\\udfff escape)") from None
    return value


def _kind(value: Any) -> str:
    """The JSON type name of ``value``, for messages."""
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)
