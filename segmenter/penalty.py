"""The local penalty of a new segment: the noise and the correlation length of the unit vectors around each boundary.

:func:`boundary_penalty` is what a segment opening at a unit pays in the topic
search (:mod:`~headseg.segmenter.topics`, whose :class:`~headseg.segmenter.topics.TopicParams`
documents it); :func:`local_statistics` measures it in O(U · L · D) with prefix
sums (``L`` = ``max_lag``).  A segment tree searches the same vectors at several
penalty scales, and the statistics do not depend on the scale: a
:class:`StatisticsMemo` keeps them for the next search over equal vectors.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class StatisticsMemo:
    """The local statistics of the last vectors measured, kept for a search over the same vectors.

    Exact: they are reused only for vectors equal to those (``numpy.array_equal``)
    measured with the same ``window`` and ``max_lag``; anything else is measured
    afresh (and kept instead).  One per document's searches, not shared between threads.
    """

    def __init__(self) -> None:
        self._kept: tuple | None = None

    def statistics(self, x: np.ndarray, window: int, max_lag: int) -> tuple[np.ndarray, np.ndarray]:
        """:func:`local_statistics` of ``x``, measured once for equal vectors."""
        kept = self._kept
        if kept is not None and kept[0] == (window, max_lag) and kept[1].shape == x.shape and \
                np.array_equal(kept[1], x):
            return kept[2], kept[3]
        s2, acf = local_statistics(x, window, max_lag)
        self._kept = ((window, max_lag), np.array(x), s2, acf)
        return s2, acf


def boundary_penalty(x: np.ndarray, params: Any, penalty: float,
                     memo: StatisticsMemo | None = None) -> np.ndarray:
    """Penalty of a segment by the unit it starts at ``[n + 1]``: ``scale · σ² · max(1 + penalty · R, floor)``.

    ``σ²`` (local noise) and ``R`` (correlation length) are measured on the units
    within ``params.window`` of the start; see :class:`~headseg.segmenter.topics.TopicParams`
    (``params``: its ``window``, ``max_lag``, ``acf_smoothing``, ``floor``, ``scale``).
    ``memo``: statistics kept from an earlier search (:class:`StatisticsMemo`).
    """
    n = len(x)
    s2, acf = (local_statistics(x, params.window, params.max_lag) if memo is None
               else memo.statistics(x, params.window, params.max_lag))
    # the autocorrelation up to its first non-positive lag (of its moving average), in units of its
    # first lag, and at most a quarter of the units the statistics saw: on a handful of units a
    # near-zero first lag before a larger second one made a length of a few units read as twenty
    # (a bar seven times the noise), while on any text of some length the cap is far off
    keep = np.cumprod(moving_average(acf, params.acf_smoothing) > 0, axis=1)
    first = acf[:, 0] if acf.shape[1] else np.zeros(n + 1)
    length = np.where(first > 0, (acf * keep).sum(axis=1) / np.maximum(first, 1e-12), 0.0)
    seen = np.minimum(np.arange(n + 1) + params.window, n) - np.maximum(np.arange(n + 1) - params.window, 0)
    length = np.minimum(length, seen / 4.0)
    return params.scale * s2 * np.maximum(1.0 + penalty * length, params.floor)


def moving_average(a: np.ndarray, width: int) -> np.ndarray:
    """``a [R, L]`` averaged along its last axis over ``width`` (odd) centred values; the edges keep theirs."""
    h = width // 2
    if h == 0 or a.shape[-1] < width:
        return a
    c = np.concatenate([np.zeros(a.shape[:-1] + (1,)), np.cumsum(a, axis=-1)], axis=-1)
    out = a.copy()
    out[..., h:a.shape[-1] - h] = (c[..., width:] - c[..., :-width]) / width
    return out


def local_statistics(x: np.ndarray, window: int, max_lag: int) -> tuple[np.ndarray, np.ndarray]:
    """Local noise ``[n + 1]`` and autocorrelation ``[n + 1, L]`` around each unit boundary.

    Around boundary ``i`` the window is units ``[i − window, i + window)``.  The
    noise is half the mean squared distance between adjacent units there; the
    autocorrelation at lag ``l`` the mean dot product (the cosine, for unit-length
    vectors) of unit pairs ``l`` apart that start there, minus the mean of all
    pairs of the window (centring a
    short document on its mean pushes every cosine down by about ``1/(n − 1)``,
    which a long one does not feel; relative to the window's own average pair
    both read the same).  Prefix sums keep this O(n · L · D).
    """
    n = len(x)
    lags = max(min(max_lag, n - 1), 0)
    pos = np.arange(n + 1)
    lo = np.clip(pos - window, 0, n)
    hi = np.clip(pos + window, 0, n)
    # the differences a block at a time: whole, they were one more copy of the vectors at the peak
    steps = np.empty(max(n - 1, 0))
    for s in range(0, n - 1, BLOCK_ROWS):
        d = x[s + 1:s + 1 + BLOCK_ROWS] - x[s:s + BLOCK_ROWS][:len(steps[s:s + BLOCK_ROWS])]
        steps[s:s + BLOCK_ROWS] = np.einsum("ij,ij->i", d, d)
    sq = np.concatenate([[0.0], np.cumsum(steps)])
    a_lo, a_hi = np.minimum(lo, n - 1), np.minimum(hi, n - 1)
    s2 = (sq[a_hi] - sq[a_lo]) / np.maximum(a_hi - a_lo, 1) / 2.0
    s2 = np.maximum(s2, 1e-9)
    acf = np.zeros((n + 1, lags))
    for l in range(1, lags + 1):
        # pairs (j, j + l) with j in [lo, min(hi, n − l))
        c = np.concatenate([[0.0], np.cumsum(np.einsum("ij,ij->i", x[:-l], x[l:]))])
        top = np.minimum(hi, n - l)
        count = np.maximum(top - lo, 0)
        acf[:, l - 1] = np.where(count > 0, (c[np.maximum(top, lo)] - c[lo]) / np.maximum(count, 1), 0.0)
    tot2 = window_norms(x, lo, hi)
    cq = np.concatenate([[0.0], np.cumsum(np.einsum("ij,ij->i", x, x))])
    m = (hi - lo).astype(np.float64)
    base = (tot2 - (cq[hi] - cq[lo])) / np.maximum(m * (m - 1), 1.0)
    return s2, acf - base[:, None]


def window_norms(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``‖Σ x[lo_i:hi_i]‖²`` for each window ``i`` (``lo``, ``hi`` non-decreasing, ``[m]``), a block of
    windows at a time, from the prefix sums of ``x [n, D]`` read forward at each end (:class:`_Prefix`):
    whole, the prefix sums and the windows' sums were three more copies of the vectors at the peak (a unit
    per heading made each 70 MB at 64 KB).  The numbers are those of the whole prefix sums, summed in the
    same order; each row's dot product is the same whatever the block."""
    out = np.empty(len(lo))
    at_lo, at_hi = _Prefix(x), _Prefix(x)
    for s in range(0, len(lo), _WINDOWS):
        tot = at_hi.rows(hi[s:s + _WINDOWS]) - at_lo.rows(lo[s:s + _WINDOWS])
        out[s:s + _WINDOWS] = np.einsum("ij,ij->i", tot, tot)
    return out


