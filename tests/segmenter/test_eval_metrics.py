"""Metrics: hand-computed values, edge cases, and agreement with NLTK and segeval."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headseg.analysis.errors import InputError
from headseg.segmenter.evaluation.metrics import (
    boundary_prf,
    boundary_similarity,
    gap_vector,
    masses,
    matched_boundaries,
    mean_std,
    pk,
    score_document,
    segment_labels,
    window_size,
    windowdiff,
)

nltk_seg = pytest.importorskip("nltk.metrics.segmentation")

try:
    import segeval
except Exception as exc:  # pragma: no cover - depends on the environment
    segeval = None
    SEGEVAL_REASON = f"segeval does not import: {exc}"
else:
    SEGEVAL_REASON = ""


def test_representations():
    # 10 units, segments [0..2], [3..6], [7..9]
    assert gap_vector([3, 7], 10) == [0, 0, 1, 0, 0, 0, 1, 0, 0]
    assert segment_labels([3, 7], 10) == [0, 0, 0, 1, 1, 1, 1, 2, 2, 2]
    assert masses([3, 7], 10) == [3, 4, 3]


def test_hand_computed_near_miss():
    # ref opens segments at units 3 and 7, hyp at 4 and 7.  k = round(10 / 6) = 2.
    # Pk probes (i, i+2), i = 0..7: the ref/hyp judgements differ at i = 1 and 3 -> 2/8.
    # WindowDiff windows of 2 gaps: counts differ at i = 1 and 3 -> 2/8.
    # B: one match (gap 6), one transposition of span 1 (weight 1/2): (2 - 0.5) / 2.
    s = score_document([3, 7], [4, 7], 10)
    assert s.k == 2
    assert s.pk == pytest.approx(0.25)
    assert s.windowdiff == pytest.approx(0.25)
    assert s.b == pytest.approx(0.75)
    assert (s.precision, s.recall, s.f1) == pytest.approx((0.5, 0.5, 0.5))
    assert (s.precision_1, s.recall_1, s.f1_1) == pytest.approx((1.0, 1.0, 1.0))


def test_hand_computed_missed_boundary():
    # k = round(10 / 4) = round(2.5) = 2 (half to even, like segeval).
    # Only the probes straddling gap 4 (i = 3, 4) differ: 2/8 for both metrics.
    s = score_document([5], [], 10)
    assert s.k == 2
    assert s.pk == pytest.approx(0.25)
    assert s.windowdiff == pytest.approx(0.25)
    assert s.b == 0.0
    assert (s.precision, s.recall, s.f1) == (0.0, 0.0, 0.0)


def test_windowdiff_counts_boundaries_pk_does_not():
    # Two hyp boundaries inside one window where ref has one: Pk sees no error, WindowDiff does.
    n = 8
    ref, hyp = [4], [3, 4]
    assert pk(ref, hyp, n, 3) == pytest.approx(1 / 5)  # only probe (0, 3) differs
    assert windowdiff(ref, hyp, n, 3) == pytest.approx(3 / 5)  # windows starting at 0, 1, 2


def test_one_segment_everywhere_is_perfect():
    s = score_document([], [], 7)
    assert (s.pk, s.windowdiff, s.b, s.precision, s.recall, s.f1) == (0.0, 0.0, 1.0, 1.0, 1.0, 1.0)


def test_every_unit_a_segment():
    n = 6
    every = list(range(1, n))
    perfect = score_document(every, every, n)
    assert (perfect.pk, perfect.windowdiff, perfect.b, perfect.f1) == (0.0, 0.0, 1.0, 1.0)
    # k = max(2, round(6 / 12)) = 2; every probe pair spans a boundary in ref, none in hyp.
    none = score_document(every, [], n)
    assert none.k == 2
    assert none.pk == 1.0 and none.windowdiff == 1.0
    assert none.b == 0.0 and none.recall == 0.0 and none.precision == 0.0


def test_k_larger_than_document_is_capped():
    # round(2 / 2) = 1 -> raised to 2 -> capped at n - 1 = 1: one probe (units 0 and 1).
    assert window_size([], 2) == 1
    s = score_document([], [1], 2)
    assert s.k == 1 and s.pk == 1.0 and s.windowdiff == 1.0
    assert window_size([], 1) == 1
    single = score_document([], [], 1)
    assert (single.pk, single.windowdiff, single.b) == (0.0, 0.0, 1.0)
    with pytest.raises(InputError):
        pk([], [], 5, 5)


def test_window_size_convention():
    assert window_size([5], 10) == 2  # 2.5 rounds to even
    assert window_size([7], 14) == 4  # 3.5 rounds to even
    assert window_size([3, 6], 9) == 2  # 1.5 -> 2
    assert window_size([10, 20], 30) == 5


def test_bad_boundaries_are_input_errors():
    with pytest.raises(InputError, match="outside 1..4"):
        score_document([0], [], 5)
    with pytest.raises(InputError):
        score_document([], [5], 5)


def test_tolerance_matching_is_one_to_one():
    # Two hyp boundaries near one ref boundary: only one may match it.
    assert matched_boundaries([5], [4, 6], 1) == 1
    assert matched_boundaries([4, 6], [5], 1) == 1
    # Greedy must not steal: ref 3 takes 2, ref 4 takes 5.
    assert matched_boundaries([3, 4], [2, 5], 1) == 2
    assert boundary_prf([3, 4], [2, 5], 0) == (0.0, 0.0, 0.0)


def test_mean_std():
    assert mean_std([1.0, 3.0]) == (2.0, 1.0)
    mu, sd = mean_std([])
    assert math.isnan(mu) and math.isnan(sd)


@st.composite
def seg_pair(draw):
    n = draw(st.integers(min_value=2, max_value=60))
    gaps = st.lists(st.integers(min_value=1, max_value=n - 1), unique=True, max_size=n - 1).map(sorted)
    return n, draw(gaps), draw(gaps)


def _s(v):
    return "".join(map(str, v))


@settings(max_examples=80, deadline=None)
@given(seg_pair())
def test_matches_nltk(case):
    n, ref, hyp = case
    k = window_size(ref, n)
    r, h = _s(gap_vector(ref, n)), _s(gap_vector(hyp, n))
    assert pk(ref, hyp, n, k) == pytest.approx(nltk_seg.pk(r, h, k))
    assert windowdiff(ref, hyp, n, k) == pytest.approx(nltk_seg.windowdiff(r, h, k))


@pytest.mark.skipif(segeval is None, reason=SEGEVAL_REASON)
@settings(max_examples=80, deadline=None)
@given(seg_pair())
def test_matches_segeval(case):
    n, ref, hyp = case
    rm, hm = tuple(masses(ref, n)), tuple(masses(hyp, n))
    k = window_size(ref, n)
    uncapped = max(2, round(n / (2 * (len(ref) + 1))))
    if uncapped <= n - 1:
        # Not capped, our k is segeval's own default window.
        assert segeval.compute_window_size(rm) == k
    assert pk(ref, hyp, n, k) == pytest.approx(float(segeval.pk(hm, rm, window_size=k)))
    assert windowdiff(ref, hyp, n, k) == pytest.approx(float(segeval.window_diff(hm, rm, window_size=k)))
    if ref or hyp:  # segeval raises when neither side has a boundary; ours says 1.0
        assert boundary_similarity(ref, hyp, n) == pytest.approx(float(segeval.boundary_similarity(hm, rm)))


@pytest.mark.skipif(segeval is None, reason=SEGEVAL_REASON)
@pytest.mark.parametrize(
    "n, ref, hyp",
    [
        (7, [], [3]),  # one reference segment
        (6, [1, 2, 3, 4, 5], [1, 2, 3, 4, 5]),  # every unit a segment
        (6, [1, 2, 3, 4, 5], [2, 4]),
        (3, [1], [2]),  # k = 2 = n - 1: a single probe
        (12, [2, 3, 4], [3, 4, 5]),  # chained near misses
    ],
)
def test_edge_cases_match_segeval(n, ref, hyp):
    rm, hm = tuple(masses(ref, n)), tuple(masses(hyp, n))
    s = score_document(ref, hyp, n)
    assert s.pk == pytest.approx(float(segeval.pk(hm, rm, window_size=s.k)))
    assert s.windowdiff == pytest.approx(float(segeval.window_diff(hm, rm, window_size=s.k)))
    assert s.b == pytest.approx(float(segeval.boundary_similarity(hm, rm)))
