"""The segmentation result type: segments with exact character offsets.

Invariant: segments tile the text, so ``"".join(s.text for s in seg) == seg.text``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Sequence

from .errors import HeadsegError


@dataclass(frozen=True)
class Segment:
    """``text[start:end]``; ``score`` is the strength of the boundary that *opens* it (0 for the first)."""

    start: int
    end: int
    text: str
    score: float = 0.0

    def to_dict(self) -> dict:
        return {"start": self.start, "end": self.end, "score": self.score, "text": self.text}


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
