"""The topic search: which unit boundaries open a new topic segment.

Pipeline, one home for :class:`~headseg.Segmenter` and for the
benchmarks that tune it on cached unit vectors (:func:`topic_cuts`)::

    unit vectors x [U, D] ─ line groups and headings (lines.py) ─ centred (prepare_vectors)
        ─ per-item weights min(1, T / weight_tokens) ─ segment cost under the hard size limits
        ─ exactly k segments (partition_k, partition_k_long) or the penalised optimum (partition_penalised)
        ─ a token counter's exact check (repair_cuts) ─ the evidence's gate, then the headings (gate.py)
        ─ boundary strengths

The penalty of a segment starting at unit ``i`` is ``σ²(i) · max(1 + penalty · R(i), floor)``: ``σ²`` is
the local noise (half the mean squared distance between adjacent unit vectors) and ``R`` the local
correlation length of the unit vectors, both measured within ``TopicParams.window`` units of ``i``, so
nothing grows with the document's length and topics that come back are still cut.  A segment shorter
than ``short_tokens`` pays a surcharge.

Cost: :func:`local_statistics` is O(U · L · D) with prefix sums (``L`` =
``max_lag``); the search is O(U · max_units · D) (``segmenter/search.py``).
Design measurements and sweeps: docs/segmenter.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from headseg.analysis.errors import HeadsegError, shown

from .blocks import heading_mask, structure_prior, units_bound
from .cuts import CutPrior, nested_prior, passable
from .document import Document
from .apart import keep_apart
from .evidence import EvidenceParams, directions
from .gate import confidences, gate
from .limits import SizeLimits, repair_cuts
from .penalty import StatisticsMemo, boundary_penalty, local_statistics, moving_average, spread  # noqa: F401 (read here)
from .lines import DISCOUNT_HEADING_TOKENS, cut_discounts, group_units, line_groups, open_groups_at, paragraph_bonus
from .request import SearchRequest
from .search import (EXACT_SPAN_BUDGET, SegmentCost, boundary_strength, exact_k_bound, partition_k, partition_k_long,
                     partition_penalised)


@dataclass
class TopicParams:
    """Knobs of the topic search, with the defaults used everywhere (documented in docs/segmenter.md)."""

    #: a boundary must save ``σ² · (1 + penalty · R)`` of scatter, where ``σ²`` is the
    #: local noise (half the mean squared distance between adjacent unit vectors)
    #: and ``R`` the local correlation length: how many units on, on average,
    #: similarity to a unit persists (the autocorrelation of the unit vectors,
    #: summed up to its first non-positive lag, over its first lag).  The best
    #: split inside a segment, true or not, saves more the longer the segment, so
    #: the bar rises with the segment length the document itself shows; nothing
    #: here grows with the document's length (docs/segmenter.md has the sweep).
    #: 0.35 is what the tuning rule over every dev family picks together with the embedded
    #: model's output share (benchmarks/tune_topics.py; docs/segmenter.md, "Tuning for what
    #: generalises" and "The model's own embedding beside the heads")
    penalty: float = 0.35
    #: the bar is never below ``floor · σ²``: one noisy unit (a short dialogue turn) opens no segment
    floor: float = 1.3
    #: ``σ²`` and ``R`` are measured on the units within this many units of a candidate
    #: boundary, so a long document or a concatenation keeps each part's own scale
    window: int = 400
    max_lag: int = 100  #: longest lag of the autocorrelation, in units
    #: a unit weighs ``min(1, tokens / weight_tokens)`` in the segment scatter: a unit of a
    #: few tokens has a noisy vector (0 = every unit weighs the same)
    weight_tokens: float = 8.0
    #: longest segment considered, in units (bounds the search to O(n·max_units))
    max_units: int = 400
    #: subtract the document mean before comparing units (removes the shared
    #: "this is English prose" direction that makes every cosine positive)
    center: bool = True
    #: rescale every centred vector to length 1 again (off: a generic unit, "Yes
    #: please.", lies near the document mean, and renormalising would blow its
    #: small remainder up into a full-length random direction)
    renormalize: bool = False
    #: consecutive units on one line (no line break between them) are compared as
    #: one, their vectors averaged by tokens, while together they hold at most
    #: this many tokens: the short sentences of a dialogue turn say little alone
    #: (0 = every unit on its own; the segments still start at unit starts)
    line_tokens: int = 32
    #: a heading (a unit alone on its line, of at most this many tokens, that
    #: reads as a label or a title: "2.", "B.", "Introduction", "## Results",
    #: "3.1 Methods"; :func:`looks_like_heading`) is compared together with the
    #: line after it, so it opens the next segment instead of closing the
    #: previous one: alone, its few tokens give a noisy vector that the search
    #: hands to either side (0 = off)
    heading_tokens: int = 8
    #: a segment of ``T`` tokens pays ``β · (1 + short_surcharge · (1 − T / short_tokens))``
    #: when ``T < short_tokens``: a few tokens make a noisy mean, so a short
    #: segment needs more evidence (0 = no surcharge)
    short_surcharge: float = 0.5
    short_tokens: float = 64.0
    #: a document whose unit vectors barely differ (mean squared distance to their mean below
    #: this; every dev document is above 0.64) has no topics to cut: repeated or templated text
    #: ("word word ...") drifts smoothly, and a penalty scaled by its tiny σ² would cut the
    #: drift into dozens of segments.  Only the hard size limits cut it then (0 = off)
    min_spread: float = 0.05
    #: the correlation length ``R`` sums the autocorrelation up to the first lag where its moving
    #: average over this many lags (odd; the end lags keep their own value) is not positive: one
    #: noisy lag must not end the sum early (1 = the raw autocorrelation)
    acf_smoothing: int = 1
    #: without a size target, in a text of ``P`` paragraphs (``lines.paragraph_starts``: a blank line
    #: before, or a line break where the text's lines are paragraphs), a segment opening where a
    #: paragraph opens pays ``(1 − b) · β`` with ``b = paragraph_bonus · min(1, paragraph_count / P)``,
    #: and one opening inside a paragraph ``(1 + paragraph_surcharge) · β``.  The paragraphs of a short
    #: text are most often its topics; of a long one, only a few of its paragraph breaks are topic
    #: boundaries, so the bonus shrinks as the paragraphs grow in number, and the surcharge moves
    #: the cuts the vectors ask for onto paragraph breaks (docs/segmenter.md, "Short documents").
    #: A text without paragraphs (one line, or one sentence a line) has no such prior.
    paragraph_bonus: float = 0.6
    paragraph_count: float = 4.0
    paragraph_surcharge: float = 0.5
    #: ``β`` (and the priors and surcharges, fractions of it) times this: a tree's coarser levels (tree.py)
    scale: float = 1.0
    #: a boundary is kept only when its evidence (:mod:`~headseg.segmenter.evidence`) reaches this and its
    #: confidence ``min_confidence``: priors decide *where*, evidence *whether* (-inf, 0: every one found)
    min_evidence: float = 0.75
    min_confidence: float = 0.0
    #: the test behind each boundary's confidence (:class:`~headseg.segmenter.evidence.EvidenceParams`)
    evidence: EvidenceParams = field(default_factory=EvidenceParams)

    def __post_init__(self) -> None:
        w = self.acf_smoothing
        if isinstance(w, bool) or not isinstance(w, int) or w < 1 or w % 2 == 0:
            raise HeadsegError(f"acf_smoothing must be a positive odd integer (got {shown(w)})")
        for name, top in (("paragraph_bonus", 1.0), ("paragraph_count", math.inf), ("paragraph_surcharge", math.inf)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < top:
                raise HeadsegError(f"{name} must be a number from 0{' below 1' if top == 1 else ''} (got {shown(v)})")
        if isinstance(self.scale, bool) or not isinstance(self.scale, (int, float)) or not 0 < self.scale < math.inf:
            raise HeadsegError(f"scale must be a positive number (got {shown(self.scale)})")
        c = self.min_confidence
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 <= c <= 1:
            raise HeadsegError(f"min_confidence must be a number from 0 to 1 (got {shown(c)})")
        e = self.min_evidence
        if isinstance(e, bool) or not isinstance(e, (int, float)) or math.isnan(e) or e == math.inf:
            raise HeadsegError(f"min_evidence must be a number below infinity (got {shown(e)})")
        if not isinstance(self.evidence, EvidenceParams):
            raise HeadsegError(f"evidence must be an EvidenceParams (got {type(self.evidence).__name__})")


class Boundaries(NamedTuple):
    """The units that open segments 2..m (``cuts``), each boundary's strength (``scores``: the scatter it
    saves per unit of its two segments) and ``confidence`` (:mod:`~headseg.segmenter.evidence`, in [0, 1])."""

    cuts: list[int]
    scores: list[float]
    confidence: list[float]


def prepare_vectors(x: np.ndarray, params: TopicParams, own: bool = False) -> np.ndarray:
    """The unit vectors the search compares: centred on the document mean (in place when ``own``: ``x`` is
    the caller's to change, a copy of the vectors fewer), renormalised if asked."""
    if params.center:
        x = np.subtract(x, x.mean(axis=0, keepdims=True), out=x if own else None)
        if params.renormalize:
            norms = np.linalg.norm(x, axis=1, keepdims=True)
            x = np.where(norms > 0, x / np.maximum(norms, 1e-12), 0.0)
    return x


def unit_weights(tokens, params: TopicParams) -> np.ndarray | None:
    """Weight of each unit in the scatter, ``min(1, tokens / weight_tokens)`` scaled to mean 1 (None: equal)."""
    if not params.weight_tokens:
        return None
    w = np.minimum(1.0, np.maximum(np.asarray(tokens, dtype=np.float64), 1.0) / params.weight_tokens)
    return w / w.mean()


def search_objective(cost: SegmentCost, x: np.ndarray, params: TopicParams, penalty: float | None = None,
                     tokens=None, prior=None, cut_prior: CutPrior | None = None,
                     memo: StatisticsMemo | None = None) -> tuple[np.ndarray, object]:
    """What a segment costs beyond its scatter: the per-start penalty ``beta [n + 1]`` and ``extra(starts, end)``.

    ``beta`` is :func:`boundary_penalty` (raised to the whole document's scatter
    when the vectors barely differ, ``params.min_spread``), plus the structural
    prior's per-start cost when ``cut_prior`` is given (:meth:`CutPrior.start_cost`:
    ``−bonus · β``, ``+inf`` where no segment may open); ``extra`` (None when
    there is nothing to add) is the short-segment surcharge when ``tokens [n]``
    (the units' token counts) are given, plus ``prior(beta)``
    (:meth:`SizeLimits.length_prior`, a size target's cost) when given; both are
    charged on ``β`` before the prior.  The penalised search minimises scatter +
    beta + extra (the search for exactly k segments, :func:`exact_k_objective`,
    the scatter, the prior and its own short-segment prior).
    """
    beta = boundary_penalty(x, params, params.penalty if penalty is None else penalty, memo)
    if params.min_spread and len(x) and spread(x) < params.min_spread:
        # no topic structure: a segment costs more than all the scatter cuts could save
        beta = np.maximum(beta, cost.cost(0, cost.n))
    extra = None
    if tokens is not None and params.short_surcharge and params.short_tokens > 0:
        ct = np.concatenate([[0.0], np.cumsum(np.asarray(tokens, dtype=np.float64))])
        rate, full = float(params.short_surcharge), float(params.short_tokens)

        def extra(a: np.ndarray, b: int) -> np.ndarray:
            return beta[a] * rate * np.maximum(0.0, 1.0 - (ct[b] - ct[a]) / full)
    size = None if prior is None else prior(beta)
    if size is not None:
        short = extra
        extra = size if short is None else (lambda a, b: short(a, b) + size(a, b))
    if cut_prior is not None:
        return beta + cut_prior.start_cost(beta), extra
    return beta, extra


def search_cuts(cost: SegmentCost, x: np.ndarray, params: TopicParams, segments: int | None = None,
                penalty: float | None = None, tokens=None, prior=None, cut_prior: CutPrior | None = None,
                memo: StatisticsMemo | None = None) -> list[int]:
    """Unit indices that open segments 2..m: exactly ``segments`` of them, or the penalised optimum.

    The penalised search minimises the scatter plus :func:`search_objective`'s
    per-start penalty and extra cost: ``tokens [n]`` (the units' token counts)
    add the short-segment surcharge (:class:`TopicParams` ``short_surcharge``),
    ``prior``: ``beta -> extra`` (:meth:`SizeLimits.length_prior`) a size
    target's cost (None: none), ``cut_prior`` the text's structural prior over the
    items (:class:`~headseg.segmenter.cuts.CutPrior`).  Exactly ``segments`` minimise
    :func:`exact_k_objective`'s (the scatter, the structural prior and a short-segment
    prior relative to the mean length).
    """
    if segments is not None:
        beta, extra = exact_k_objective(cost, x, params, penalty, tokens, prior, segments=segments,
                                        cut_prior=cut_prior)
        return partition_k(cost, min(segments, cost.n), beta, extra)
    beta, extra = search_objective(cost, x, params, penalty, tokens, prior, cut_prior=cut_prior, memo=memo)
    return partition_penalised(cost, beta, extra=extra)


#: with exactly N segments, the short-segment surcharge charges a segment shorter than
#: ``min(short_tokens, EXACT_K_SHORT_FRACTION · T / N)`` tokens (``T`` the document's tokens): the
#: known mean length says what "short" means in this document.  0.35 is the largest of 0.25, 0.35,
#: 0.40, 0.45, 0.50 that the tuning rule accepts on the dev sets (docs/segmenter.md, "Exactly k
#: segments: which objective")
EXACT_K_SHORT_FRACTION = 0.35


def exact_k_objective(cost: SegmentCost, x: np.ndarray, params: TopicParams, penalty: float | None = None,
                      tokens=None, prior=None, segments: int | None = None,
                      cut_prior: CutPrior | None = None) -> tuple[float | np.ndarray, object]:
    """What a segment costs beyond its scatter when the number of segments is fixed: a short-segment prior.

    ``(start, extra)``: ``start`` is 0.0 (no per-start penalty), or with a
    ``cut_prior`` its per-start cost ``[n + 1]`` on the local penalty
    (:meth:`CutPrior.start_cost`: a bonus is paid and a forbidden start never
    taken, though no penalty is); ``extra`` (None without ``tokens [n]`` or
    ``segments``) is :func:`search_objective`'s short-segment
    surcharge ``β(start) · short_surcharge · (1 − T / S)`` on a segment of
    ``T < S`` tokens, where ``S = min(short_tokens, EXACT_K_SHORT_FRACTION ·
    Σ tokens / segments)`` follows the document's known mean segment length.
    The penalised search's objective itself (with ``S = short_tokens`` and the
    per-start penalty) helps dialogue and Choi but loses on every manifesto,
    whose many segments are mostly short; relative to the mean, the surcharge
    spares them (docs/segmenter.md, "Exactly k segments: which objective";
    ``benchmarks/exact_k_objective.py``).  ``prior`` (a size target's cost) is
    not paid: the number of segments already fixes their mean size.
    """
    start: float | np.ndarray = 0.0
    beta, extra = None, None
    if tokens is not None and segments and params.short_surcharge:
        short = min(float(params.short_tokens), EXACT_K_SHORT_FRACTION * float(np.sum(tokens)) / segments)
        beta, extra = search_objective(cost, x, replace(params, short_tokens=short), penalty, tokens)
    if cut_prior is not None:
        if beta is None:
            beta = search_objective(cost, x, params, penalty)[0]
        start = cut_prior.start_cost(beta)
    return start, extra


def topic_boundaries(x: np.ndarray, params: TopicParams | None = None, segments: int | None = None,
                     penalty: float | None = None, tokens=None, same_line=None, headings=None,
                     limits: SizeLimits | None = None, cut_prior: CutPrior | None = None,
                     allowed=None, memo: StatisticsMemo | None = None) -> tuple[list[int], list[float]]:
    """:func:`topic_search`'s boundaries and strengths (the same arguments), without the confidences."""
    found = topic_search(x, params, segments, penalty, tokens, same_line, headings, limits, cut_prior, allowed, memo)
    return found.cuts, found.scores


def topic_search(x: np.ndarray, params: TopicParams | None = None, segments: int | None = None,
                 penalty: float | None = None, tokens=None, same_line=None, headings=None,
                 limits: SizeLimits | None = None, cut_prior: CutPrior | None = None,
                 allowed=None, memo: StatisticsMemo | None = None,
                 min_confidence: float | None = None) -> Boundaries:
    """Topic boundaries of unit vectors ``x [U, D]``: the units that open segments 2..m, their strengths
    and their confidences (:class:`Boundaries`).

    ``tokens [U]``: the units' token counts, for the unit weights, the short-segment surcharge and the
    line groups (None: equal weights, no groups).  ``same_line [U]`` (:func:`~headseg.segmenter.lines.starts_same_line`)
    and ``headings [U]`` (:func:`~headseg.segmenter.lines.heading_units`) group the units the search compares
    as one (None for both: no groups).  ``segments``: exactly that many segments (at most one per item)
    instead of the penalised optimum; ``penalty`` overrides ``params.penalty``.
    ``limits``: the hard size limits per unit (:class:`SizeLimits`), never
    exceeded; a group never outgrows them.  ``cut_prior``: the text's structural
    prior per unit (:class:`~headseg.segmenter.cuts.CutPrior`: where a segment may
    open and what opening one saves), None for none.  ``allowed``: the only units after the first where
    a segment may open (a segment tree's finer level; None: any).  ``memo``: the local statistics of
    an earlier search over the same vectors (:class:`~headseg.segmenter.penalty.StatisticsMemo`).
    The search's boundaries whose evidence is below ``params.min_evidence`` or confidence below ``min_confidence``
    (None: ``params.min_confidence``) are removed, the weakest first, unless the merged segment would break the
    hard limits, and the kept ones move to ``cut_prior``'s headings where they pass there (:mod:`~headseg.segmenter.gate`);
    with exactly ``segments``, or under a size target (``limits.target_tokens``: the target decides), none is removed.
    """
    params = params or TopicParams()
    n = len(x)
    if n < 2:
        return Boundaries([], [], [])
    if cut_prior is not None and len(cut_prior) != n:
        raise HeadsegError(f"the cut prior has {len(cut_prior)} units, the vectors {n}")
    if allowed is not None:
        cut_prior, allowed = nested_prior(cut_prior, n, allowed, limits, params.max_units)
    x = np.asarray(x, dtype=np.float64)
    first = None
    if tokens is not None and (same_line is not None or headings is not None):
        same = np.zeros(n, dtype=bool) if same_line is None else np.asarray(same_line, dtype=bool)
        groups = line_groups(same, tokens, params.line_tokens, None if limits is None else limits.sizes,
                             () if limits is None else limits.caps, headings=headings)
        if allowed is not None:
            groups = open_groups_at(groups, allowed)  # no group may hide a start the finer level has
        if limits is not None and limits.fits is not None:
            starts = np.searchsorted(groups, np.arange(int(groups[-1]) + 1), side="left")
            ends = np.append(starts[1:], n)
            if not all(limits.fits(int(a), int(b)) for a, b in zip(starts, ends)):
                groups = np.arange(n)  # a foreign counter's counts do not add up: no groups then
        grouped = group_units(x, tokens, groups, segments)
        if grouped[2] is not None and cut_prior is not None and cut_prior.constrains and not passable(
                cut_prior.grouped(grouped[2]).allowed, None if limits is None else limits.grouped(grouped[2]),
                params.max_units):
            grouped = (x, tokens, None)  # a group would hide the only start a stretch has: units alone then
        x, tokens, first = grouped
        if first is not None:
            limits = None if limits is None else limits.grouped(first)
            cut_prior = None if cut_prior is None else cut_prior.grouped(first)
    # the likeness reads the vectors as they came: their norms and mean kept first (renormalised: kept whole)
    raw = x if params.evidence.likeness_weight and params.renormalize else None
    came = directions(x, params.center) if params.evidence.likeness_weight and raw is None else None
    x = prepare_vectors(x, params, own=first is not None and raw is None)
    weights = None if tokens is None else unit_weights(tokens, params)
    cost = (SegmentCost(x, max_units=params.max_units, weights=weights) if limits is None
            else limits.cost(x, params.max_units if segments is None
                             else exact_k_bound(len(x), segments, params.max_units, EXACT_SPAN_BUDGET), weights))
    if segments is not None and limits is None:
        # a few segments of a long text are each longer than the usual bound of max_units items
        beta, extra = exact_k_objective(cost, x, params, penalty, tokens, segments=segments, cut_prior=cut_prior)
        cuts = partition_k_long(x, min(segments, cost.n), params.max_units, weights, penalty=beta, extra=extra)
    else:
        cuts = search_cuts(cost, x, params, segments=segments, penalty=penalty, tokens=tokens,
                           prior=None if limits is None else limits.length_prior, cut_prior=cut_prior, memo=memo)
    if limits is not None and limits.fits is not None:
        cuts = repair_cuts(cost, cuts, limits.fits)
    if segments is None and (limits is None or limits.target_tokens is None):
        floor = params.min_confidence if min_confidence is None else min_confidence
        cuts, sure = gate(x if raw is None else raw, weights, cuts, params.min_evidence, floor, params.evidence, None
                          if limits is None else limits.span_fits, raw is None and (params.center or first is not None), came,
                          anchors=None if cut_prior is None else cut_prior.anchors())
    else:
        sure = confidences(x if raw is None else raw, weights, cuts, params.evidence, came)
    scores = boundary_strength(cost, cuts)
    return Boundaries(cuts if first is None else [int(first[c]) for c in cuts], scores, sure)


def document_boundaries(doc: Document, x: np.ndarray, request: SearchRequest, params: TopicParams | None = None,
                        headings_up_to: int | None = None, allowed=None,
                        memo: StatisticsMemo | None = None) -> Boundaries:
    """Topic boundaries of one document: the search's preparation from its features, then :func:`topic_boundaries`.

    ``x [U, D]``: the unit vectors of ``doc``'s units.  From the document come the
    line groups and headings the search compares as one item (its features, derived
    once: :class:`~headseg.segmenter.document.Document`); from ``request`` the hard
    size limits, the size target, the number of segments, the penalty and its scale;
    under a size target, the structural prior that makes a cut at a line break or
    before a heading cheaper (:func:`~headseg.segmenter.lines.cut_discounts`).  The
    discounts belong to the target, so with exactly ``request.segments`` segments,
    where the target is not paid, they are not either.  The document's Markdown
    structure (None: plain text), down to heading level ``headings_up_to`` (None:
    every heading; a segment tree's coarser levels drop the deeper ones), enters as a
    cut prior too (:func:`~headseg.segmenter.blocks.structure_prior`: no cut inside a
    block that fits the limits, a bonus before a heading); its headings replace the
    heuristic ones; ``allowed`` and ``memo``: as :func:`topic_search`'; the confidence a boundary needs
    is ``request.min_confidence`` (None: ``params.min_confidence``).
    Returns the unit indices that open segments 2..m, their strengths and confidences (:class:`Boundaries`).
    """
    params = params or TopicParams()
    structure = doc.structure
    if structure is not None and headings_up_to is not None:
        structure = structure.up_to(headings_up_to)
    units, tokens, same_line = doc.units, doc.unit_tokens, doc.same_line
    # a long block kept whole; the request's scale on every penalty and prior (a tree's coarser levels)
    params = replace(params, max_units=units_bound(units, structure, params.max_units),
                     scale=params.scale * request.scale)
    own = params.heading_tokens
    marked = None if structure is None else heading_mask(units, structure)
    target = request.target_tokens
    if target is None or request.segments is not None:
        headings = doc.headings(own) if marked is None else marked
        bonus = paragraph_bonus(doc.paragraph_starts, params.paragraph_bonus, params.paragraph_count,
                                params.paragraph_surcharge)
        prior = None if bonus is None else CutPrior.of_bonus(bonus)
    else:
        titled = (doc.headings(max(own, DISCOUNT_HEADING_TOKENS)) if marked is None
                  else marked & (tokens <= DISCOUNT_HEADING_TOKENS))
        headings = titled if marked is not None else (titled & (tokens <= own) if own
                                                      else np.zeros(len(units), dtype=bool))
        prior = CutPrior.of_bonus(cut_discounts(doc.text, units, tokens, same_line,
                                                headings=titled & (tokens <= DISCOUNT_HEADING_TOKENS)))
    shaped = structure_prior(doc, structure, request.max_chars, request.max_tokens, params.max_units)
    if shaped is not None:
        prior = shaped if prior is None else prior.combine(shaped)
    if target is None and doc.prose:
        # prose in paragraphs: its sentences are compared one by one, never as one line's group (under
        # a size target the chunks keep the groups their discounts were chosen with, docs/segmenter.md)
        same_line = np.zeros(len(units), dtype=bool)
    limits = SizeLimits.of(doc, request.max_chars, request.min_chars, request.max_tokens, target)
    found = topic_search(x, params, request.segments, request.penalty, tokens=tokens, same_line=same_line,
                         headings=headings, limits=limits, cut_prior=prior, allowed=allowed, memo=memo,
                         min_confidence=request.min_confidence)
    if target is not None and request.segments is None and request.keep_apart is not None:  # never glue subjects
        free = document_boundaries(doc, x, replace(request, target_tokens=None, keep_apart=None), params,
                                   headings_up_to, allowed, memo)
        cuts = keep_apart(x, unit_weights(tokens, params), tokens, found.cuts, free.cuts, free.confidence,
                          request, params.evidence, doc.units, params.min_evidence)
        found = split_at(x, tokens, cuts, params) if cuts != list(found.cuts) else found
    return found


def split_at(x: np.ndarray, tokens, cuts: list[int], params: TopicParams) -> Boundaries:
    """``cuts`` of unit vectors ``x [U, D]`` (``tokens [U]``), their strengths and confidences measured anew."""
    v = prepare_vectors(np.asarray(x, dtype=np.float64), params)
    w = unit_weights(tokens, params)
    return Boundaries(cuts, boundary_strength(SegmentCost(v, weights=w), cuts),
                      confidences(x, w, cuts, params.evidence))


def topic_cuts(x: np.ndarray, params: TopicParams | None = None, segments: int | None = None,
               penalty: float | None = None, unit_tokens=None, lines=None, headings=None) -> list[int]:
    """Topic boundaries (unit indices) of raw unit vectors ``x [n, D]``, without size limits.

    :func:`topic_boundaries`, the search :meth:`Segmenter.segment` runs, for vectors computed elsewhere (cached
    for a sweep, say); ``unit_tokens [n]`` gives the unit weights and the short-segment surcharge, ``lines [n]``
    the line each unit starts on (for the line groups; without it, or without tokens, no groups), ``headings [n]``
    which units are headings (:func:`~headseg.segmenter.lines.heading_units`; the search cannot then cut
    between a heading and the unit after it)."""
    same_line = None
    if unit_tokens is not None and (lines is not None or headings is not None):
        lines = np.arange(len(x)) if lines is None else np.asarray(lines)
        same_line = np.concatenate([[False], lines[1:] == lines[:-1]])
    return topic_boundaries(x, params, segments, penalty, tokens=unit_tokens, same_line=same_line,
                            headings=headings)[0]
