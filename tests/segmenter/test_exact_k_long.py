"""Exactly k segments when they are longer than the search's usual bound (``partition_k_long``)."""

from __future__ import annotations

import numpy as np
import pytest

from headseg.analysis.errors import HeadsegError
from headseg.segmenter.search import SegmentCost, partition_k, partition_k_long
from headseg.segmenter.topics import TopicParams, topic_cuts


def _planted(lengths, dim=16, noise=0.3, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(len(lengths), dim)) * 3
    x = np.vstack([c + rng.normal(size=(n, dim)) * noise for c, n in zip(centres, lengths)])
    return x, [int(c) for c in np.cumsum(lengths)[:-1]]


def _total(x, cuts, w=None):
    cost = SegmentCost(x, weights=w)
    edges = [0, *cuts, len(x)]
    return sum(cost.cost(a, b) for a, b in zip(edges, edges[1:]))


def test_segments_longer_than_the_bound_are_found_exactly():
    x, truth = _planted([30, 25, 35])
    with pytest.raises(HeadsegError):  # what the bounded search said before: no room for 3 segments of ≤ 20
        partition_k(SegmentCost(x, max_units=20), 3)
    cuts = partition_k_long(x, 3, max_units=20)
    assert cuts == truth
    # the exact search with no bound at all agrees, on random data too (bound 2·⌈n/k⌉ ≥ n here)
    rng = np.random.default_rng(3)
    for _ in range(3):
        r = rng.normal(size=(24, 4))
        w = rng.uniform(0.2, 1.0, size=24)
        assert partition_k_long(r, 2, max_units=5, weights=w) == partition_k(SegmentCost(r, weights=w), 2)


def test_block_search_then_refinement_finds_the_planted_cuts():
    lengths = [83, 41, 120, 57]
    x, truth = _planted(lengths, seed=1)
    exact = partition_k_long(x, 4, max_units=50)
    assert exact == truth
    # a budget far below n · L forces blocks of several items; the refinement puts the cuts back
    # on the exact items (block edges are multiples of g, and no true cut is one)
    cuts = partition_k_long(x, 4, max_units=50, budget=2_000)
    assert cuts == truth
    assert _total(x, cuts) == pytest.approx(_total(x, exact))


def test_block_search_refinement_never_raises_the_cost():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(300, 6))
    cuts = partition_k_long(x, 3, max_units=40, budget=3_000)
    assert len(cuts) == 2 and cuts == sorted(cuts) and 0 < cuts[0] and cuts[-1] < 300
    # each cut is a local optimum with its neighbours fixed: moving it by one item costs no less
    edges = [0, *cuts, 300]
    cost = SegmentCost(x)
    for i in range(1, len(edges) - 1):
        a, m, b = edges[i - 1], edges[i], edges[i + 1]
        here = cost.cost(a, m) + cost.cost(m, b)
        for p in (m - 1, m + 1):
            if a < p < b:
                assert cost.cost(a, p) + cost.cost(p, b) >= here - 1e-9


def test_topic_search_with_a_number_of_segments_on_a_long_text():
    # 3 topics of 150 units each with a bound of 100 units: the bounded search had no solution
    x, truth = _planted([150, 150, 150], dim=24, noise=0.5, seed=2)
    params = TopicParams(max_units=100)
    assert topic_cuts(x, params, segments=3) == truth
    assert topic_cuts(x, params, segments=3, unit_tokens=np.full(450, 12)) == truth


def test_arguments():
    x = np.zeros((5, 2))
    with pytest.raises(HeadsegError):
        partition_k_long(x, 6, max_units=2)
    with pytest.raises(HeadsegError):
        partition_k_long(x, 0, max_units=2)
    assert partition_k_long(x, 5, max_units=1) == [1, 2, 3, 4]


def test_a_number_of_segments_under_size_limits_that_allow_long_segments():
    from headseg.segmenter.limits import SizeLimits
    from headseg.segmenter.topics import topic_boundaries

    x, truth = _planted([150, 150, 150], dim=24, noise=0.5, seed=4)
    params = TopicParams(max_units=100)
    roomy = SizeLimits(sizes=np.full(450, 10.0), max_chars=2000.0)  # 200 units fit, the bound held 100
    cuts, _ = topic_boundaries(x, params, segments=3, limits=roomy)
    assert cuts == truth
    tight = SizeLimits(sizes=np.full(450, 10.0), max_chars=1000.0)  # 3 × 100 units cannot hold 450
    with pytest.raises(HeadsegError, match="size limits"):
        topic_boundaries(x, params, segments=3, limits=tight)
