"""A size target never glues two subjects (issue 48): which boundaries it must keep, and where.

Under ``max_tokens`` alone the search runs with a size target and once without it; a boundary of the
search without a target whose evidence reaches ``request.keep_apart``, or whose confidence is high and
evidence passes the gate (:func:`kept_apart`), is one the target must not merge away.
:func:`keep_apart` puts those into the target's cuts, moving the target's nearest cut where that keeps
the chunks about as many (docs/segmenter.md, "Boundaries as evidence"; ``python -m
benchmarks.keep_apart`` measures the alternatives).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np

from .evidence import EvidenceParams, boundary_evidence, evidence_input
from .request import KEEP_APART_CONFIDENCE, KEEP_APART_MOVE, SearchRequest


def kept_apart(x: np.ndarray, weights: np.ndarray | None, free: Sequence[int], free_confidence: Sequence[float],
               request: SearchRequest, params: EvidenceParams | None = None, min_evidence: float = 0.0) -> list[int]:
    """The boundaries of ``free`` a size target must not merge away: those whose evidence beside their
    neighbours reaches ``request.keep_apart``, or reaches ``min_evidence`` (the gate's own threshold) with a
    confidence of at least :data:`~headseg.segmenter.request.KEEP_APART_CONFIDENCE`; each at or above
    ``request.min_confidence`` where given.  The confidence alone is not enough: it is a share pooled over
    the dev families, and a boundary the gate would remove for want of evidence is not one a target must
    keep (with the calibration before, whose length term made any boundary between segments of a unit or
    two a sure one, such boundaries kept apart made chunks of single sentences under a budget of two).
    Cost: one test per boundary."""
    p = params or EvidenceParams()
    t = evidence_input(x, weights, p)
    edges, floor = [0, *free, len(x)], request.min_confidence or 0.0
    out = []
    for i, (c, s) in enumerate(zip(free, free_confidence), start=1):
        s = 0.0 if s is None else float(s)
        if s < floor:
            continue
        z = boundary_evidence(t, edges[i - 1], c, edges[i + 1], p)[0]
        if z >= request.keep_apart or (z >= min_evidence and s >= KEEP_APART_CONFIDENCE):
            out.append(int(c))
    return out


def keep_apart(x: np.ndarray, weights: np.ndarray | None, tokens, found: Sequence[int], free: Sequence[int],
               free_confidence: Sequence[float], request: SearchRequest, params: EvidenceParams | None = None,
               spans: Sequence[tuple[int, int]] | None = None, min_evidence: float = 0.0) -> list[int]:
    """The size target's cuts ``found`` (unit indices) with those of ``free`` (the search without a target,
    their confidences ``free_confidence``) that the target must never merge away (:func:`kept_apart`).

    ``x [U, D]``: the unit vectors; ``weights [U]``: the units' weights in the scatter (None: equal);
    ``tokens [U]``: their token counts; ``spans``: their character spans (for ``request.max_chars``).
    Each boundary kept apart that the target did not cut at takes the place of the target's nearest cut
    when that lies within :data:`~headseg.segmenter.request.KEEP_APART_MOVE` of a target (in tokens), is
    not itself kept apart, and the two chunks it then closes stay within ``request.max_tokens`` and
    ``request.max_chars``; otherwise it is added.  A moved cut merges only across a boundary the evidence
    does not hold, and the chunks stay about as many as the target's: adding every one made 144 chunks of
    the retrieval set at 512 tokens against 117 and cost 1.7 points of recall, moving them 125 and 0.6.
    Returns the sorted cuts.  Cost: the tests of ``free``'s boundaries, then O(B) per boundary kept (B the
    target's cuts).
    """
    if request.target_tokens is None or request.keep_apart is None:
        raise ValueError("keep_apart needs a request with a size target and a keep_apart level")
    sure = kept_apart(x, weights, free, free_confidence, request, params, min_evidence)
    cuts = [int(c) for c in found]
    if set(sure) <= set(cuts):
        return cuts
    kept = set(sure)
    at = np.concatenate([[0], np.cumsum(np.asarray(tokens, dtype=np.float64))])
    chars = None if spans is None or request.max_chars is None else [a for a, _ in spans] + [spans[-1][1]]
    slack = KEEP_APART_MOVE * float(request.target_tokens)

    def fits(a: int, b: int) -> bool:  # units a..b-1 as one chunk within the hard limits
        return ((request.max_tokens is None or at[b] - at[a] <= request.max_tokens)
                and (chars is None or chars[b] - chars[a] <= request.max_chars))

    for c in sure:
        i = bisect.bisect_left(cuts, c)
        if i < len(cuts) and cuts[i] == c:
            continue
        edges = [0, *cuts, len(at) - 1]  # cuts[i - 1] < c < cuts[i], so edges[i] < c < edges[i + 1]
        near = sorted((abs(at[c] - at[cuts[j]]), j) for j in (i - 1, i)
                      if 0 <= j < len(cuts) and cuts[j] not in kept and abs(at[c] - at[cuts[j]]) <= slack)
        for _, j in near:
            # cuts[j] goes: its two chunks edges[j]..edges[j + 2] are one again, then cut at c
            if fits(edges[j], c) and fits(c, edges[j + 2]):
                cuts[j] = c
                break
        else:
            cuts.insert(i, c)
    return cuts


__all__ = ("keep_apart", "kept_apart")
