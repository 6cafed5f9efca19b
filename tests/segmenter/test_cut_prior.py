"""The structural prior of the search (:class:`~headseg.segmenter.cuts.CutPrior`): its invariants, its
per-start cost, and every search path honouring it — checked against brute force over all partitions."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from headseg.analysis.errors import HeadsegError
from headseg.segmenter.cuts import CutPrior
from headseg.segmenter.search import SegmentCost, partition_k_long
from headseg.segmenter.topics import TopicParams, boundary_penalty, search_cuts, topic_boundaries


def test_invariants_are_checked_on_construction():
    with pytest.raises(HeadsegError, match="one value per unit"):
        CutPrior(np.ones(3, bool), np.zeros(2), np.zeros(3))
    with pytest.raises(HeadsegError, match="finite"):
        CutPrior(np.ones(2, bool), [0.0, np.inf], [0, 0])
    with pytest.raises(HeadsegError, match="first unit"):
        CutPrior([False, True], [0.0, 0.0], [0, 0])
    with pytest.raises(HeadsegError, match="level"):
        CutPrior([True, True], [0.0, 0.0], [0, -1])


def test_start_cost_and_combine_and_grouped():
    p = CutPrior([True, False, True, True], [0.7, 0.5, 0.25, -0.5], [0, 0, 2, 0])
    beta = np.array([2.0, 2.0, 4.0, 1.0, 9.0])
    got = p.start_cost(beta)
    # the first item opens the first segment (no cut), the end is never a start
    assert got[0] == 0.0 and got[4] == 0.0
    assert got[1] == np.inf
    assert got[2:4].tolist() == [-1.0, 0.5]
    with pytest.raises(HeadsegError):
        p.start_cost(beta[:-1])
    q = CutPrior([True, True, False, True], [0.0, 0.1, 0.1, 0.1], [1, 0, 3, 4])
    both = p.combine(q)
    assert both.allowed.tolist() == [True, False, False, True]
    assert both.bonus.tolist() == pytest.approx([0.7, 0.6, 0.35, -0.4])
    # the higher heading (smaller non-zero level) wins
    assert both.level.tolist() == [1, 0, 2, 4]
    g = p.grouped(np.array([0, 2]))
    assert g.allowed.tolist() == [True, True] and g.bonus.tolist() == [0.7, 0.25] and g.level.tolist() == [0, 2]
    assert not CutPrior.neutral(5).constrains and p.constrains


def _blocks(seed: int = 0) -> np.ndarray:
    """Twelve units: three clear topics of four units each."""
    rng = np.random.default_rng(seed)
    eye = np.eye(12)
    return np.array([eye[t] for t in (0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2)]) + 0.15 * rng.standard_normal((12, 12))


def _brute(cost: SegmentCost, start: np.ndarray, pay_beta: np.ndarray | None, k: int | None) -> list[int]:
    """The partition minimising Σ scatter + (β) + start cost, over every partition (or every one into k)."""
    n = cost.n

    def total(cuts):
        edges = [0, *cuts, n]
        out = 0.0
        for a, b in zip(edges[:-1], edges[1:]):
            out += cost.cost(a, b) + start[a] + (0.0 if pay_beta is None else pay_beta[a])
        return out

    sizes = range(n) if k is None else [k - 1]
    cands = [list(c) for r in sizes for c in itertools.combinations(range(1, n), r)]
    return min(cands, key=total)


@pytest.mark.parametrize("k", [None, 3, 4])
def test_every_search_path_honours_allowed_and_pays_the_bonus(k):
    x = _blocks()
    params = TopicParams(min_spread=0)
    allowed = np.ones(12, bool)
    allowed[4] = False  # the true boundary before unit 4 is forbidden
    bonus = np.zeros(12)
    bonus[6] = 0.9  # and a cut before unit 6 is nearly free
    prior = CutPrior(allowed, bonus, np.zeros(12, int))
    xc = x - x.mean(axis=0)
    cost = SegmentCost(xc, max_units=12)
    beta = boundary_penalty(xc, params, params.penalty)
    start = prior.start_cost(beta)
    got = search_cuts(cost, xc, params, segments=k, cut_prior=prior)
    want = _brute(cost, start, beta if k is None else None, k)
    assert got == want and 4 not in got
    if k is not None:
        # the long exact-k path minimises the same objective
        assert partition_k_long(xc, k, 12, penalty=start) == want
    # without the prior the true boundary is found
    assert 4 in search_cuts(cost, xc, params, segments=k)


def test_topic_boundaries_maps_the_prior_onto_groups():
    x = _blocks(1)
    tokens = np.full(12, 10)
    same = np.zeros(12, bool)
    same[[1, 5, 9]] = True  # units 0-1, 4-5, 8-9 share a line: grouped
    allowed = np.ones(12, bool)
    allowed[8] = False
    prior = CutPrior(allowed, np.zeros(12), np.zeros(12, int))
    cuts, _ = topic_boundaries(x, TopicParams(min_spread=0), tokens=tokens, same_line=same, cut_prior=prior)
    free, _ = topic_boundaries(x, TopicParams(min_spread=0), tokens=tokens, same_line=same)
    assert 8 in free and 8 not in cuts and 4 in cuts
    with pytest.raises(HeadsegError, match="cut prior has 3 units"):
        topic_boundaries(x, cut_prior=CutPrior.neutral(3))


def test_a_forbidden_everything_is_an_error_not_garbage():
    x = _blocks()
    params = TopicParams(min_spread=0)
    prior = CutPrior(np.eye(1, 12, 0, dtype=bool)[0], np.zeros(12), np.zeros(12, int))
    xc = x - x.mean(axis=0)
    # max_units 6: twelve units need a cut, and none is allowed
    with pytest.raises(HeadsegError, match="structure"):
        search_cuts(SegmentCost(xc, max_units=6), xc, params, cut_prior=prior)
