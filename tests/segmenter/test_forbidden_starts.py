"""The penalised search skips the starts a prior forbids, and finds the optimum the full search finds."""

from __future__ import annotations

import numpy as np
import pytest

from headseg.analysis.errors import HeadsegError
from headseg.segmenter.limits import TwoLimitCost
from headseg.segmenter.penalty import StatisticsMemo, local_statistics
from headseg.segmenter.search import SegmentCost, partition_penalised


def brute_force(cost: SegmentCost, penalty: np.ndarray, sizes=None, caps=()) -> list[int]:
    """The penalised optimum by a plain dynamic programme over every span, one cost at a time."""
    n = cost.n
    best = [0.0] + [np.inf] * n
    back = [0] * (n + 1)
    for b in range(1, n + 1):
        for a in range(max(0, b - cost.max_units), b):
            if sizes is not None and any(sizes[a:b, c].sum() > cap for c, cap in enumerate(caps)):
                continue
            total = best[a] + cost.cost(a, b) + penalty[a]
            if total < best[b]:
                best[b], back[b] = total, a
    cuts, b = [], n
    while b > 0:
        b = back[b]
        cuts.append(b)
    return sorted(c for c in cuts if c > 0)


@pytest.mark.parametrize("seed", range(6))
def test_forbidden_starts_give_the_full_searchs_optimum(seed):
    rng = np.random.default_rng(seed)
    n = 60
    x = np.repeat(rng.normal(size=(6, 8)), 10, axis=0) + 0.3 * rng.normal(size=(n, 8))
    penalty = np.full(n + 1, 2.0)
    forbidden = rng.random(n) < 0.6
    forbidden[0] = False
    penalty[:n][forbidden] = np.inf
    cost = SegmentCost(x, max_units=25)
    cuts = partition_penalised(cost, penalty)
    assert cuts == brute_force(cost, penalty)
    assert not any(forbidden[c] for c in cuts)
    # under a character and a token limit too
    sizes = np.stack([rng.integers(5, 40, n), rng.integers(1, 10, n)], axis=1).astype(float)
    limited = TwoLimitCost(x, sizes[:, 0], sizes[:, 1], 300.0, 60.0, None, 25)
    want = brute_force(limited, penalty, sizes, (300.0, 60.0))
    assert partition_penalised(limited, penalty) == want


def test_no_way_through_the_forbidden_starts_is_refused():
    x = np.zeros((6, 2))
    penalty = np.full(7, 1.0)
    penalty[1:6] = np.inf  # one segment of 6 units, longer than the 3 allowed
    with pytest.raises(HeadsegError, match="no feasible segmentation"):
        partition_penalised(SegmentCost(x, max_units=3), penalty)


def test_the_memo_returns_the_statistics_of_equal_vectors_only():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(50, 6))
    memo = StatisticsMemo()
    s2, acf = memo.statistics(x, 10, 5)
    want = local_statistics(x, 10, 5)
    np.testing.assert_array_equal(s2, want[0])
    np.testing.assert_array_equal(acf, want[1])
    again = memo.statistics(x.copy(), 10, 5)
    assert again[0] is s2  # equal vectors: measured once
    y = x.copy()
    y[7, 2] += 1e-9
    other = memo.statistics(y, 10, 5)
    np.testing.assert_array_equal(other[1], local_statistics(y, 10, 5)[1])
    assert memo.statistics(y, 12, 5)[0] is not other[0]  # another window: measured afresh
