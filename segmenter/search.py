"""Boundary search: optimal partitions of a sequence of unit vectors.

Segments are scored by their within-segment scatter ``Σ_i w_i ‖x_i − μ‖²`` (the
linear-kernel change-point cost, ``μ`` the weighted mean, weights 1 unless
given).  For unit-norm ``x`` and unit weights this is ``n − ‖Σ x_i‖² / n``:
minimising it maximises the mean within-segment similarity.  Two searches:

* :func:`partition_k` — exactly ``k`` segments (dynamic programming);
  :func:`partition_k_long` when a few segments of a long text outgrow the
  search's length bound;
* :func:`partition_penalised` — any number of segments, each new segment
  costing ``penalty`` (optimal partitioning, Jackson et al. 2005).

Both minimise one objective (:func:`span_objective`): the scatter plus an
optional penalty per segment (one number, or one per start index) plus an
optional ``extra(starts, end)`` per segment (a short-segment surcharge, a size
prior); with ``k`` fixed a constant penalty changes nothing.  Cost:
O(n · max_units · D) for the span costs, plus O(k · n · max_units) for the
exact-k table (``max_units`` the longest segment considered).

Both accept a per-segment feasibility constraint (maximum size, in any additive
unit such as characters or tokens, and a maximum length in units) so that hard
size limits are honoured by construction, not by post-hoc splitting.
"""

from __future__ import annotations

import numpy as np

from headseg.analysis.errors import HeadsegError

from .penalty import prefix_sums, row_squares


