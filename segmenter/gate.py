"""The gate: which of the search's boundaries the evidence keeps, and where the headings put them.

:func:`gate` removes the boundaries whose evidence (:mod:`~headseg.segmenter.evidence`) is below
``min_evidence`` or whose confidence is below ``min_confidence``, the weakest first, testing its
neighbours again beside their new, merged neighbours; first it asks whether the text has topics at
all (:func:`any_evidence`).  In Markdown the headings then decide where each kept boundary goes
(:func:`to_anchors`).  Cost: O(1) boundary tests per boundary, each O(reach · (draws · dims + D)), so
linear in the document's length.
"""

from __future__ import annotations

import heapq
import math
from typing import Callable, Sequence

import numpy as np

from headseg.analysis.errors import HeadsegError

from .evidence import (Directions, EvidenceInput, EvidenceParams, boundary_evidence, boundary_parts, confidence,
                       evidence_input, evidence_of)


def gate(x: np.ndarray, weights: np.ndarray | None, cuts: Sequence[int], min_evidence: float,
         min_confidence: float = 0.0, params: EvidenceParams | None = None,
         fits: Callable[[int, int], bool] | None = None, own: bool = False,
         came: Directions | None = None, anchors: Sequence[int] | None = None) -> tuple[list[int], list[float]]:
    """The boundaries ``cuts`` of unit vectors ``x [U, D]`` whose evidence and confidence are enough.

    A boundary is weak when its evidence ``z`` is below ``min_evidence`` or its confidence below
    ``min_confidence``; the weakest (by its larger shortfall) is removed first and its two
    neighbours tested again beside their new neighbours, until no weak boundary is left.
    ``weights [U]``: the units' weights in the scatter (None: equal); ``fits(a, b)``: whether units
    ``a..b−1`` may be one segment (the hard size limits; None: always) — a boundary whose removal
    would break them stays, however weak; ``own``: ``x`` is the caller's to change (:func:`project`).
    Returns the kept boundaries and each one's confidence beside its final neighbours.  Cost: one
    test per boundary and two per removal (:func:`boundary_z`); with ``anchors``, at most three more
    per boundary.

    First it asks whether the text has topics at all (:func:`any_evidence`); where none of the
    boundaries reaches ``min_evidence`` in its wide context, all are removed (where the limits allow).

    ``anchors``: the units where the text's structure opens a section (a Markdown heading).  The
    evidence decides *whether* a stretch has a boundary, the structure *where*: a kept boundary that
    is not at an anchor moves to the nearest anchor between its neighbours (:func:`to_anchors`) where
    the evidence and the limits hold there too, and the moved boundaries are weeded again (not with
    ``min_evidence`` −inf, where nothing is gated and the search's places stand).  Without
    it, a section whose heading the gate merged away could be cut in its middle instead (a Node.js
    API page: ``## assert.ifError(value)`` ended a chunk and its description opened the next).
    """
    params = params or EvidenceParams()
    cuts = [int(c) for c in cuts]
    n = len(x)
    if any(not 0 < c < n for c in cuts) or any(p >= q for p, q in zip(cuts, cuts[1:])):
        raise HeadsegError(f"boundaries must be increasing unit indices inside 1..{n - 1}")
    if not cuts:
        return [], []
    t = evidence_input(x, weights, params, own, came)
    # a text without evidence against its whole: every boundary goes (where the limits allow)
    whole = min_evidence == -math.inf or any_evidence(t, cuts, min_evidence, params)
    kept, sure = _weed(t, cuts, whole, min_evidence, min_confidence, params, fits)
    if anchors is not None and kept and min_evidence > -math.inf:  # -inf: no gate, the search placed them
        moved = to_anchors(t, kept, anchors, min_evidence, min_confidence, params, fits)
        if moved != kept:
            kept, sure = _weed(t, moved, whole, min_evidence, min_confidence, params, fits)
    return kept, sure


def _test(t: EvidenceInput, a: int, m: int, b: int, min_evidence: float, min_confidence: float,
          params: EvidenceParams) -> tuple[float, float, float]:
    """The boundary at ``m`` between ``a`` and ``b`` against the gate's two floors: its shortfall (negative:
    weak; in units of ``z`` for the evidence, of confidence for its floor), its evidence, its confidence."""
    parts = boundary_parts(t, a, m, b, params)
    z, sure = evidence_of(parts, params), confidence(parts, params)
    return min(z - min_evidence, sure - min_confidence), z, sure