class _Prefix:
    """The prefix sums of ``x [n, D]`` (row ``i``: the sum of its first ``i`` rows, added in order as one
    ``cumsum`` adds them) read at non-decreasing indices: only the rows from the last read's first on are held."""

    def __init__(self, x: np.ndarray):
        self.x = x
        self.first, self.held = 0, np.zeros((1, x.shape[1]))  # rows first .. first + len(held) - 1

    def rows(self, idx: np.ndarray) -> np.ndarray:
        """Rows ``idx`` (non-decreasing, the first at or past the last call's first)."""
        start, stop = int(idx[0]), int(idx[-1])
        end = self.first + len(self.held) - 1
        while end < start:  # skipped ahead: sum the rows between, a block at a time, keeping the last
            step = min(start, end + BLOCK_ROWS)
            self.held, self.first, end = _summed(self.x[end:step], self.held[-1])[-1:], step, step
        held = self.held[start - self.first:]
        if stop > end:
            held = np.concatenate([held, _summed(self.x[end:stop], held[-1])])
        self.first, self.held = start, held
        return held[idx - start]


def _summed(rows: np.ndarray, carry: np.ndarray) -> np.ndarray:
    """The running sums of ``rows`` after ``carry`` (``carry + rows[0]``, then each next row added): the
    additions of one cumsum over all the rows, from where ``carry`` left off."""
    out = rows.copy()
    out[0] += carry
    np.cumsum(out, axis=0, out=out)
    return out


