"""The topic search's arrays over the unit vectors hold few copies of them at once (issue 49, item 7: a
unit per heading made each copy 70 MB at 64 KB, and about seven of them were alive at the peak), and the
numbers are the same as before.  Bytes counted with tracemalloc, never time."""

from __future__ import annotations

import tracemalloc

import numpy as np

from headseg.segmenter.penalty import local_statistics, prefix_sums, row_squares, spread
from headseg.segmenter.search import SegmentCost


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


def test_local_statistics_hold_about_one_copy_of_the_vectors():
    # before: the differences, the prefix sums (twice, through vstack) and the windows' sums with their two
    # gathers were alive together: 4-5 copies
    assert _peak(lambda: local_statistics(X, 12, 4)) < 1.5 * X.nbytes


def test_the_segment_cost_holds_its_prefix_sums_and_no_whole_temporary():
    # before: the cumsum and its vstack, then x · x beside the prefix sums: 2 copies at once
    assert _peak(lambda: SegmentCost(X)) < 1.3 * X.nbytes


def test_the_spread_squares_in_place():
    assert _peak(lambda: spread(X)) < 1.2 * X.nbytes  # before: x − mean and its square, 2 copies


def test_the_numbers_are_the_old_expressions_bit_for_bit():
    x = X[:3000]
    w = np.random.default_rng(8).uniform(0.2, 1.0, len(x))
    for scale in (None, w):
        y = x if scale is None else x * scale[:, None]
        assert np.array_equal(prefix_sums(x, scale), np.vstack([np.zeros((1, x.shape[1])), np.cumsum(y, axis=0)]))
    assert np.array_equal(row_squares(x), (x * x).sum(axis=1))
    assert spread(x) == float(np.square(x - x.mean(axis=0)).sum(axis=1).mean())
    n, window, pos = len(x), 12, np.arange(len(x) + 1)
    lo, hi = np.clip(pos - window, 0, n), np.clip(pos + window, 0, n)
    cx = np.vstack([np.zeros((1, x.shape[1])), np.cumsum(x, axis=0)])
    tot = cx[hi] - cx[lo]
    cq = np.concatenate([[0.0], np.cumsum(np.einsum("ij,ij->i", x, x))])
    m = (hi - lo).astype(np.float64)
    base = (np.einsum("ij,ij->i", tot, tot) - (cq[hi] - cq[lo])) / np.maximum(m * (m - 1), 1.0)
    s2, acf = local_statistics(x, window, 1)
    c = np.concatenate([[0.0], np.cumsum(np.einsum("ij,ij->i", x[:-1], x[1:]))])
    top = np.minimum(hi, n - 1)
    count = np.maximum(top - lo, 0)
    lag1 = np.where(count > 0, (c[np.maximum(top, lo)] - c[lo]) / np.maximum(count, 1), 0.0)
    assert np.array_equal(acf[:, 0], lag1 - base)
