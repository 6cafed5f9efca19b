"""The segmentation result type: segments with exact character offsets.

Invariant: segments tile the text, so ``"".join(s.text for s in seg) == seg.text``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterator, Sequence

from .errors import HeadsegError


#: the fields of one segment record (:meth:`Segmentation.to_records`), in output order
RECORD_FIELDS = ("document", "index", "start", "end", "score", "text", "token_count", "headings")

@dataclass(frozen=True)
class Segment:
    """``text[start:end]``; ``score`` is the strength of the boundary that *opens* it (0 for the first).

    ``token_count``: the segment's size in the tokens its ``max_tokens`` limit is
    measured in: the ``token_counter``'s when one was given, else the segmenter
    model's (a token of the document belongs to the segment its first character
    falls in).  None when the segment was not made by a segmenter.
    ``headings``: the titles of the headings above the segment's start, outermost first
    (a heading it opens with included; empty in plain text); metadata, never part of ``text``.
    """

    start: int
    end: int
    text: str
    score: float = 0.0
    token_count: int | None = None
    headings: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        """The segment as a JSON-ready dict (start, end, score, text, token_count, headings)."""
        return {"start": self.start, "end": self.end, "score": self.score, "text": self.text,
                "token_count": self.token_count, "headings": list(self.headings)}


@dataclass
class Segmentation:
    """An ordered list of segments covering ``text`` exactly."""

    text: str
    segments: list[Segment]
    level: str = "topic"
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        pos = 0
        for s in self.segments:
            if s.start != pos or s.end < s.start or self.text[s.start : s.end] != s.text:
                raise HeadsegError(f"segments do not tile the text at offset {pos}")
            pos = s.end
        if pos != len(self.text):
            raise HeadsegError(f"segments end at {pos}, the text at {len(self.text)}")

    def __iter__(self) -> Iterator[Segment]:
        return iter(self.segments)

    def __len__(self) -> int:
        return len(self.segments)

    def __getitem__(self, i):
        return self.segments[i]

    def to_dict(self, document: str | None = None) -> dict:
        """The JSON record of ``headseg segment --format json`` (the one definition of that schema).

        ``{"document", "level", "segments": [{"index", "start", "end", "score", "text",
        "token_count", "headings"}]}``; scores are rounded to 6 decimals.  ``document`` defaults
        to the id the segmentation carries (``meta["document"]``, set by ``Segmenter.iter_segment``
        for a record or an ``(id, text)`` pair).
        """
        return {
            "document": self.meta.get("document") if document is None else document,
            "level": self.level,
            "segments": [
                {"index": i, "start": s.start, "end": s.end, "score": round(s.score, 6), "text": s.text,
                 "token_count": s.token_count, "headings": list(s.headings)}
                for i, s in enumerate(self.segments)
            ],
        }

    def to_records(self, document: str | None = None) -> list[dict]:
        """One flat record per segment (``--format jsonl``): :meth:`to_dict`'s segments with ``document`` in each."""
        doc = self.to_dict(document)
        return [{"document": doc["document"], **r} for r in doc["segments"]]

    def to_json(self, document: str | None = None, indent: int | None = None) -> str:
        """:meth:`to_dict` as JSON text (non-ASCII kept as is)."""
        return json.dumps(self.to_dict(document), indent=indent, ensure_ascii=False)

    @classmethod
    def from_dict(cls, record: dict) -> "Segmentation":
        """Rebuild from a :meth:`to_dict` record (the text is the segments' texts joined)."""
        try:
            items = sorted(record["segments"], key=lambda r: r["index"])
            text = "".join(r["text"] for r in items)
            segs = [Segment(int(r["start"]), int(r["end"]), r["text"], float(r["score"]), r.get("token_count"),
                            tuple(str(h) for h in (r.get("headings") or ()))) for r in items]
            level = record.get("level", "topic")
        except (KeyError, TypeError, ValueError) as exc:
            raise HeadsegError(f"not a segmentation record: {type(exc).__name__}: {exc}") from None
        return cls(text=text, segments=segs, level=level)

    @property
    def boundaries(self) -> list[int]:
        """Character offsets where a new segment starts (excluding 0)."""
        return [s.start for s in self.segments[1:]]

    @classmethod
    def from_boundaries(
        cls,
        text: str,
        boundaries: Sequence[int],
        scores: Sequence[float] | None = None,
        level: str = "topic",
        meta: dict | None = None,
    ) -> "Segmentation":
        """Build from the start offsets of segments 2..n (sorted, inside ``(0, len(text))``)."""
        cuts = [int(b) for b in boundaries]
        if any(b <= 0 or b >= len(text) for b in cuts) or cuts != sorted(set(cuts)):
            raise HeadsegError("boundaries must be sorted, unique and inside the text")
        scores = list(scores) if scores is not None else [1.0] * len(cuts)
        if len(scores) != len(cuts):
            raise HeadsegError("one score per boundary")
        starts = [0] + cuts
        ends = cuts + [len(text)]
        segs = [
            Segment(a, b, text[a:b], float(0.0 if i == 0 else scores[i - 1]))
            for i, (a, b) in enumerate(zip(starts, ends))
        ]
        if not text:
            segs = []
        return cls(text=text, segments=segs, level=level, meta=dict(meta or {}))
