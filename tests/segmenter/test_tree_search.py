"""The segment tree's search primitives: allowed starts, the penalty scale, and nested levels."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest

from headseg.analysis.errors import HeadsegError
from headseg.segmenter.cuts import CutPrior
from headseg.segmenter.search import SegmentCost
from headseg.segmenter.topics import (TopicParams, boundary_penalty, prepare_vectors, search_objective,
                                      topic_boundaries)


def blocks(sizes, dim=16, seed=0, noise=0.05):
    rng = np.random.default_rng(seed)
    rows = []
    for s in sizes:
        c = rng.normal(size=dim)
        c /= np.linalg.norm(c)
        rows.append(c + noise * rng.normal(size=(s, dim)))
    return np.vstack(rows)


def test_only_allowed_starts_open_segments():
    # three blocks; the search may open segments only at 4 and 20, never at the block edges 10 and 30
    x = blocks([10, 10, 10, 10])
    free, _ = topic_boundaries(x, TopicParams())
    assert set(free) >= {10, 20, 30}
    only, _ = topic_boundaries(x, TopicParams(), allowed=[4, 20])
    assert set(only) <= {4, 20} and 20 in only
    assert topic_boundaries(x, TopicParams(), allowed=[])[0] == []


def test_an_allowed_start_outside_is_refused():
    with pytest.raises(HeadsegError):
        topic_boundaries(blocks([3, 3]), TopicParams(), allowed=[6])
    with pytest.raises(HeadsegError):
        CutPrior.only_at(4, [0])


def test_the_coarse_optimum_over_allowed_starts_is_the_exhaustive_one():
    # recomputed independently: every subset of the allowed starts, scored by the search's own objective
    x = blocks([6, 3, 6, 3, 6], noise=0.2, seed=5)
    params = TopicParams(min_evidence=-math.inf)  # the search alone: no boundary removed for want of evidence
    allowed = [3, 9, 12, 15, 18]  # the block edge at 6 is not among them
    cuts, _ = topic_boundaries(x, params, allowed=allowed)
    assert cuts and set(cuts) <= set(allowed)
    v = prepare_vectors(np.asarray(x, dtype=np.float64), params)
    cost = SegmentCost(v, max_units=params.max_units)
    beta, extra = search_objective(cost, v, params)
    assert extra is None

    def total(c):
        edges = [0, *c, len(v)]
        return sum(cost.cost(a, b) + (beta[a] if a else 0.0) for a, b in zip(edges, edges[1:]))

    best = min((list(c) for r in range(len(allowed) + 1) for c in combinations(allowed, r)), key=total)
    assert total(cuts) == pytest.approx(total(best))


def test_scale_multiplies_the_penalty():
    x = blocks([8, 8, 8])
    base = boundary_penalty(x, TopicParams(), 0.35)
    np.testing.assert_allclose(boundary_penalty(x, TopicParams(scale=3.0), 0.35), 3.0 * base)
    with pytest.raises(HeadsegError):
        TopicParams(scale=0)


def test_a_larger_scale_cuts_a_subset_and_allowed_cuts_nest():
    x = blocks([12, 3, 12, 3, 12], noise=0.3, seed=2)
    fine, _ = topic_boundaries(x, TopicParams())
    coarse, _ = topic_boundaries(x, TopicParams(scale=50.0))
    assert len(coarse) <= len(fine)
    nested, _ = topic_boundaries(x, TopicParams(scale=50.0), allowed=fine)
    assert set(nested) <= set(fine)
