"""Segmentation metrics over reference units, implemented once.

A segmentation of ``n`` units is the set of unit indices that *open* a new
segment, each in ``1..n-1`` (unit 0 always opens the first segment).  The gap
between units ``i-1`` and ``i`` is gap ``i-1``; there are ``n-1`` gaps.

Conventions (see docs/evaluation.md):

* window ``k`` = half the mean reference segment length, ``round(n / (2 *
  segments))`` with Python's round-half-to-even, at least 2 -- exactly what
  segeval computes by default -- then capped at ``n - 1`` so that a document
  shorter than the window still has one probe (segeval and NLTK would give an
  empty sum or a division by zero there);
* Pk (Beeferman et al. 1999) and WindowDiff (Pevzner & Hearst 2002) probe the
  ``n - k`` unit pairs ``(i, i + k)``; for a single unit both are 0;
* boundary similarity B (Fournier 2013) with segeval's defaults: transpositions
  of at most ``n_t - 1 = 1`` position, weighted by their span over ``n_t``; B is
  1 when neither side has a boundary (segeval raises there);
* boundary precision/recall/F1, exact and with a tolerance (a one-to-one
  matching of boundaries at most ``tolerance`` units apart).  A ratio with an
  empty denominator is 1 when the other side is empty too, else 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

from headseg.analysis.errors import InputError

METRIC_NAMES = ("pk", "windowdiff", "b", "precision", "recall", "f1", "precision_1", "recall_1", "f1_1")


def normalise_boundaries(boundaries: Iterable[int], n: int) -> list[int]:
    """Sorted unique unit indices in ``1..n-1``; anything else is an error."""
    out = sorted({int(b) for b in boundaries})
    bad = [b for b in out if b < 1 or b >= n]
    if bad:
        raise InputError(f"boundary {bad[0]} is outside 1..{n - 1} for a document of {n} units")
    return out


def gap_vector(boundaries: Sequence[int], n: int) -> list[int]:
    """0/1 per gap ``[n-1]``: 1 where the next unit opens a segment (NLTK's string form, as a list)."""
    v = [0] * max(n - 1, 0)
    for b in boundaries:
        v[b - 1] = 1
    return v


def segment_labels(boundaries: Sequence[int], n: int) -> list[int]:
    """Segment index of every unit ``[n]`` (segeval's "positions" form)."""
    labels = []
    seg = 0
    bset = set(boundaries)
    for i in range(n):
        if i in bset:
            seg += 1
        labels.append(seg)
    return labels


def masses(boundaries: Sequence[int], n: int) -> list[int]:
    """Segment lengths in units (segeval's "masses" form)."""
    starts = [0, *boundaries, n]
    return [b - a for a, b in zip(starts, starts[1:])]


def window_size(ref_boundaries: Sequence[int], n: int) -> int:
    """Half the mean reference segment length, rounded half-to-even, at least 2, at most ``n - 1``."""
    if n <= 1:
        return 1
    k = max(2, round(n / (2 * (len(ref_boundaries) + 1))))
    return min(k, n - 1)


def pk(ref: Sequence[int], hyp: Sequence[int], n: int, k: int) -> float:
    """Probability that units ``k`` apart are wrongly judged same/different segment."""
    if n <= 1:
        return 0.0
    if not 1 <= k <= n - 1:
        raise InputError(f"window k={k} must be in 1..{n - 1}")
    r = segment_labels(ref, n)
    h = segment_labels(hyp, n)
    errors = sum((r[i] == r[i + k]) != (h[i] == h[i + k]) for i in range(n - k))
    return errors / (n - k)


def windowdiff(ref: Sequence[int], hyp: Sequence[int], n: int, k: int) -> float:
    """Share of windows of ``k`` gaps whose boundary counts differ."""
    if n <= 1:
        return 0.0
    if not 1 <= k <= n - 1:
        raise InputError(f"window k={k} must be in 1..{n - 1}")
    r = gap_vector(ref, n)
    h = gap_vector(hyp, n)
    # Prefix sums make each window count O(1).
    pr = [0]
    ph = [0]
    for a, b in zip(r, h):
        pr.append(pr[-1] + a)
        ph.append(ph[-1] + b)
    errors = sum((pr[i + k] - pr[i]) != (ph[i + k] - ph[i]) for i in range(n - k))
    return errors / (n - k)


def boundary_similarity(ref: Sequence[int], hyp: Sequence[int], n: int, n_t: int = 2) -> float:
    """Fournier's B: 1 - weighted edits / (matches + additions + transpositions).

    Transpositions are found like segeval's boundary edit distance: for each
    span ``s`` in ``2..n_t`` a left-to-right scan pairs an unmatched reference
    boundary with an unmatched hypothesis boundary ``s - 1`` gaps away, never
    reusing a position.  Each costs ``(s - 1) / n_t``; every other unmatched
    boundary is an addition costing 1.
    """
    a = gap_vector(ref, n)
    b = gap_vector(hyp, n)
    m = len(a)
    matches = sum(1 for i in range(m) if a[i] and b[i])
    used = [False] * m
    transpositions = []
    for span in range(2, n_t + 1):
        d = span - 1
        for i in range(m - d):
            j = i + d
            # Both positions differ between the two sides, and in opposite
            # directions (one side has i but not j, the other j but not i).
            if a[i] != b[i] and a[j] != b[j] and a[i] != a[j] and b[i] != b[j] and not used[i] and not used[j]:
                used[i] = used[j] = True
                transpositions.append(d)
    additions = sum(1 for i in range(m) if a[i] != b[i] and not used[i])
    denominator = matches + additions + len(transpositions)
    if denominator == 0:
        return 1.0
    edits = additions + sum(transpositions) / n_t
    return (denominator - edits) / denominator


def _ratio(num: int, den: int, other_empty: bool) -> float:
    if den == 0:
        return 1.0 if other_empty else 0.0
    return num / den


def _f1(p: float, r: float) -> float:
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def matched_boundaries(ref: Sequence[int], hyp: Sequence[int], tolerance: int = 0) -> int:
    """Size of a maximum one-to-one matching of boundaries at most ``tolerance`` apart.

    Greedy over sorted lists is optimal here: every reference boundary takes the
    leftmost free hypothesis boundary inside its window, and the windows are all
    the same width, so their order by left end equals their order by right end.
    """
    hyp = sorted(hyp)
    j = 0
    count = 0
    for r in sorted(ref):
        while j < len(hyp) and hyp[j] < r - tolerance:
            j += 1
        if j < len(hyp) and hyp[j] <= r + tolerance:
            count += 1
            j += 1
    return count


def boundary_prf(ref: Sequence[int], hyp: Sequence[int], tolerance: int = 0) -> tuple[float, float, float]:
    """Boundary precision, recall and F1; a match is one-to-one and within ``tolerance`` units."""
    tp = matched_boundaries(ref, hyp, tolerance)
    p = _ratio(tp, len(hyp), not ref)
    r = _ratio(tp, len(ref), not hyp)
    return p, r, _f1(p, r)


@dataclass(frozen=True)
class DocScores:
    """All metrics of one document; lower is better for pk/windowdiff, higher for the rest."""

    pk: float
    windowdiff: float
    b: float
    precision: float
    recall: float
    f1: float
    precision_1: float
    recall_1: float
    f1_1: float
    k: int

    def to_dict(self) -> dict:
        """The scores as a plain dict, field name → value."""
        return dict(self.__dict__)


def score_document(ref: Iterable[int], hyp: Iterable[int], n: int, k: int | None = None) -> DocScores:
    """Every metric for one document of ``n`` units (``k`` defaults to :func:`window_size`)."""
    if n < 1:
        raise InputError("a document needs at least one unit")
    ref = normalise_boundaries(ref, n)
    hyp = normalise_boundaries(hyp, n)
    k = window_size(ref, n) if k is None else int(k)
    p0, r0, f0 = boundary_prf(ref, hyp, 0)
    p1, r1, f1 = boundary_prf(ref, hyp, 1)
    return DocScores(
        pk=pk(ref, hyp, n, k),
        windowdiff=windowdiff(ref, hyp, n, k),
        b=boundary_similarity(ref, hyp, n),
        precision=p0,
        recall=r0,
        f1=f0,
        precision_1=p1,
        recall_1=r1,
        f1_1=f1,
        k=k,
    )


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Macro mean and population standard deviation (``nan`` for no values)."""
    if not values:
        return math.nan, math.nan
    mu = sum(values) / len(values)
    var = sum((v - mu) ** 2 for v in values) / len(values)
    return mu, math.sqrt(var)