class SegmentCost:
    """O(1) scatter cost of any span ``[a, b)`` from prefix sums.

    ``x [n, D]`` unit vectors; optional ``sizes [n]`` (characters, tokens) for
    the hard limit ``max_size`` and ``min_size`` (soft: spans below it get a large
    but finite extra cost, so a short document still has a solution);
    optional ``weights [n]`` (positive) of the units in the scatter.
    """

    def __init__(self, x: np.ndarray, sizes: np.ndarray | None = None, max_size: float | None = None,
                 min_size: float | None = None, max_units: int | None = None, weights: np.ndarray | None = None):
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2:
            raise HeadsegError(f"unit vectors need shape [n, D], got {x.shape}")
        self.n = x.shape[0]
        w = np.ones(self.n) if weights is None else np.asarray(weights, dtype=np.float64)
        if w.shape != (self.n,) or not np.all(w > 0):
            raise HeadsegError(f"unit weights need shape [{self.n}] and positive values")
        self.cw = np.concatenate([[0.0], np.cumsum(w)])
        # in place, and x itself where the weights are all one: x · 1 is x, and the copies were the peak
        self.cx = prefix_sums(x, None if weights is None else w)
        self.cq = np.concatenate([[0.0], np.cumsum(w * row_squares(x))])
        s = np.ones(self.n) if sizes is None else np.asarray(sizes, dtype=np.float64)
        self.cs = np.concatenate([[0.0], np.cumsum(s)])
        self.max_size = max_size
        self.min_size = min_size
        self.max_units = max_units or self.n
        if max_size is not None and s.size and s.max() > max_size:
            raise HeadsegError("a single unit is larger than the maximum segment size; split units first")

    def costs_ending_at(self, b: int, opens: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Start indices ``a`` and costs of every feasible span ``[a, b)`` (``opens [n]``: only the
        starts where it is True; None: every start)."""
        lo = max(0, b - self.max_units)
        a = np.arange(lo, b)
        if self.max_size is not None:
            ok = self.cs[b] - self.cs[a] <= self.max_size + 1e-9
            a = a[ok]
        if opens is not None:
            a = a[opens[a]]
        if a.size == 0:
            return a, np.zeros(0)
        length = np.maximum(self.cw[b] - self.cw[a], 1e-12)
        sx = self.cx[b] - self.cx[a]
        cost = (self.cq[b] - self.cq[a]) - np.einsum("ij,ij->i", sx, sx) / length
        if self.min_size is not None:
            cost = cost + np.where(self.cs[b] - self.cs[a] < self.min_size, 1e6, 0.0)
        return a, cost

    def cost(self, a: int, b: int) -> float:
        """Weighted scatter of units ``a..b-1`` around their mean (the cost of one segment)."""
        sx = self.cx[b] - self.cx[a]
        return float((self.cq[b] - self.cq[a]) - sx @ sx / max(self.cw[b] - self.cw[a], 1e-12))


def span_objective(cost: SegmentCost, penalty: float | np.ndarray = 0.0, extra=None,
                   opens: np.ndarray | None = None):
    """The cost of every feasible segment ending at ``b``, penalty and extra included: ``b -> (starts, costs)``.

    A segment ``[a, b)`` costs its scatter, plus ``penalty`` (one number, or
    ``penalty[a]`` from an array ``[n + 1]`` indexed by the segment's start),
    plus ``extra(a, b)`` (``(starts [m], end) -> [m]``, a surcharge on short
    segments, say).  The one definition of the objective both searches minimise.
    ``opens [n]``: only the segments starting where it is True (None: all).
    """
    per_start = _per_start(penalty, cost.n)

    def spans(b: int) -> tuple[np.ndarray, np.ndarray]:
        a, c = cost.costs_ending_at(b, opens)
        if a.size == 0:
            return a, c
        c = c + (penalty[a] if per_start else penalty)
        if extra is not None:
            c = c + extra(a, b)
        return a, c

    return spans


def _per_start(penalty: float | np.ndarray, n: int) -> bool:
    """Whether ``penalty`` is per start (an array, checked to hold ``n + 1`` entries) rather than one number."""
    per_start = np.ndim(penalty) > 0
    if per_start and len(penalty) < n + 1:
        raise HeadsegError(f"a per-start penalty needs {n + 1} entries, got {len(penalty)}")
    return per_start


def partition_penalised(cost: SegmentCost, penalty: float | np.ndarray, extra=None) -> list[int]:
    """Start indices of segments 2..m minimising ``Σ cost + penalty·m``.

    ``penalty``: one number per segment, or an array ``[n + 1]`` indexed by the
    segment's start (a penalty that varies along the document).  ``extra``: an
    optional ``(starts [m], end) -> [m]`` cost added to each span (a surcharge
    on short segments, say); :func:`span_objective`.  Cost: O(n · max_units · D), over the starts a
    segment may open at only: a start whose penalty is ``+inf`` (a cut the text's structure or a
    segment tree's finer level forbids) costs nothing, so a tree's coarse levels, which may open only
    where the finer level does, cost about as many spans as that level has segments.
    """
    n = cost.n
    # A segment never opens where its penalty is +inf, so its spans are not computed, and none
    # ends just before it (the next segment would open there): those ends stay at +inf.  The
    # minimum is the same, ties broken alike (the first start among the finite totals).
    opens = np.isfinite(np.asarray(penalty, dtype=np.float64)[:n]) if _per_start(penalty, n) else None
    if opens is not None and opens.all():
        opens = None
    spans = span_objective(cost, penalty, extra, opens)
    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    back = np.zeros(n + 1, dtype=np.int64)
    for b in range(1, n + 1):
        if opens is not None and b < n and not opens[b]:
            continue
        a, c = spans(b)
        if a.size == 0:
            if opens is not None:
                continue  # no allowed start reaches b: an end no segmentation uses
            raise HeadsegError("no feasible segmentation under the size limits")
        total = best[a] + c
        i = int(np.argmin(total))
        best[b] = total[i]
        back[b] = a[i]
    if not np.isfinite(best[n]):
        # every way through opens a segment where the structure forbids it
        raise HeadsegError("no feasible segmentation under the size limits and the text's structure")
    return _trace(back, n)


def partition_k(cost: SegmentCost, k: int, penalty: float | np.ndarray = 0.0, extra=None) -> list[int]:
    """Start indices of segments 2..k of the optimal partition into exactly ``k`` segments.

    Minimises the same objective as :func:`partition_penalised` (``penalty``
    per segment or per start, ``extra`` per span; :func:`span_objective`) with
    the number of segments fixed; without them, the plain scatter.  Each span's
    cost is computed once and held (``n · max_units`` of them); the search is
    O(n · max_units · D + k · n · max_units).
    """
    n = cost.n
    if not 1 <= k <= n:
        raise HeadsegError(f"cannot make {k} segments from {n} units")
    objective = span_objective(cost, penalty, extra)
    best = np.full((k + 1, n + 1), np.inf)
    best[0, 0] = 0.0
    back = np.zeros((k + 1, n + 1), dtype=np.int64)
    spans = [objective(b) for b in range(n + 1)]
    for j in range(1, k + 1):
        for b in range(j, n + 1):
            a, c = spans[b]
            if a.size == 0:
                continue
            total = best[j - 1, a] + c
            i = int(np.argmin(total))
            best[j, b] = total[i]
            back[j, b] = a[i]
    if not np.isfinite(best[k, n]):
        raise HeadsegError(f"no segmentation into {k} segments satisfies the size limits")
    cuts = []
    b = n
    for j in range(k, 0, -1):
        a = int(back[j, b])
        cuts.append(a)
        b = a
    return sorted(c for c in cuts if c > 0)


#: most span costs the exact-k search of :func:`partition_k_long` holds at once (about 16 bytes
#: and one D-dimensional dot product each); beyond it the search runs on blocks of items first
EXACT_SPAN_BUDGET = 4_000_000


def exact_k_bound(n: int, k: int, max_units: int, budget: int | None = None) -> int:
    """Longest segment, in items, the exact search for ``k`` segments of ``n`` items considers.

    Twice the mean length ``2·⌈n/k⌉`` (at least ``max_units``, at most ``n``);
    with a ``budget`` (span costs held at once), only while ``n · bound`` fits it,
    else ``max_units``.
    """
    bound = min(n, max(max_units, 2 * -(-n // max(k, 1))))
    if budget is not None and n * bound > max(budget, n * min(n, max_units)):
        return min(n, max_units)
    return bound


def partition_k_long(x: np.ndarray, k: int, max_units: int, weights: np.ndarray | None = None,
                     budget: int | None = None, penalty: float | np.ndarray = 0.0, extra=None) -> list[int]:
    """:func:`partition_k` of ``x [n, D]`` (no size limits) whose segments may be longer than ``max_units``.

    ``penalty`` and ``extra`` as in :func:`partition_k` (``penalty [n + 1]`` per
    start, ``extra(starts, end)`` in item indices): the objective is the same on
    every path below.  A few segments of a long document are each longer than
    the search's usual bound: here a segment may hold up to ``L = max(max_units,
    2·⌈n/k⌉)`` items (twice the mean), and the search is exact while ``n · L ≤
    budget`` (None: the larger of :data:`EXACT_SPAN_BUDGET` and ``n · max_units``,
    what the bounded search holds anyway, so where ``L = max_units`` this is
    :func:`partition_k`).  Beyond that, the exact search runs on blocks of ``g``
    consecutive items (their weighted means, weighted by their total weight: the
    scatter of a union of blocks is the blocks' scatter about its mean plus their
    own inner scatter, a constant; a block segment pays the penalty and extra of
    the items it starts and ends at, so the block search is exact among cuts at
    block edges), then each cut is moved to its best place within ``g`` items of
    it, the cuts beside it held fixed, until none moves (coordinate descent).
    Cost: O(n · L · D) exact; O(budget · D + k · g · D) per pass with blocks.
    """
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    if not 1 <= k <= n:
        raise HeadsegError(f"cannot make {k} segments from {n} units")
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    bound = exact_k_bound(n, k, max_units, budget=None)
    budget = max(EXACT_SPAN_BUDGET, n * min(n, max_units)) if budget is None else budget
    if n * bound <= budget:
        return partition_k(SegmentCost(x, max_units=bound, weights=w), k, penalty, extra)
    g = int(np.ceil(np.sqrt(n * bound / budget)))
    first = np.arange(0, n, g)
    if len(first) < k:  # too few blocks for k segments: smaller blocks (k ≤ n, so g = 1 always works)
        g = max(1, n // k)
        first = np.arange(0, n, g)
    bw = np.add.reduceat(w, first)
    bx = np.add.reduceat(x * w[:, None], first, axis=0) / bw[:, None]
    nb = len(first)
    edge = np.append(first, n)  # block i spans items edge[i]..edge[i + 1] - 1
    per_start = _per_start(penalty, n)
    block_extra = None if extra is None else (lambda a, b: extra(edge[a], int(edge[b])))
    block_cuts = partition_k(SegmentCost(bx, max_units=min(nb, max(1, -(-bound // g))), weights=bw), k,
                             np.asarray(penalty)[edge] if per_start else penalty, block_extra)
    cost = SegmentCost(x, weights=w)

    def span(a: int, b: int) -> float:
        c = cost.cost(a, b) + (float(penalty[a]) if per_start else 0.0)
        return c if extra is None else c + float(extra(np.array([a]), b)[0])

    edges = [0, *(int(first[c]) for c in block_cuts), n]
    moved = True
    while moved:
        moved = False
        for i in range(1, len(edges) - 1):
            a, m, b = edges[i - 1], edges[i], edges[i + 1]
            places = range(max(a + 1, m - g), min(b - 1, m + g) + 1)
            best = min(places, key=lambda p: (span(a, p) + span(p, b), p != m))
            if best != m:
                edges[i], moved = best, True
    return edges[1:-1]


def _trace(back: np.ndarray, n: int) -> list[int]:
    cuts = []
    b = n
    while b > 0:
        a = int(back[b])
        if a > 0:
            cuts.append(a)
        b = a
    return cuts[::-1]


def boundary_strength(cost: SegmentCost, cuts: list[int]) -> list[float]:
    """For each boundary, the cost saved by keeping it instead of merging its two neighbours,
    relative to the merged segment's length (so scores are comparable across sizes)."""
    edges = [0] + list(cuts) + [cost.n]
    out = []
    for i in range(1, len(edges) - 1):
        a, m, b = edges[i - 1], edges[i], edges[i + 1]
        merged = cost.cost(a, b)
        split = cost.cost(a, m) + cost.cost(m, b)
        out.append(max(merged - split, 0.0) / (b - a))
    return out