def spread(x: np.ndarray) -> float:
    """The mean squared distance of the rows of ``x [n, D]`` from their mean, a block of rows at a time
    (each row's sum is the same whatever the block): whole, ``x − mean`` was a copy of the vectors beside
    the search's (the peak of a long page of short units)."""
    mean = x.mean(axis=0)
    rows = np.empty(len(x))
    for s in range(0, len(x), BLOCK_ROWS):
        d = x[s:s + BLOCK_ROWS] - mean
        np.square(d, out=d)
        rows[s:s + BLOCK_ROWS] = d.sum(axis=1)
    return float(rows.mean())


def row_squares(x: np.ndarray) -> np.ndarray:
    """``(x * x).sum(axis=1)``, a block of rows at a time: each row's sum is the same, without a whole
    squared copy of ``x``."""
    out = np.empty(len(x))  # float64: a narrower float's sums widen exactly
    for s in range(0, len(x), BLOCK_ROWS):
        out[s:s + BLOCK_ROWS] = (x[s:s + BLOCK_ROWS] * x[s:s + BLOCK_ROWS]).sum(axis=1)
    return out


#: rows a temporary of the vectors' size holds at once (here and in :func:`~headseg.segmenter.lines.group_vectors`)
BLOCK_ROWS = 512
#: windows whose sums :func:`window_norms` holds at once (each end's prefix sums held as far back as its block)
_WINDOWS = 128


def prefix_sums(x: np.ndarray, scale: np.ndarray | None = None) -> np.ndarray:
    """``[n + 1, D]``: row ``i`` the sum of the first ``i`` rows of ``x`` (each times ``scale``, if given),
    made in place: the same numbers as ``vstack([0, cumsum(x)])`` without its two temporary copies."""
    if x.dtype != np.float64:  # summed in its own type, as vstack(cumsum) did, then widened
        y = x if scale is None else x * scale[:, None]
        return np.vstack([np.zeros((1, x.shape[1])), np.cumsum(y, axis=0)])
    out = np.empty((x.shape[0] + 1, x.shape[1]))
    out[0] = 0.0
    if scale is None:
        np.cumsum(x, axis=0, out=out[1:])
        return out
    # weighted a block at a time (``x · scale`` whole was a copy beside ``out``), the sum so far added to
    # each block's first row: every row the same addition as in one cumsum
    for s in range(0, len(x), BLOCK_ROWS):
        block = out[s + 1:s + 1 + BLOCK_ROWS]
        np.multiply(x[s:s + BLOCK_ROWS], scale[s:s + BLOCK_ROWS, None], out=block)
        block[0] += out[s]
        np.cumsum(block, axis=0, out=block)
    return out


__all__ = ("BLOCK_ROWS", "StatisticsMemo", "boundary_penalty", "local_statistics", "moving_average", "prefix_sums", "row_squares",
           "spread", "window_norms")
