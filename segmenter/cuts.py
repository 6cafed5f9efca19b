"""Where a segment may open, and what opening one there costs: the search's structural prior.

The topic search minimises one objective on every path (``search.span_objective``)::

    Σ_segments  scatter(a, b) + β(a) · (1 − bonus(a)) + extra(a, b)     subject to allowed(a)

``β(a)`` is the local penalty the vectors give (``topics.boundary_penalty``); ``bonus`` and
``allowed`` come from the text's structure, never from the vectors, and live here in one frozen
:class:`CutPrior` per document: a cut at a line break or before a heading is cheaper under a size
target (``lines.cut_discounts``), a segment may not open inside a block that fits the limits, a
heading's level anchors the segments it opens.  The prior enters the search only as a per-start
cost array (:meth:`CutPrior.start_cost`), which every search path already takes, so no search
path reads the text.  docs/segmenter.md, "Priors and constraints in the search", has the design.

Everything here is O(U) in the number of units.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from headseg.analysis.errors import HeadsegError


@dataclass(frozen=True)
class CutPrior:
    """Per unit ``i`` of a document: may a segment open there, and what it saves of the penalty there.

    * ``allowed [U]`` bool: False where no segment may open (``allowed[0]`` is always True: the
      first segment opens there);
    * ``bonus [U]`` float: the fraction of the local penalty ``β(i)`` a segment opening at unit
      ``i`` saves (1: the cut is free; negative: a surcharge); ``bonus[0]`` is never paid;
    * ``level [U]`` int: the heading level (1 the highest) of the heading unit ``i`` opens with,
      0 where it opens with none.

    Raises :class:`HeadsegError` on arrays of different lengths, a non-finite bonus, or a
    first unit that is not allowed.
    """

    allowed: np.ndarray
    bonus: np.ndarray
    level: np.ndarray

    def __post_init__(self) -> None:
        allowed = np.asarray(self.allowed, dtype=bool).reshape(-1)
        bonus = np.asarray(self.bonus, dtype=np.float64).reshape(-1)
        level = np.asarray(self.level, dtype=np.int64).reshape(-1)
        if not len(allowed) == len(bonus) == len(level):
            raise HeadsegError(f"a cut prior needs one value per unit (allowed {len(allowed)}, "
                               f"bonus {len(bonus)}, level {len(level)})")
        if not np.all(np.isfinite(bonus)):
            raise HeadsegError("a cut prior's bonus must be finite")
        if len(allowed) and not allowed[0]:
            raise HeadsegError("a cut prior must allow the first unit: the first segment opens there")
        if np.any(level < 0):
            raise HeadsegError("a heading level is 0 (none) or positive")
        object.__setattr__(self, "allowed", allowed)
        object.__setattr__(self, "bonus", bonus)
        object.__setattr__(self, "level", level)

    @classmethod
    def neutral(cls, n: int) -> "CutPrior":
        """The prior of ``n`` units that says nothing: every cut allowed, no bonus, no heading."""
        return cls(np.ones(n, dtype=bool), np.zeros(n), np.zeros(n, dtype=np.int64))

    @classmethod
    def of_bonus(cls, bonus) -> "CutPrior":
        """Every cut allowed, ``bonus [U]`` saved (the first unit's entry is ignored), no heading."""
        bonus = np.asarray(bonus, dtype=np.float64).reshape(-1)
        return cls(np.ones(len(bonus), dtype=bool), bonus, np.zeros(len(bonus), dtype=np.int64))

    @classmethod
    def only_at(cls, n: int, starts) -> "CutPrior":
        """``n`` units where a segment may open only at the first and at the unit indices ``starts``
        (each inside ``1..n − 1``, else :class:`HeadsegError`); no bonus, no heading."""
        starts = np.unique(np.asarray(starts, dtype=np.int64).reshape(-1))
        if starts.size and (starts[0] < 1 or starts[-1] >= n):
            raise HeadsegError(f"an allowed cut must be a unit index inside 1..{n - 1}")
        allowed = np.zeros(n, dtype=bool)
        allowed[0] = True
        allowed[starts] = True
        return cls(allowed, np.zeros(n), np.zeros(n, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.allowed)

    def anchors(self) -> np.ndarray | None:
        """The units where a heading opens a section and a segment may open (None: none): where the
        gate puts the boundaries the evidence keeps (:func:`~headseg.segmenter.gate.to_anchors`)."""
        found = np.flatnonzero(self.allowed & (self.level > 0))
        return found if len(found) else None

    @property
    def constrains(self) -> bool:
        """Whether some cut after the first unit is forbidden."""
        return bool(len(self.allowed) > 1 and not self.allowed[1:].all())

    def combine(self, other: "CutPrior") -> "CutPrior":
        """Both priors at once: a cut allowed by both, their bonuses added, the higher heading kept
        (the smaller non-zero level)."""
        if len(other) != len(self):
            raise HeadsegError(f"cannot combine cut priors of {len(self)} and {len(other)} units")
        a, b = self.level, other.level
        level = np.where((a > 0) & (b > 0), np.minimum(a, b), np.maximum(a, b))
        return CutPrior(self.allowed & other.allowed, self.bonus + other.bonus, level)

    def grouped(self, first: np.ndarray) -> "CutPrior":
        """The prior over groups of units, group ``g`` starting at unit ``first[g]``: a group opens
        where its first unit would."""
        first = np.asarray(first, dtype=np.int64)
        return CutPrior(self.allowed[first], self.bonus[first], self.level[first])

    def start_cost(self, beta: np.ndarray) -> np.ndarray:
        """``[n + 1]``: what opening a segment at item ``a`` costs beyond ``beta[a]`` (``beta [n + 1]``,
        the search's per-start penalty): ``−bonus[a] · beta[a]``, and ``+inf`` where not allowed.
        The first item opens the first segment (no cut: 0); index ``n`` is never a start (0)."""
        n = len(self.allowed)
        beta = np.asarray(beta, dtype=np.float64)
        if beta.shape != (n + 1,):
            raise HeadsegError(f"a per-start penalty of {n} items needs {n + 1} entries, got {beta.shape}")
        out = np.zeros(n + 1)
        out[:n] = -self.bonus * beta[:n]
        out[:n][~self.allowed] = np.inf
        out[0] = 0.0
        return out


def passable(allowed: np.ndarray, limits, max_units: int) -> bool:
    """Whether a search can get through ``allowed [n]``: every stretch from one allowed start to the
    next holds at most ``max_units`` items and fits ``limits``' caps
    (:class:`~headseg.segmenter.limits.SizeLimits` over the same items; None: no limit).  O(n)."""
    opened = np.append(np.flatnonzero(allowed), len(allowed))
    if len(opened) > 1 and np.diff(opened).max() > max_units:
        return False
    if limits is None:
        return True
    sizes = limits.sizes.reshape(len(allowed), -1)
    total = np.add.reduceat(sizes, opened[:-1], axis=0) if len(opened) > 1 else sizes[:0]
    return all(cap is None or not np.any(total[:, c] > cap) for c, cap in enumerate(limits.caps))


def nested_prior(prior: CutPrior | None, n: int, starts, limits, max_units: int) -> tuple[CutPrior, np.ndarray]:
    """The prior of a segment tree's coarse level over ``n`` units: a segment opens only at the first
    unit and the finer level's ``starts``, and where ``prior`` (the text's structure, None: none)
    allows; with the finer starts after the first as an array (where groups of units must open).

    The finer level already kept the structure under its own, smaller limits; the coarse level's
    larger ones may forbid more (a code block that fits them is kept whole), and where the two
    together leave a stretch the search cannot get through (``limits``, ``max_units``: as
    :func:`passable`), the finer starts alone decide, the structure's bonuses kept.
    """
    only = CutPrior.only_at(n, starts)
    both = only if prior is None else prior.combine(only)
    if prior is not None and both.constrains and not passable(both.allowed, limits, max_units):
        both = CutPrior(only.allowed, prior.bonus, prior.level)
    return both, np.flatnonzero(only.allowed[1:]) + 1
