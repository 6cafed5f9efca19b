"""What one search is asked for: the hard limits, the size target, the number of segments, the penalty and its scale.

The levels and the topic search read a :class:`SearchRequest`, never the whole
:class:`~headseg.segmenter.options.SegmentOptions`: the options make one
(:meth:`SegmentOptions.request <headseg.segmenter.options.SegmentOptions.request>`),
and a segment tree derives one per scale (larger limits, a larger penalty
scale, no size target above the leaves).  A level's own options (``overlap``,
``depth``) are not the search's: the level reads them from its
:class:`~headseg.segmenter.levels.LevelContext`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from headseg.analysis.errors import HeadsegError, shown

#: the size target when only ``max_tokens`` is given: ``target_tokens = TARGET_FRACTION · max_tokens``
#: (chosen on the dev retrieval corpora, docs/segmenter.md)
TARGET_FRACTION = 0.6


#: under the size target ``max_tokens`` implies, a boundary of the untargeted search whose evidence reaches
#: this many standard deviations stays, whatever the target (docs/segmenter.md, "Boundaries as evidence")
KEEP_APART = 3.0
#: ... and so does one whose confidence reaches this while its evidence passes the gate
#: (``TopicParams.min_evidence``; ``apart.kept_apart``): a short text's paragraphs of two sentences each
#: cannot reach 3 standard deviations among six units (three unrelated ones of 140 tokens: z 1.2 and 1.6,
#: confidence 0.872 and 0.964), and were one chunk under ``max_tokens=256``
KEEP_APART_CONFIDENCE = 0.85
#: ... in place of the target's nearest cut when that lies within this share of the target (in tokens),
#: so that the chunks stay about as many as the target's (``apart.keep_apart``, ``benchmarks.keep_apart``)
KEEP_APART_MOVE = 0.5


def default_target(max_tokens: float | None) -> float | None:
    """The size target of ``max_tokens`` alone: :data:`TARGET_FRACTION` of it (None without a limit)."""
    return None if max_tokens is None else TARGET_FRACTION * max_tokens


@dataclass(frozen=True)
class SearchRequest:
    """The search's inputs beyond the document and its vectors (all optional: None is "not set").

    ``max_chars``/``max_tokens``: hard limits never exceeded; ``min_chars``: a soft lower bound;
    ``target_tokens``: the soft size target in ``max_tokens``' units (the effective one:
    :attr:`SegmentOptions.size_target <headseg.segmenter.options.SegmentOptions.size_target>`);
    ``segments``: exactly that many segments instead of the penalised optimum; ``penalty``:
    overrides :attr:`TopicParams.penalty <headseg.segmenter.topics.TopicParams.penalty>`;
    ``scale``: every segment pays ``scale · β`` (a segment tree's coarser levels);
    ``min_confidence``: the confidence a boundary needs to be kept; ``keep_apart``: under a size
    target, the evidence that keeps a boundary of the untargeted search.
    Raises :class:`HeadsegError` on a value of the wrong kind (the options validated the user's).
    """

    max_chars: int | None = None
    min_chars: int | None = None
    max_tokens: int | None = None
    target_tokens: float | None = None
    segments: int | None = None
    penalty: float | None = None
    scale: float = 1.0
    #: the confidence a boundary needs to be kept (None: the topic search's own,
    #: :attr:`TopicParams.min_confidence <headseg.segmenter.topics.TopicParams.min_confidence>`)
    min_confidence: float | None = None
    #: under a size target: the boundaries of the same search without the target whose evidence reaches
    #: this (and whose confidence reaches ``min_confidence``) stay, whatever the target (None: the target
    #: alone decides, as with an explicit one)
    keep_apart: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_chars", "min_chars", "max_tokens", "segments"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1):
                raise HeadsegError(f"a search request's {name} must be a positive integer (got {shown(v)})")
        for name in ("target_tokens", "penalty"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v)
                                  or v < 0):
                raise HeadsegError(f"a search request's {name} must be a finite number from 0 (got {shown(v)})")
        c = self.min_confidence
        if c is not None and (isinstance(c, bool) or not isinstance(c, numbers.Real) or not 0 <= c <= 1):
            raise HeadsegError(f"a search request's min_confidence must be a number from 0 to 1 (got {shown(c)})")
        k = self.keep_apart
        if k is not None and (isinstance(k, bool) or not isinstance(k, numbers.Real) or not math.isfinite(k)):
            raise HeadsegError(f"a search request's keep_apart must be a finite number (got {shown(k)})")
        s = self.scale
        if isinstance(s, bool) or not isinstance(s, numbers.Real) or not 0 < s < math.inf:
            raise HeadsegError(f"a search request's scale must be a positive number (got {shown(s)})")


__all__ = ("KEEP_APART", "KEEP_APART_CONFIDENCE", "KEEP_APART_MOVE", "SearchRequest", "TARGET_FRACTION", "default_target")
