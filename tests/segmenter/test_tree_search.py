"""The segment tree's search primitives: required starts, the penalty scale, and nested levels."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from headseg.analysis.errors import HeadsegError
from headseg.segmenter.search import SegmentCost, partition_penalised
from headseg.segmenter.topics import TopicParams, boundary_penalty, topic_boundaries


def blocks(sizes, dim=16, seed=0, noise=0.05):
    rng = np.random.default_rng(seed)
    rows = []
    for s in sizes:
        c = rng.normal(size=dim)
        c /= np.linalg.norm(c)
        rows.append(c + noise * rng.normal(size=(s, dim)))
    return np.vstack(rows)


def test_required_starts_are_cut_and_no_span_crosses_them():
    x = blocks([10, 10])
    cost = SegmentCost(x).require([4, 13])
    cuts = partition_penalised(cost, 0.5)
    assert {4, 13, 10} <= set(cuts)
    a, _ = cost.costs_ending_at(20)
    assert a.min() == 13  # no span ending at 20 starts before the last required start
    a, _ = cost.costs_ending_at(13)
    assert a.min() == 4


def test_required_start_outside_is_refused():
    with pytest.raises(HeadsegError):
        SegmentCost(blocks([3])).require([5])


def test_scale_multiplies_the_penalty():
    x = blocks([8, 8, 8])
    base = boundary_penalty(x, TopicParams(), 0.35)
    np.testing.assert_allclose(boundary_penalty(x, TopicParams(scale=3.0), 0.35), 3.0 * base)
    with pytest.raises(HeadsegError):
        TopicParams(scale=0)


def test_a_larger_scale_cuts_a_subset_and_required_cuts_nest():
    x = blocks([12, 3, 12, 3, 12], noise=0.3, seed=2)
    fine, _ = topic_boundaries(x, TopicParams())
    coarse, _ = topic_boundaries(x, TopicParams(scale=50.0))
    assert len(coarse) <= len(fine)
    nested, _ = topic_boundaries(x, TopicParams(), required=coarse)
    assert set(coarse) <= set(nested)
    forced, _ = topic_boundaries(x, replace(TopicParams(), scale=1000.0), required=[7])
    assert 7 in forced