def _weed(t: EvidenceInput, cuts: list[int], whole: bool, min_evidence: float, min_confidence: float,
          params: EvidenceParams, fits: Callable[[int, int], bool] | None) -> tuple[list[int], list[float]]:
    """:func:`gate`'s removal of weak boundaries, the weakest first (``whole`` False: every one is weak)."""
    edges = [0, *cuts, len(t.y)]
    prev = list(range(-1, len(edges) - 1))
    nxt = list(range(1, len(edges) + 1))
    alive = [True] * len(edges)
    sure = [1.0] * len(edges)
    version = [0] * len(edges)

    def test(i: int) -> float:
        """Test boundary ``i`` beside its neighbours (:func:`_test`): keep its confidence, return its shortfall."""
        margin, _, sure[i] = _test(t, edges[prev[i]], edges[i], edges[nxt[i]], min_evidence, min_confidence, params)
        return margin if whole else min(margin, 0.0) - 1e6

    heap = []
    for i in range(1, len(edges) - 1):
        heapq.heappush(heap, (test(i), i, 0))
    while heap:
        margin, i, v = heapq.heappop(heap)
        if not alive[i] or v != version[i]:
            continue  # removed, or tested again since
        if margin >= 0:
            break  # the weakest boundary left is strong enough: so are all the others
        if fits is not None and not fits(edges[prev[i]], edges[nxt[i]]):
            continue  # the hard limits need it: it stays
        alive[i] = False
        p, q = prev[i], nxt[i]
        nxt[p], prev[q] = q, p
        for j in (p, q):
            if 0 < j < len(edges) - 1 and alive[j]:
                version[j] += 1
                heapq.heappush(heap, (test(j), j, version[j]))
    kept = [i for i in range(1, len(edges) - 1) if alive[i]]
    return [edges[i] for i in kept], [float(sure[i]) for i in kept]


def to_anchors(t: EvidenceInput, cuts: Sequence[int], anchors: Sequence[int], min_evidence: float,
               min_confidence: float, params: EvidenceParams,
               fits: Callable[[int, int], bool] | None = None) -> list[int]:
    """``cuts`` (increasing, each kept by the evidence), each one not at an anchor moved to the nearest
    anchor between its neighbours where a boundary passes there too.

    For boundary ``m`` between ``a`` and ``b`` (the one before already moved, left to right), the
    candidates are the nearest anchor before ``m`` (the one opening the section ``m`` cuts) and the
    nearest after it, both inside ``(a, b)``; one passes where its evidence and confidence between
    ``a`` and ``b`` reach ``min_evidence`` and ``min_confidence`` and both segments fit (``fits``).  Of
    those that pass, the nearer to ``m`` wins (at equal distance the stronger).  Cost: at most two
    tests per boundary and O(log A) to find them among ``A`` anchors.
    """
    marks = np.unique(np.asarray(anchors, dtype=np.int64).reshape(-1))
    out = [int(c) for c in cuts]
    n = len(t.y)
    for i, m in enumerate(out):
        a = out[i - 1] if i else 0
        b = out[i + 1] if i + 1 < len(out) else n
        j = int(np.searchsorted(marks, m))
        if j < len(marks) and marks[j] == m:
            continue  # already where a section opens
        best = None
        for h in (int(marks[j - 1]) if j else -1, int(marks[j]) if j < len(marks) else n):
            if not a < h < b or (fits is not None and not (fits(a, h) and fits(h, b))):
                continue
            margin, z, _ = _test(t, a, h, b, min_evidence, min_confidence, params)
            if margin < 0:
                continue
            key = (abs(h - m), -z)
            if best is None or key < best[0]:
                best = (key, h)
        if best is not None:
            out[i] = best[1]
    return out


def any_evidence(t: EvidenceInput, cuts: Sequence[int], min_evidence: float, params: EvidenceParams) -> bool:
    """Whether any of ``cuts`` reaches ``min_evidence`` in a wide context: between the boundaries two
    away on each side (the text's ends where there are none), its units within ``params.reach``.

    A text of one subject whose paragraph cuts each stand out beside the next paragraph (three units
    against three) shows no evidence against the paragraphs around them; a text of several topics
    does, or one of its boundaries is sure (``params.sure``) beside its own neighbours, as where the
    topics come back (A B A C B C: each wide context holds one topic on both sides).
    Cost: one test per boundary, stopping at the first that reaches it.
    """
    edges, last = [0, *cuts, len(t.y)], len(cuts) + 1
    return any(boundary_evidence(t, edges[max(i - 2, 0)], edges[i], edges[min(i + 2, last)], params)[0] >= min_evidence
               or boundary_evidence(t, edges[i - 1], edges[i], edges[i + 1], params)[0] >= max(params.sure, min_evidence)
               for i in range(1, last))


def confidences(x: np.ndarray, weights: np.ndarray | None, cuts: Sequence[int],
                params: EvidenceParams | None = None, came: Directions | None = None) -> list[float]:
    """The confidence of each boundary of ``cuts`` beside its neighbours (none removed; ``came``: as :func:`gate`)."""
    return gate(x, weights, cuts, -math.inf, 0.0, params, came=came)[1]


__all__ = ("any_evidence", "confidences", "gate", "to_anchors")
