"""The topic search's arrays over the unit vectors hold few copies of them at once (issue 49, item 7: a
unit per heading made each copy 70 MB at 64 KB, and about seven of them were alive at the peak; a line of
an MDX page, 30 MB at 100 KB, five of them), and the numbers are the same as before.  Bytes counted with
tracemalloc, never time."""

from __future__ import annotations

import tracemalloc

import numpy as np

from headseg.segmenter.evidence import EvidenceParams
from headseg.segmenter.lines import group_vectors
from headseg.segmenter.penalty import local_statistics, prefix_sums, row_squares, spread, window_norms
from headseg.segmenter.search import SegmentCost
from headseg.segmenter.topics import TopicParams, topic_search


def _peak(fn) -> int:
    """Bytes allocated at the peak of ``fn()`` beyond what was allocated before it."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        out = fn()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    del out
    return peak


X = np.random.default_rng(7).standard_normal((20_000, 64))  # 10 MB


def test_local_statistics_hold_no_copy_of_the_vectors():
    # before: the differences, the prefix sums (twice, through vstack) and the windows' sums with their two
    # gathers were alive together: 4-5 copies; then the prefix sums whole, 1.3 copies
    assert _peak(lambda: local_statistics(X, 12, 4)) < 0.5 * X.nbytes
    assert _peak(lambda: local_statistics(X, 400, 4)) < 0.5 * X.nbytes


def test_the_segment_cost_holds_its_prefix_sums_and_no_whole_temporary():
    # before: the cumsum and its vstack, then x · x beside the prefix sums: 2 copies at once
    assert _peak(lambda: SegmentCost(X)) < 1.3 * X.nbytes


def test_the_spread_squares_in_place():
    assert _peak(lambda: spread(X)) < 0.5 * X.nbytes  # before: x − mean and its square, 2 copies; then one


def test_the_line_groups_hold_their_vectors_and_no_whole_temporary():
    groups = np.arange(len(X)) // 2
    tokens = np.random.default_rng(9).integers(1, 30, len(X))
    # before: x · w, the sums and their quotient: 2 copies at once
    assert _peak(lambda: group_vectors(X, tokens, groups)) < 0.8 * X.nbytes


def test_the_topic_search_holds_two_copies_of_the_vectors():
    rng = np.random.default_rng(10)
    x = rng.standard_normal((4000, 512))  # 16 MB: the gate's own arrays (1.6 MB at 16 draws) are small beside it
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x += np.repeat(rng.standard_normal((80, 512)), 50, axis=0) * 0.3  # 80 topics
    tokens = rng.integers(3, 20, len(x))
    pairs = np.arange(len(x)) % 2 == 1  # two units a line: the search compares them as one
    params = TopicParams(max_units=100, evidence=EvidenceParams(draws=16))
    # before: 3.4 and 2.5 copies (the centred vectors, the search's prefix sums, the statistics' prefix
    # sums, the projection's centred copy); now the centred vectors and the search's prefix sums
    assert _peak(lambda: topic_search(x, params, tokens=tokens)) < 2.9 * x.nbytes
    found = []
    assert _peak(lambda: found.append(topic_search(x, params, tokens=tokens, same_line=pairs))) < 1.7 * x.nbytes
    assert found[0].cuts == list(range(50, 4000, 50))


def test_the_numbers_are_the_old_expressions_bit_for_bit():
    x = X[:3000]
    w = np.random.default_rng(8).uniform(0.2, 1.0, len(x))
    for scale in (None, w):
        y = x if scale is None else x * scale[:, None]
        assert np.array_equal(prefix_sums(x, scale), np.vstack([np.zeros((1, x.shape[1])), np.cumsum(y, axis=0)]))
    assert np.array_equal(row_squares(x), (x * x).sum(axis=1))
    groups = np.arange(len(x)) // 3
    tokens = np.random.default_rng(9).integers(1, 30, len(x)).astype(np.float64)
    sums = np.zeros((groups[-1] + 1, x.shape[1]))
    np.add.at(sums, groups, x * tokens[:, None])
    mass = np.zeros(len(sums))
    np.add.at(mass, groups, tokens)
    assert np.array_equal(group_vectors(x, tokens, groups)[0], sums / mass[:, None])
    assert spread(x) == float(np.square(x - x.mean(axis=0)).sum(axis=1).mean())
    n, window, pos = len(x), 12, np.arange(len(x) + 1)
    lo, hi = np.clip(pos - window, 0, n), np.clip(pos + window, 0, n)
    cx = np.vstack([np.zeros((1, x.shape[1])), np.cumsum(x, axis=0)])
    tot = cx[hi] - cx[lo]
    assert np.array_equal(window_norms(x, lo, hi), np.einsum("ij,ij->i", tot, tot))
    for width in (1, 300, 5000):  # windows wider than a block, and than the text
        a, b = np.clip(pos - width, 0, n), np.clip(pos + width // 2, 0, n)
        assert np.array_equal(window_norms(x, a, b), np.einsum("ij,ij->i", cx[b] - cx[a], cx[b] - cx[a]))
    cq = np.concatenate([[0.0], np.cumsum(np.einsum("ij,ij->i", x, x))])
    m = (hi - lo).astype(np.float64)
    base = (np.einsum("ij,ij->i", tot, tot) - (cq[hi] - cq[lo])) / np.maximum(m * (m - 1), 1.0)
    s2, acf = local_statistics(x, window, 1)
    c = np.concatenate([[0.0], np.cumsum(np.einsum("ij,ij->i", x[:-1], x[1:]))])
    top = np.minimum(hi, n - 1)
    count = np.maximum(top - lo, 0)
    lag1 = np.where(count > 0, (c[np.maximum(top, lo)] - c[lo]) / np.maximum(count, 1), 0.0)
    assert np.array_equal(acf[:, 0], lag1 - base)
