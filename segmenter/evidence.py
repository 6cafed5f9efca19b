"""Boundaries as evidence: how strongly a text's own unit vectors support each topic boundary.

The topic search (:mod:`~headseg.segmenter.topics`) decides *where* a segment may open from the
vectors and the text's structure (paragraph breaks, headings, size limits).  Whether a boundary is
kept is decided here, by a test of the boundary against what the same units would give without
topic structure: the units of the two segments beside a boundary, shuffled.

For a boundary at unit ``m`` between its neighbours ``a`` and ``b`` (the boundaries before and
after it, each at most ``EvidenceParams.reach`` units away), the statistic is the scatter the cut
saves, ``S(a, b) − S(a, m) − S(m, b)`` with ``S`` the weighted scatter of the search
(:class:`~headseg.segmenter.search.SegmentCost`).  Its null: the same units in a random order, cut
at the *best* place (the search chose ``m`` among many places, so the null takes the best of all of
them); ``draws`` shuffles: ``z = (saving − mean) / std`` of the null (the p-value
``(1 + #{null ≥ saving}) / (1 + draws)`` runs out of resolution on strong boundaries; ``z`` does not).
``z`` is relative to the text's own scatter, so a text of one subject still has a best cut that beats
its shuffles; the evidence of the boundary adds how alike its two sides are in the model's own space
(:func:`likeness`, absolute): ``z + likeness_weight · (likeness_center − cos)``.  Its confidence
(:func:`confidence`) is the calibrated probability that a boundary of that ``z`` and that likeness
between segments of that length is a topic boundary of a labelled reference: a logistic regression on
the two parts and the length, fitted on the dev families (``python -m benchmarks.calibration``;
docs/results.md has the reliability table, in sample and leaving each family out).
Evidence and confidence differ: a long lecture's boundaries carry strong evidence (many units on
each side) yet are less often a reference's (its reference segments are long), so whether a
boundary exists is decided on the evidence, and the confidence says how sure a user can be of it.

:func:`~headseg.segmenter.gate.gate` (its own module) removes the boundaries whose evidence is below
``min_evidence`` (or whose confidence is below ``min_confidence``), the weakest first, and tests its
neighbours again beside their new, merged neighbours: a text of one subject in three paragraphs loses
both paragraph cuts, one of two subjects keeps the cut between them.

Cost: the units are projected once onto ``dims`` fixed random directions (the test is exact in that
space: the observed saving and its null are both measured there); one test is O(draws · n · dims)
for the ``n ≤ 2 · reach`` units beside the boundary, plus O(n · D) for the likeness in the vectors'
own ``D`` dimensions, so the gate is O(C · reach · (draws · dims + D)) for ``C`` boundaries, linear
in the document's length.  Deterministic: each test's shuffles are seeded
by its span.

Source: permutation tests of change points (the CUSUM-type maximal statistic under exchangeability;
e.g. Antoch & Hušková 2001); the scatter is the linear-kernel cost of Arlot et al. 2019.
"""

from __future__ import annotations

import functools
import hashlib
import math
import threading
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from headseg.analysis.errors import HeadsegError, shown
from headseg.analysis.profile import HeadProfile, default_profile_path


#: the least and the most a boundary's confidence is: the dev families hold too few boundaries beyond
#: these (3 of 2,427 below 0.05, 16 above 0.98) to say that a boundary is all but certainly wrong or right,
#: and ``min_confidence=1`` keeps no boundary
CONFIDENCE_RANGE = (0.01, 0.99)


