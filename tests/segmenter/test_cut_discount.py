"""Under a size target a cut at a line break or before a heading is cheaper (issue 24, retrieval chunks):
the exact discounts, the search's optimum recomputed by brute force, and no change without a target.
The discounts reach the search as a structural prior (:class:`~headseg.segmenter.cuts.CutPrior`)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from headseg.segmenter import lines
from headseg.api import Segmenter
from headseg.segmenter import topics
from headseg.segmenter.cuts import CutPrior
from headseg.segmenter.limits import SizeLimits
from headseg.segmenter.lines import (DISCOUNT_HEADING_TOKENS, HEADING_DISCOUNT, LINE_BREAK_DISCOUNT, cut_discounts,
                                     heading_units, starts_same_line)
from headseg.segmenter.topics import TopicParams, boundary_penalty, search_cuts


def spans_of(text: str, pieces: list[str]) -> list[tuple[int, int]]:
    out, pos = [], 0
    for p in pieces:
        s = text.index(p, pos)
        out.append((s, s + len(p)))
        pos = s + len(p)
    return out


def test_cut_discounts_exact_values():
    pieces = ["The game sold well.", "Critics liked it.", "= = Reception = =", "Reviews were warm.",
              "Sales rose.", "1. Overview", "The end came."]
    text = "The game sold well. Critics liked it.\n= = Reception = =\nReviews were warm. Sales rose.\n1. Overview\nThe end came."
    units = spans_of(text, pieces)
    tokens = [5, 4, 9, 4, 3, 30, 4]  # "1. Overview" given 30 tokens: over the discount's heading limit
    same = starts_same_line(text, units)
    assert same.tolist() == [False, True, False, False, True, False, False]
    got = cut_discounts(text, units, tokens, same)
    line, head = LINE_BREAK_DISCOUNT, HEADING_DISCOUNT
    assert got.tolist() == pytest.approx([line, 0.0, line + head, line, 0.0, line, line])
    assert 30 > DISCOUNT_HEADING_TOKENS and 0 < line + head < 1
    # at its length limit the label counts again
    tokens[5] = DISCOUNT_HEADING_TOKENS
    assert cut_discounts(text, units, tokens, same)[5] == pytest.approx(line + head)


def _objective(cost, beta, sizes, target, discount, params, cuts):
    """Σ over segments of scatter + β(a)·(1 + short surcharge + ((T − target)/target)² − discount(a))."""
    edges = [0, *cuts, cost.n]
    total = 0.0
    for a, b in zip(edges[:-1], edges[1:]):
        t = float(sizes[a:b].sum())
        short = params.short_surcharge * max(0.0, 1.0 - t / params.short_tokens)
        disc = discount[a] if a > 0 else 0.0
        total += cost.cost(a, b) + beta[a] * (1.0 + short + ((t - target) / target) ** 2 - disc)
    return total


def _case(mix: float):
    """Ten units of 12 tokens, topic A then B, unit 4 a mixture (``mix`` of B); a line break before unit 5 only."""
    rng = np.random.default_rng(0)
    a, b = np.eye(16)[0], np.eye(16)[1]
    x = np.array([a] * 4 + [(1 - mix) * a + mix * b] + [b] * 5) + 0.1 * rng.standard_normal((10, 16))
    sizes = np.stack([np.full(10, 60.0), np.full(10, 12.0)], axis=1)  # characters, tokens
    discount = np.where(np.arange(10) == 5, 0.25, 0.0)
    return x, sizes, discount


@pytest.mark.parametrize("mix", [0.5, 0.585, 0.7])
@pytest.mark.parametrize("with_discount", [False, True])
def test_search_is_the_brute_force_optimum(mix, with_discount):
    x, sizes, discount = _case(mix)
    params = TopicParams()
    target = 60.0
    limits = SizeLimits(sizes, None, None, 120.0, None, target)
    cost = limits.cost(x, params.max_units)
    cuts = search_cuts(cost, x, params, tokens=sizes[:, 1], prior=limits.length_prior,
                       cut_prior=CutPrior.of_bonus(discount) if with_discount else None)
    beta = boundary_penalty(x, params, params.penalty)
    disc = discount if with_discount else np.zeros(10)
    # every partition (10 units of 12 tokens always fit 120)
    best = min((list(c) for r in range(10) for c in itertools.combinations(range(1, 10), r)),
               key=lambda c: _objective(cost, beta, sizes[:, 1], target, disc, params, c))
    assert cuts == best


def test_discount_moves_a_cut_to_the_line_break():
    # unit 4 leans to topic B: the scatter alone puts the cut before it, mid-line; the discount
    # before unit 5 (a line start) pays for the worse fit of unit 4 in the first segment
    x, sizes, discount = _case(0.585)
    params = TopicParams()
    limits = SizeLimits(sizes, None, None, 120.0, None, 60.0)
    cheap = CutPrior.of_bonus(discount)
    cost = limits.cost(x, params.max_units)
    assert search_cuts(cost, x, params, tokens=sizes[:, 1], prior=limits.length_prior) == [4]
    assert search_cuts(cost, x, params, tokens=sizes[:, 1], prior=limits.length_prior, cut_prior=cheap) == [5]
    # a clear topic turn stays where it is: the discount only breaks near-ties
    x, _, _ = _case(0.9)
    assert search_cuts(limits.cost(x, params.max_units), x, params, tokens=sizes[:, 1],
                       prior=limits.length_prior, cut_prior=cheap) == [4]
    # the discount is per item and follows the groups the search compares
    assert cheap.grouped(np.array([0, 3, 5, 8])).bonus.tolist() == [0.0, 0.0, 0.25, 0.0]


TEXT = "\n".join([
    "= = Weather = =",
    "Rain fell all night. The river rose quickly over its banks. Farmers moved their cattle to the hills.",
    "= = Music = =",
    "The orchestra tuned its instruments. The violins began a slow melody. The audience listened in silence.",
    "= = Bridges = =",
    "Engineers tested the new bridge. Trucks crossed it one by one. Sensors measured every small movement.",
] * 2)


@pytest.fixture(scope="module")
def seg(tiny_bert):
    return Segmenter(model=tiny_bert, backend="torch")


def _spy_priors(monkeypatch) -> list:
    """The ``cut_prior`` of every :func:`topics.topic_search` call the segmenter makes."""
    seen = []
    real = topics.topic_search

    def spy(*args, **kwargs):
        seen.append(kwargs.get("cut_prior"))
        return real(*args, **kwargs)

    monkeypatch.setattr(topics, "topic_search", spy)
    return seen


def test_no_target_no_discount(seg, monkeypatch):
    seen = _spy_priors(monkeypatch)
    plain, chars = seg.segment(TEXT), seg.segment(TEXT, max_chars=300)
    # without a target (nothing, or max_chars alone) the search gets no discount, only the paragraph
    # prior (issue 33; each line of TEXT is a heading or a paragraph), recomputed here
    units = seg.units(TEXT)
    opens = lines.paragraph_starts(TEXT, units, starts_same_line(TEXT, units))
    assert opens.sum() == len(TEXT.splitlines()) - 1
    p = TopicParams()
    want = lines.paragraph_bonus(opens, p.paragraph_bonus, p.paragraph_count, p.paragraph_surcharge)
    assert len(seen) == 2
    for prior in seen:
        assert prior.bonus.tolist() == pytest.approx(want.tolist()) and prior.allowed.all()
    monkeypatch.setattr(lines, "LINE_BREAK_DISCOUNT", 0.9)
    monkeypatch.setattr(lines, "HEADING_DISCOUNT", 0.09)
    assert [(s.start, s.end) for s in seg.segment(TEXT)] == [(s.start, s.end) for s in plain]
    assert [(s.start, s.end) for s in seg.segment(TEXT, max_chars=300)] == [(s.start, s.end) for s in chars]


def test_target_path_passes_the_discounts(seg, monkeypatch):
    seen = _spy_priors(monkeypatch)
    r = seg.segment(TEXT, max_tokens=64)
    units = seg.units(TEXT)
    # independently: a line start gets LINE_BREAK_DISCOUNT, a "= = X = =" heading line HEADING_DISCOUNT more
    want = []
    for i, (s, e) in enumerate(units):
        starts_line = i == 0 or "\n" in TEXT[units[i - 1][0]:s]
        heading = TEXT[s:e].strip().startswith("= =")
        want.append((LINE_BREAK_DISCOUNT if starts_line else 0.0) + (HEADING_DISCOUNT if heading else 0.0))
    assert sum(w > LINE_BREAK_DISCOUNT for w in want) == 6 and 0.0 in want
    # the first search is the target's (the one without it follows: its sure boundaries stay, issue 48)
    assert seen[0].bonus.tolist() == pytest.approx(want)
    assert seen[0].allowed.all() and not seen[0].level.any()
    assert "".join(s.text for s in r) == TEXT


def test_one_heading_pass_serves_both_lengths():
    # Segmenter.topic_boundaries finds the headings once, at the longer of the two limits, and
    # derives the search's own (at most TopicParams.heading_tokens) from them: the same as a
    # separate pass at each limit
    pieces = ["Intro", "The game sold well.", "= = Reception = =", "Reviews were warm.", "2.", "Sales rose.",
              "3.1 Methods and materials used", "The end came.", "Results", "More text here."]
    text = "\n".join(pieces)
    units = spans_of(text, pieces)
    same = starts_same_line(text, units)
    for tokens in ([1, 5, 9, 4, 2, 3, 20, 4, 1, 4], [30, 5, 8, 4, 25, 3, 7, 4, 9, 4]):
        tokens = np.asarray(tokens)
        titled = heading_units(text, units, tokens, max(8, DISCOUNT_HEADING_TOKENS), same_line=same)
        assert titled.any()
        for limit in (8, DISCOUNT_HEADING_TOKENS):
            assert ((titled & (tokens <= limit)).tolist()
                    == heading_units(text, units, tokens, limit, same_line=same).tolist())
