"""Exactly k segments under the penalised search's objective: scatter + per-start penalty + extra cost per
segment, the DP's cuts against a brute force over every partition into k, on every path of the search; and
the product's segments=N objective (scatter + a short-segment prior relative to the mean length)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from headseg.segmenter.search import SegmentCost, partition_k, partition_k_long, partition_penalised


def _scatter(x, w, a, b):
    """Weighted scatter of ``x[a:b]`` around its weighted mean, from scratch."""
    mu = (w[a:b, None] * x[a:b]).sum(0) / w[a:b].sum()
    return float((w[a:b] * ((x[a:b] - mu) ** 2).sum(1)).sum())


def _objective(x, w, penalty, surcharge, cuts):
    edges = [0, *cuts, len(x)]
    return sum(_scatter(x, w, a, b) + penalty[a] + surcharge(a, b) for a, b in zip(edges, edges[1:]))


def _brute_force_k(x, w, k, penalty, surcharge):
    """The partition of ``x`` into exactly ``k`` segments with the lowest objective, by enumeration."""
    best, arg = np.inf, None
    for cuts in itertools.combinations(range(1, len(x)), k - 1):
        total = _objective(x, w, penalty, surcharge, list(cuts))
        if total < best - 1e-12:
            best, arg = total, list(cuts)
    return arg


def _short(tokens, beta, rate=0.5, full=64.0):
    """The short-segment surcharge ``β(a) · rate · max(0, 1 − T / full)``: scalar and array forms."""
    ct = np.concatenate([[0.0], np.cumsum(tokens)])

    def scalar(a, b):
        return beta[a] * rate * max(0.0, 1.0 - (ct[b] - ct[a]) / full)

    def array(a, b):
        return beta[a] * rate * np.maximum(0.0, 1.0 - (ct[b] - ct[a]) / full)

    return scalar, array


def _case(seed: int, n: int = 10):
    """Random unit vectors, weights, a per-start penalty and token counts; k from 2 to 4."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    w = rng.uniform(0.3, 2.0, size=n)
    beta = rng.uniform(0.0, 6.0, size=n + 1)
    tokens = rng.integers(4, 40, size=n).astype(float)
    return x, w, beta, tokens, 2 + seed % 3


@pytest.mark.parametrize("seed", range(6))
def test_exact_k_with_a_per_start_penalty_and_a_surcharge_matches_brute_force(seed):
    x, w, beta, tokens, k = _case(seed)
    scalar, array = _short(tokens, beta)
    want = _brute_force_k(x, w, k, beta, scalar)
    got = partition_k(SegmentCost(x, weights=w), k, beta, array)
    assert got == want
    # partition_k_long's exact path (segments of up to 2·⌈n/k⌉ ≥ 6 items here) is the same search
    assert partition_k_long(x, k, max_units=3, weights=w, penalty=beta, extra=array) == want


def test_the_penalty_moves_the_cuts():
    # on the seeds above, the objective with penalty and surcharge picks cuts the plain scatter does not
    moved = 0
    for seed in range(6):
        x, w, beta, tokens, k = _case(seed)
        n = len(x)
        _, array = _short(tokens, beta)
        plain = partition_k(SegmentCost(x, weights=w), k)
        assert plain == _brute_force_k(x, w, k, np.zeros(n + 1), lambda a, b: 0.0)
        moved += plain != partition_k(SegmentCost(x, weights=w), k, beta, array)
    assert moved >= 3


def test_exact_k_agrees_with_the_penalised_search_at_its_own_number_of_segments():
    # the penalised optimum with m segments is also the best partition into exactly m under the same objective
    rng = np.random.default_rng(11)
    x = np.vstack([rng.normal(size=(12, 5)) * 0.4 + c for c in rng.normal(size=(4, 5)) * 2])
    beta = rng.uniform(0.5, 3.0, size=len(x) + 1)
    _, array = _short(rng.integers(4, 30, size=len(x)).astype(float), beta)
    cost = SegmentCost(x, max_units=30)
    free = partition_penalised(cost, beta, extra=array)
    assert partition_k(cost, len(free) + 1, beta, array) == free


def test_block_search_and_refinement_pay_the_penalty():
    # pure noise (no topic to find) and a penalty that is cheap only at items 40 and 80, both block edges
    # with the budget below (g = 4): the block search and the refinement must both take it into account
    rng = np.random.default_rng(5)
    n = 120
    x = rng.normal(size=(n, 8))
    beta = np.full(n + 1, 1e3)
    beta[[0, 40, 80]] = 0.0
    budget = 1_000
    assert np.ceil(np.sqrt(n * n / budget)) == 4
    assert partition_k_long(x, 3, max_units=10, penalty=beta, budget=budget) == [40, 80]
    assert partition_k_long(x, 3, max_units=10, budget=budget) != [40, 80]
    # a surcharge on every segment shorter than 50 items (in item indices, not blocks) keeps the cuts apart
    def far_apart(a, b):
        return np.where(b - np.asarray(a) < 50, 1e3, 0.0)

    cuts = partition_k_long(x, 2, max_units=10, extra=far_apart, budget=budget)
    assert 50 <= cuts[0] <= n - 50