@dataclass(frozen=True)
class EvidenceParams:
    """Knobs of the boundary test and its calibration (defaults used everywhere; docs/segmenter.md,
    "Boundaries as evidence")."""

    #: shuffles per test
    draws: int = 64
    #: principal directions of the text's unit vectors the test reads (:func:`project`)
    dims: int = 32
    #: the most units on each side of a boundary its test reads (keeps each test O(reach))
    reach: int = 200
    #: evidence a boundary is sure of beside its own neighbours: a text with one has topics
    #: (:func:`any_evidence`), and a size target never merges across it (``KEEP_APART``)
    sure: float = 3.0
    #: the calibration of :func:`confidence`, a logistic regression of "the boundary is a reference's" on
    #: what the test measured: ``sigmoid(bias + z_weight · z + alike_weight · likeness + length_weight · ln n)``
    #: (``z`` the permutation's, ``likeness`` the cosine of the two sides' mean directions, ``n`` the units
    #: of the two segments beside the boundary), kept within :data:`CONFIDENCE_RANGE`.
    #: ``benchmarks/calibration.py --fit`` fits it on the dev families' boundaries, each family weighted
    #: (size^-0.75) so that no large family sets the scale for the others (docs/results.md: leave one family
    #: out, every bin within ±0.1; the evidence summed into one number, then isotonic steps, missed 5 of 9)
    bias: float = 3.420
    z_weight: float = 0.053
    alike_weight: float = -7.569
    length_weight: float = 0.099
    seed: int = 20261205
    #: the evidence's absolute term (:func:`likeness`): a boundary between sides whose mean unit directions
    #: are more alike than ``likeness_center`` (cosine; the median of the one-subject dev texts' paragraph
    #: cuts is 0.41) needs more of the permutation's ``z``, ``likeness_weight`` per unit of cosine; sides
    #: less alike need less.  The permutation test is relative to the text's own scatter, so a text of one
    #: subject whose paragraphs differ a little still has a best cut; how alike its sides are in the
    #: model's own space tells it apart (docs/segmenter.md, "Boundaries as evidence", has the sweep)
    likeness_weight: float = 4.0
    likeness_center: float = 0.405

    def __post_init__(self) -> None:
        for name in ("draws", "dims", "reach"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 2:
                raise HeadsegError(f"{name} must be an integer of at least 2 (got {shown(v)})")
        for name in ("bias", "z_weight", "alike_weight", "length_weight", "likeness_weight", "likeness_center"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise HeadsegError(f"{name} must be a finite number (got {shown(v)})")
        if self.likeness_weight < 0:
            raise HeadsegError(f"likeness_weight must be at least 0 (got {shown(self.likeness_weight)})")
        if not self.z_weight > 0:
            raise HeadsegError(f"z_weight must be positive: more evidence, more confidence (got {shown(self.z_weight)})")
        if self.alike_weight > 0:
            raise HeadsegError("alike_weight must be at most 0: sides more alike, less confidence "
                               f"(got {shown(self.alike_weight)})")


#: the last few projections (:func:`project`), by their vectors' bytes and the knobs: a tree's levels and a
#: size target test the same units' boundaries again and again (16 projections of one document for
#: ``--level tree --max-tokens 128``: 31 of 40 s on 100 KB of Markdown, issue 49 item 6)
_PROJECTED: dict = {}
_PROJECTED_LOCK = threading.Lock()
_PROJECTED_KEEP = 4


def project(x: np.ndarray, params: EvidenceParams, own: bool = False) -> np.ndarray:
    """``x [U, D]`` on its ``params.dims`` principal directions ``[U, ≤ dims]`` (centred on its mean):
    the directions in which the text's units differ most, where its topics differ.  Exact SVD while
    the text is small; beyond, a seeded randomized range finder (Halko et al. 2011) with two power
    iterations, O(U · D · dims).  The same vectors (byte for byte) and knobs give the same array, computed
    once while among the last :data:`_PROJECTED_KEEP` (read-only: every caller shares it).  ``own``: ``x`` is
    the caller's to change, and is centred in place (the search's gate: a copy of the vectors fewer at its peak)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise HeadsegError(f"unit vectors need shape [n, D], got {x.shape}")
    key = (x.shape, hashlib.blake2b(np.ascontiguousarray(x).data, digest_size=16).digest(), params)
    with _PROJECTED_LOCK:
        y = _PROJECTED.pop(key, None)
        if y is not None:
            _PROJECTED[key] = y  # the most recent last
            return y
    y = _project(x, params, own)
    y.flags.writeable = False
    with _PROJECTED_LOCK:
        _PROJECTED[key] = y
        while len(_PROJECTED) > _PROJECTED_KEEP:
            del _PROJECTED[next(iter(_PROJECTED))]
    return y


def _project(x: np.ndarray, params: EvidenceParams, own: bool = False) -> np.ndarray:
    """:func:`project`, computed (``x`` centred in place when ``own``)."""
    if own:
        x -= x.mean(axis=0, keepdims=True)
    else:
        x = x - x.mean(axis=0, keepdims=True)
    u, d = x.shape
    k = params.dims
    if min(u, d) <= k:
        return x if d <= u else _svd_scores(x, k)
    if min(u, d) <= 4 * k:
        return _svd_scores(x, k)
    rng = np.random.default_rng([params.seed, u, d])
    q = np.linalg.qr(x @ rng.standard_normal((d, k + 16)))[0]
    for _ in range(2):
        q = np.linalg.qr(x @ (x.T @ q))[0]
    ub, s, _ = np.linalg.svd(q.T @ x, full_matrices=False)
    return (q @ ub[:, :k]) * s[:k]


def _svd_scores(x: np.ndarray, k: int) -> np.ndarray:
    """The coordinates of the rows of ``x`` on its top ``k`` right singular vectors."""
    u, s, _ = np.linalg.svd(x, full_matrices=False)
    return u[:, :k] * s[:k]


def _savings(cx: np.ndarray, cw: np.ndarray) -> np.ndarray:
    """The scatter saved by each inner cut of spans given by prefix sums ``cx [..., n + 1, k]``,
    ``cw [..., n + 1]``: ``[..., n − 1]``, the cut before item ``j`` for ``j = 1..n−1`` (the
    within-span scatter minus both parts', which needs no squared norms)."""
    tot_x, tot_w = cx[..., -1:, :], cw[..., -1:]
    left_x, left_w = cx[..., 1:-1, :], cw[..., 1:-1]
    right_x, right_w = tot_x - left_x, tot_w - left_w
    whole = np.einsum("...ik,...ik->...i", tot_x, tot_x) / tot_w
    return (np.einsum("...ik,...ik->...i", left_x, left_x) / left_w
            + np.einsum("...ik,...ik->...i", right_x, right_x) / right_w - whole)


def boundary_z(y: np.ndarray, w: np.ndarray, a: int, m: int, b: int, params: EvidenceParams) -> tuple[float, int]:
    """The evidence ``z`` of a boundary at ``m`` between neighbours ``a < m < b`` (projected vectors
    ``y [U, k]``, unit weights ``w [U]``), and the units it read: its saving against the best cut of
    the same units shuffled (at most ``params.reach`` units on each side)."""
    a, b = max(a, m - params.reach), min(b, m + params.reach)
    n = b - a
    ys, ws = y[a:b], w[a:b]
    wy = ys * ws[:, None]
    cx = np.vstack([np.zeros((1, y.shape[1])), np.cumsum(wy, axis=0)])
    cw = np.concatenate([[0.0], np.cumsum(ws)])
    observed = float(_savings(cx, cw)[m - a - 1])
    # seeded by the span: the same boundary between the same neighbours always reads the same
    rng = np.random.default_rng([params.seed, a, m, b])
    order = np.argsort(rng.random((params.draws, n)), axis=1)
    pcx = np.concatenate([np.zeros((params.draws, 1, y.shape[1])), np.cumsum(wy[order], axis=1)], axis=1)
    pcw = np.concatenate([np.zeros((params.draws, 1)), np.cumsum(ws[order], axis=1)], axis=1)
    null = _savings(pcx, pcw).max(axis=1)
    spread = float(null.std())
    if spread <= 1e-12 * max(abs(observed), 1.0):
        return 0.0, n  # every order saves the same: the units are alike, nothing to tell
    return float((observed - null.mean()) / spread), n


def _reads(profile: HeadProfile) -> tuple:
    """What a profile makes the unit vectors of: its heads, their weights, the topic selection, the model's share."""
    return (profile.heads, profile.weights, tuple(profile.topic_selection()), profile.topic_output_weight)


@functools.lru_cache(maxsize=1)
def _shipped_reads() -> tuple | None:
    path = default_profile_path()
    try:
        return _reads(HeadProfile.load(path)) if path.is_file() else None
    except (HeadsegError, OSError, ValueError):  # no readable shipped profile: no profile is the fitted one
        return None


def evidence_for(profile: HeadProfile) -> EvidenceParams:
    """The evidence's knobs for a segmenter reading the heads of ``profile``: the defaults where it reads the
    heads they were fitted with (the profile shipped for the embedded model, whatever weights it is keyed to:
    a copy of the model restored from half precision reads the same), else the same without the likeness
    term.  How alike two sides look in a model's space is that model's own scale (a cosine of 0.4 between
    unrelated subjects for one, 0.9 for an anisotropic other), so a centre fitted on one model would
    remove every boundary of another; the permutation's ``z`` is scale-free.  So is the confidence then: the
    calibration of :data:`SCALE_FREE`, which reads no likeness (fitted on the embedded model's boundaries too,
    so for another model a confidence ranks its boundaries but is not calibrated)."""
    try:
        same = _reads(profile) == _shipped_reads()
    except (HeadsegError, ValueError):  # a profile whose topic selection needs the model's shape
        same = False
    return EvidenceParams() if same else EvidenceParams(likeness_weight=0.0, **SCALE_FREE)


#: the calibration of a model whose likeness scale is not the embedded model's (:func:`evidence_for`): the
#: same fit without the likeness (``benchmarks/calibration.py --fit``)
SCALE_FREE = {"bias": 3.554, "z_weight": 0.092, "alike_weight": 0.0, "length_weight": -1.215}


class EvidenceInput(NamedTuple):
    """One text's units as its boundaries are tested (:func:`evidence_input`): ``y [U, k]`` projected
    (:func:`project`), ``w [U]`` their weights in the scatter, ``x [U, D]`` the unit vectors (as they came,
    or centred since: ``shift``) and ``inv [U]`` one over the norm of each as it came (0 for a zero vector):
    :func:`likeness` reads their directions."""

    y: np.ndarray
    w: np.ndarray
    x: np.ndarray
    inv: np.ndarray
    #: ``[D]`` what was taken off ``x`` since it came (its mean, where the caller centred it): the likeness
    #: reads the vectors as they came, ``x + shift``, without a copy of them
    shift: np.ndarray | None = None


class Directions(NamedTuple):
    """What :func:`likeness` needs of unit vectors that are centred afterwards (:func:`directions`)."""

    inv: np.ndarray
    shift: np.ndarray | None


def directions(x: np.ndarray, centred: bool = True) -> Directions:
    """``x [U, D]`` as it came: one over each row's norm, and the mean the caller is about to take off
    (``centred``; None otherwise).  O(U · D) time, O(U + D) memory."""
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1)
    return Directions(np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0),
                      x.mean(axis=0) if centred else None)


def evidence_input(x: np.ndarray, weights: np.ndarray | None, params: EvidenceParams,
                   own: bool = False, came: Directions | None = None) -> EvidenceInput:
    """:class:`EvidenceInput` of unit vectors ``x [U, D]``, ``weights [U]`` (None: equal).  ``came``: what
    :func:`directions` said of ``x`` before the caller centred it (None: ``x`` is as it came); ``own``: ``x``
    is the caller's to change (:func:`project` centres it in place), honoured where the likeness can still
    read the vectors as they came (``came`` given, or no likeness term)."""
    x = np.asarray(x, dtype=np.float64)
    if came is None:
        came = directions(x, centred=False)
    if came.shift is None and (params.likeness_weight or params.alike_weight):
        own = False  # centred in place, x would no longer be the vectors as they came
    w = np.ones(len(x)) if weights is None else np.asarray(weights, dtype=np.float64)
    return EvidenceInput(project(x, params, own), w, x, came.inv, came.shift)


def likeness(t: EvidenceInput, a: int, m: int, b: int) -> float:
    """The cosine between the mean directions of units ``a..m−1`` and ``m..b−1`` (each unit vector over
    its norm; 0 where a side has none).  Absolute where :func:`boundary_z` is relative: the model's own
    space says how alike the two sides are, whatever the rest of the text.  O((b − a) · D)."""
    left = t.inv[a:m] @ t.x[a:m]
    right = t.inv[m:b] @ t.x[m:b]
    if t.shift is not None:  # the vectors as they came: each row plus what centring took off
        left = left + t.inv[a:m].sum() * t.shift
        right = right + t.inv[m:b].sum() * t.shift
    den = float(np.linalg.norm(left) * np.linalg.norm(right))
    return float(left @ right) / den if den > 0 else 0.0


class Parts(NamedTuple):
    """What the test of one boundary measured (:func:`boundary_parts`)."""

    #: the permutation's ``z`` (:func:`boundary_z`)
    z: float
    #: the cosine of the two sides' mean directions (:func:`likeness`; 0 where neither the evidence nor
    #: the confidence reads it)
    likeness: float
    #: the units read
    n: int


def boundary_parts(t: EvidenceInput, a: int, m: int, b: int, params: EvidenceParams) -> Parts:
    """The test of a boundary at ``m`` between neighbours ``a < m < b`` (at most ``params.reach`` units on
    each side): the permutation's ``z``, the likeness of the same units' two sides, the units read."""
    z, n = boundary_z(t.y, t.w, a, m, b, params)
    reads = params.likeness_weight or params.alike_weight
    cos = likeness(t, max(a, m - params.reach), m, min(b, m + params.reach)) if reads else 0.0
    return Parts(z, cos, n)


def evidence_of(parts: Parts, params: EvidenceParams) -> float:
    """A boundary's evidence: the permutation's ``z`` plus ``likeness_weight · (likeness_center − likeness)``."""
    if not params.likeness_weight:
        return parts.z
    return parts.z + params.likeness_weight * (params.likeness_center - parts.likeness)


def boundary_evidence(t: EvidenceInput, a: int, m: int, b: int, params: EvidenceParams) -> tuple[float, int]:
    """The evidence of a boundary at ``m`` between neighbours ``a < m < b`` (:func:`evidence_of` of
    :func:`boundary_parts`), and the units it read."""
    parts = boundary_parts(t, a, m, b, params)
    return evidence_of(parts, params), parts.n


def confidence(parts: Parts, params: EvidenceParams | None = None) -> float:
    """The calibrated confidence of a boundary whose test measured ``parts``, in :data:`CONFIDENCE_RANGE`:
    ``sigmoid(bias + z_weight · z + alike_weight · likeness + length_weight · ln n)``, to three decimals."""
    p = params or EvidenceParams()
    t = (p.bias + p.z_weight * parts.z + p.alike_weight * parts.likeness
         + p.length_weight * math.log(max(parts.n, 2)))
    v = 1.0 / (1.0 + math.exp(-t)) if t > -700 else 0.0  # exp(700) is near float64's largest
    # three decimals: a calibrated share is good to a few hundredths, and the vectors of one text differ in
    # their last bits with the batch and the path that computed them; rounded, every path says the same
    return round(min(max(v, CONFIDENCE_RANGE[0]), CONFIDENCE_RANGE[1]), 3)


__all__ = ("CONFIDENCE_RANGE", "Directions", "EvidenceInput", "EvidenceParams", "Parts", "SCALE_FREE",
           "boundary_evidence", "boundary_parts", "boundary_z", "confidence", "directions", "evidence_for",
           "evidence_input", "evidence_of", "likeness", "project")