def test_block_search_result_is_a_local_optimum_of_the_whole_objective():
    rng = np.random.default_rng(9)
    n = 200
    x = rng.normal(size=(n, 6))
    w = rng.uniform(0.3, 1.5, size=n)
    beta = rng.uniform(0.0, 5.0, size=n + 1)
    scalar, array = _short(rng.integers(2, 30, size=n).astype(float), beta)
    cuts = partition_k_long(x, 4, max_units=20, weights=w, penalty=beta, extra=array, budget=2_000)
    assert len(cuts) == 3 and cuts == sorted(cuts)
    here = _objective(x, w, beta, scalar, cuts)
    for i in range(len(cuts)):
        for p in (cuts[i] - 1, cuts[i] + 1):
            moved = cuts[:i] + [p] + cuts[i + 1:]
            if 0 < p < n and moved == sorted(set(moved)):
                assert _objective(x, w, beta, scalar, moved) >= here - 1e-9


def _topic_case(seed: int):
    """Raw unit vectors and token counts where a few units are short, so the prior has something to do."""
    rng = np.random.default_rng(seed)
    n = 11
    x = rng.normal(size=(n, 5))
    tokens = rng.integers(1, 60, size=n).astype(float)
    return x, tokens


def _exact_k_want(x, tokens, k, prior: bool):
    """The brute-force optimum of the topic search's scatter (+ the relative short-segment prior), from scratch."""
    from headseg.segmenter.topics import TopicParams, boundary_penalty

    params = TopicParams()
    n = len(x)
    w = np.minimum(1.0, tokens / params.weight_tokens)
    w = w / w.mean()
    centred = x - x.mean(axis=0)
    if not prior:
        return _brute_force_k(centred, w, k, np.zeros(n + 1), lambda a, b: 0.0)
    beta = boundary_penalty(centred, params, params.penalty)
    full = min(64.0, 0.35 * tokens.sum() / k)  # topics.EXACT_K_SHORT_FRACTION, as documented
    scalar, _ = _short(tokens, beta, rate=params.short_surcharge, full=full)
    return _brute_force_k(centred, w, k, np.zeros(n + 1), scalar)


@pytest.mark.parametrize("seed", range(4))
def test_segments_n_minimises_the_scatter_and_a_short_segment_prior_relative_to_the_mean(seed):
    # the product's choice (docs/segmenter.md, "Exactly k segments: which objective"): no per-start
    # penalty, and the surcharge β(start) · 0.5 · (1 − T/S) on segments of T < S = min(64, 0.35 · T_total/k)
    # tokens, recomputed here; with the group search off (no lines) the topic search sees the units as given
    from headseg.segmenter.topics import TopicParams, topic_cuts

    x, tokens = _topic_case(seed)
    for k in (2, 3, 4):
        assert topic_cuts(x, TopicParams(), segments=k, unit_tokens=tokens) == _exact_k_want(x, tokens, k, True)


def test_the_relative_prior_moves_the_cuts_and_needs_tokens():
    from headseg.segmenter.topics import TopicParams, topic_cuts

    moved = 0
    for seed in range(4):
        x, tokens = _topic_case(seed)
        for k in (2, 3, 4):
            plain = _exact_k_want(x, tokens, k, False)
            moved += plain != _exact_k_want(x, tokens, k, True)
            # without token counts there is no prior (and no unit weights): the plain scatter
            centred = x - x.mean(axis=0)
            assert topic_cuts(x, TopicParams(), segments=k) == _brute_force_k(
                centred, np.ones(len(x)), k, np.zeros(len(x) + 1), lambda a, b: 0.0)
    assert moved >= 2


def test_the_penalised_objective_with_a_size_target_matches_brute_force():
    # topics.search_objective (what the benchmarks' --exact-k penalised minimises with k fixed): the
    # per-start penalty, the short-segment surcharge and a size target's prior, recomputed here
    from headseg.segmenter.limits import SizeLimits
    from headseg.segmenter.topics import TopicParams, boundary_penalty, search_objective

    rng = np.random.default_rng(8)
    n = 10
    x = rng.normal(size=(n, 4))
    x -= x.mean(axis=0)
    tokens = rng.integers(5, 40, size=n).astype(float)
    params = TopicParams()
    target = 60.0
    limits = SizeLimits(sizes=np.stack([tokens * 4, tokens], axis=1), max_chars=1e6, max_tokens=np.inf,
                        target_tokens=target)
    cost = limits.cost(x, n)
    beta_want = boundary_penalty(x, params, params.penalty)
    beta, extra = search_objective(cost, x, params, tokens=tokens, prior=limits.length_prior)
    assert np.allclose(beta, beta_want)
    ct = np.concatenate([[0.0], np.cumsum(tokens)])

    def surcharge(a, b):
        t = ct[b] - ct[a]
        short = params.short_surcharge * max(0.0, 1.0 - t / params.short_tokens)
        return beta_want[a] * (short + ((t - target) / target) ** 2)

    w = np.ones(n)
    for k in (2, 3, 5):
        want = _brute_force_k(x, w, k, beta_want, surcharge)
        assert partition_k(cost, k, beta, extra) == want
