"""Hard size limits: units cut to fit, the limits as constraints of the search, and their final check.

``max_chars`` and ``max_tokens`` are never exceeded.  Three steps keep that true:

1. :func:`split_oversized` cuts any unit over a limit (at whitespace near its
   middle, else at a token start, never inside a grapheme cluster unless one
   cluster is itself over the limit), so every limit is satisfiable by single
   units;
2. :class:`SizeLimits` makes the limits constraints of the optimal partition
   (:class:`~headseg.segmenter.search.SegmentCost` forbids spans over the
   character limit, :class:`TwoLimitCost` over the token limit too), with
   ``min_chars`` as a soft lower bound;
3. a foreign token counter's counts need not add up over concatenation (a
   word cut in two can cost more tokens), so the search uses an additive
   estimate (:func:`additive_sizes`) and :func:`repair_cuts`
   splits any final segment the counter itself finds over the limit.

Counting is O(1) per span with the model's tokens (prefix positions) and one
counter call per distinct span otherwise (memoised).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Callable, Sequence

import numpy as np
import regex

from headseg.analysis.errors import HeadsegError
from headseg.analysis.text import TokenizedText

from .document import Document, TokenCount
from .search import SegmentCost


def split_oversized(text: str, doc: TokenizedText, units: Sequence[tuple[int, int]], max_chars: int | None,
                    max_tokens: int | None, count: TokenCount | None = None) -> list[tuple[int, int]]:
    """Split any unit over a hard limit at whitespace (else anywhere) so every limit is satisfiable.

    Token counts come from ``count`` (the text's :class:`~headseg.segmenter.document.TokenCount`;
    default: the model's tokens in ``doc``).
    Cuts fall on grapheme cluster boundaries (never inside an emoji sequence or
    between a letter and its combining mark), unless one cluster is itself over
    the limit: the limit is hard.
    """
    if max_chars is None and max_tokens is None:
        return units
    count = count or TokenCount(text, doc, None)
    tok_start = doc.offsets[:, 0] if len(doc) else np.zeros(0, np.int64)
    tok_end = doc.offsets[:, 1] if len(doc) else np.zeros(0, np.int64)
    out = []
    for a, b in units:
        stack = [(a, b)]
        clusters = None
        while stack:
            s, e = stack.pop()
            over_chars = max_chars is not None and e - s > max_chars
            n_tok = count.span(s, e) if max_tokens is not None and not over_chars else 0
            too_long = over_chars or (max_tokens is not None and n_tok > max_tokens)
            if not too_long:
                out.append((s, e))
                continue
            if e - s <= 1:
                raise HeadsegError(f"max_tokens={max_tokens} cannot be met: {text[s:e]!r} alone counts "
                                   f"{n_tok} tokens")
            if clusters is None:
                clusters = grapheme_starts(text, a, b)  # once per unit, only for units that need a cut
            cut = best_cut(text, s, e, tok_start, tok_end, clusters)
            stack.append((cut, e))
            stack.append((s, cut))
    return out


def additive_sizes(doc: Document, max_tokens: float) -> tuple[np.ndarray, float]:
    """Per-unit token sizes of ``doc``'s units and the limit on their sum, for the search.

    The model's tokens add up exactly (the document's unit token counts).  A
    counter's count of the empty string (special tokens it adds to every string,
    say) is charged once per segment, not once per unit: without that, ten units
    would pay for ``[CLS]``/``[SEP]`` ten times.
    """
    count = doc.count
    if count.exact:
        return doc.unit_tokens.astype(np.float64), float(max_tokens)
    overhead = count.counter("")
    sizes = np.asarray([max(count.span(a, b) - overhead, 0) for a, b in doc.units], dtype=np.float64)
    return sizes, float(max_tokens - overhead)


class TwoLimitCost(SegmentCost):
    """:class:`SegmentCost` with its character limit, plus a limit on the sum of per-unit token sizes."""

    def __init__(self, x, chars, toks, max_chars, max_toks, min_chars, max_units, weights=None):
        super().__init__(x, chars, max_chars, min_chars, max_units, weights)
        self.ct = np.concatenate([[0.0], np.cumsum(toks)])
        self.max_toks = max_toks
        if toks.size and toks.max() > max_toks:
            raise HeadsegError("a single unit is longer than the token limit; split units first")

    def costs_ending_at(self, b, opens=None):
        """Start units ``[k]`` and costs ``[k]`` of the allowed segments ending at unit ``b`` (exclusive)
        (``opens``: as :meth:`SegmentCost.costs_ending_at`'s)."""
        a, c = super().costs_ending_at(b, opens)
        ok = self.ct[b] - self.ct[a] <= self.max_toks
        return a[ok], c[ok]


@dataclass(frozen=True)
class SizeLimits:
    """The hard limits of one document's search, per search item (a unit, or a group of units).

    ``sizes`` is ``[n]`` characters, or ``[n, 2]`` characters and additive
    token sizes when there is a token limit; ``fits(a, b)`` is the exact check
    of items ``a..b-1`` for a token counter whose counts do not add up (None
    when the additive sizes are exact).
    """

    sizes: np.ndarray
    max_chars: float | None = None
    min_chars: float | None = None
    max_tokens: float | None = None
    fits: Callable[[int, int], bool] | None = None
    #: soft size target in the token column's units (:meth:`length_prior`); None: no target
    target_tokens: float | None = None

    @classmethod
    def of(cls, doc: Document, max_chars: int | None, min_chars: int | None, max_tokens: int | None,
           target_tokens: float | None = None) -> "SizeLimits | None":
        """The limits of ``doc``'s units, or None when no limit or target is set.

        ``target_tokens`` without ``max_tokens`` adds the token column with no cap
        (an infinite limit), so the target is measured like the limit would be.
        """
        if max_chars is None and max_tokens is None and min_chars is None and target_tokens is None:
            return None
        # The search runs on characters (max_chars, min_chars) and forbids spans over
        # the token limit on the side, so min_chars stays in characters.
        units, count = doc.units, doc.count
        sizes = np.asarray([b - a for a, b in units], dtype=np.float64)
        token_limit, fits, target = None, None, None
        if max_tokens is not None or target_tokens is not None:
            cap = max_tokens if max_tokens is not None else 2 ** 62
            toks, token_limit = additive_sizes(doc, cap)
            sizes = np.stack([sizes, toks], axis=1)
            if target_tokens is not None:
                # a counter's per-string overhead is charged once per segment, as for the limit
                target = max(float(target_tokens) - (cap - token_limit), 1.0)
            if max_tokens is None:
                token_limit = np.inf
            elif not count.exact:
                def fits(a: int, b: int) -> bool:
                    return count.span(units[a][0], units[b - 1][1]) <= max_tokens
        return cls(sizes, None if max_chars is None else float(max_chars),
                   None if min_chars is None else float(min_chars), token_limit, fits, target)

    def length_prior(self, beta: np.ndarray):
        """The size target as an extra cost of each segment, or None without a target.

        A segment of ``T`` tokens starting at item ``a`` pays ``beta[a] · ((T − target) / target)²``
        (``beta [n + 1]``: the search's per-start penalty): one more segment's price at twice or at
        none of the target, a small fraction of it near the target, so the boundaries still
        go where the topic turns (docs/segmenter.md has the measurements).  Where a cut is
        cheaper (a line break, a heading) is the structural prior's
        (:class:`~headseg.segmenter.cuts.CutPrior`), not the target's.
        Returns ``(starts [m], end) -> [m]`` for :func:`~headseg.segmenter.search.partition_penalised`.
        """
        if self.target_tokens is None or self.sizes.ndim != 2:
            return None
        ct = np.concatenate([[0.0], np.cumsum(self.sizes[:, 1])])
        target = float(self.target_tokens)

        def prior(a: np.ndarray, b: int) -> np.ndarray:
            return beta[a] * np.square((ct[b] - ct[a] - target) / target)

        return prior

    @property
    def caps(self) -> tuple[float | None, ...]:
        """The upper limit of each column of ``sizes``."""
        return (self.max_chars,) if self.sizes.ndim == 1 else (self.max_chars, self.max_tokens)

    def span_fits(self, a: int, b: int) -> bool:
        """Whether items ``a..b-1`` may be one segment under the hard limits (characters, tokens, and a
        counter's exact count); ``min_chars`` is soft and not asked.  O(1) after the first call."""
        cs = self._prefix
        total = cs[b] - cs[a]
        chars, toks = (float(total), 0.0) if total.ndim == 0 else (float(total[0]), float(total[1]))
        if self.max_chars is not None and chars > self.max_chars + 1e-9:
            return False
        if self.max_tokens is not None and toks > self.max_tokens + 1e-9:
            return False
        return self.fits is None or self.fits(a, b)

    @cached_property
    def _prefix(self) -> np.ndarray:
        """``[n + 1]`` (or ``[n + 1, 2]``) prefix sums of ``sizes``, for :meth:`span_fits`."""
        return np.concatenate([np.zeros((1,) + self.sizes.shape[1:]), np.cumsum(self.sizes, axis=0)])

    def grouped(self, first: np.ndarray) -> "SizeLimits":
        """The same limits over groups of items, group ``g`` starting at item ``first[g]``."""
        bounds = np.append(first, len(self.sizes))
        fits = self.fits
        if fits is not None:
            inner = fits

            def fits(a: int, b: int) -> bool:
                return inner(int(bounds[a]), int(bounds[b]))
        return replace(self, sizes=np.add.reduceat(self.sizes, first, axis=0), fits=fits)

    def cost(self, x: np.ndarray, max_units: int, weights: np.ndarray | None = None) -> SegmentCost:
        """The search's segment cost over items ``x [n, D]`` under these limits."""
        if self.sizes.ndim == 2 and np.isfinite(self.max_tokens):
            return TwoLimitCost(x, self.sizes[:, 0], self.sizes[:, 1], self.max_chars, float(self.max_tokens),
                                self.min_chars, max_units, weights)
        chars = self.sizes if self.sizes.ndim == 1 else self.sizes[:, 0]
        return SegmentCost(x, chars, self.max_chars, self.min_chars, max_units, weights)


def overlap_chunks(doc: Document, cuts: Sequence[int], overlap: int, max_chars: int | None,
                   max_tokens: int | None, starts: Sequence[int] | None = None,
                   begin: Callable[[int], int] | None = None) -> list[list[int]]:
    """``[start, end]`` of each segment's overlapped chunk: the segment (opened at unit ``cuts[i - 1]``,
    the first at 0) preceded by up to ``overlap`` units of the segment before it, as many as the
    chunk can hold within ``max_chars`` and ``max_tokens`` (counted by ``doc``'s token count), over
    ``doc``'s units.

    Segment ``i`` is ``text[start_i:end_i]`` with ``start_i = starts[i]`` (default: ``units[cuts[i - 1]][0]``,
    0 for the first) and ``end_i`` the next segment's start (the text's end for the last); its chunk is
    ``text[chunk_start:end_i]``, ``chunk_start`` the start of the earliest repeated unit, so
    ``text[chunk_start:start_i]`` is the repeated text (empty when nothing fits).  ``begin(offset)``:
    where a chunk opening at a unit that starts at ``offset`` begins, when the chunk fits from there
    (default: at ``offset``; the topic level gives a line of code its indentation).
    """
    units, n_text = doc.units, len(doc.text)
    edges = [0, *cuts, len(units)]
    starts = list(starts) if starts is not None else [0] + [units[c][0] for c in cuts]
    if len(starts) != len(edges) - 1:
        raise HeadsegError(f"{len(starts)} segment starts for {len(edges) - 1} segments")

    def fits(s: int, end: int) -> bool:
        return (max_chars is None or end - s <= max_chars) and \
            (max_tokens is None or doc.span_tokens(s, end) <= max_tokens)

    out = []
    for i in range(len(edges) - 1):
        end = starts[i + 1] if i + 1 < len(starts) else n_text
        chunk_start = starts[i]
        if i > 0:
            for u in range(edges[i] - 1, max(edges[i] - overlap, edges[i - 1]) - 1, -1):
                at = units[u][0]
                tries = [starts[i - 1]] if u == edges[i - 1] else dict.fromkeys((begin(at) if begin else at, at))
                s = next((s for s in tries if fits(s, end)), None)
                if s is None:
                    break
                chunk_start = s
        out.append([int(chunk_start), int(end)])
    return out


def repair_cuts(cost: SegmentCost, cuts: list[int], fits: Callable[[int, int], bool]) -> list[int]:
    """Cuts (unit indices) such that every span ``[a, b)`` of units ``fits``.

    A span that does not fit is split where the two halves are most coherent
    (least scatter), recursively; single units always fit, since
    :func:`split_oversized` made them so.
    """
    edges = [0, *cuts, cost.n]
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        stack = [(a, b)]
        while stack:
            s, e = stack.pop()
            if e - s <= 1 or fits(s, e):
                out.append(s)
                continue
            m = min(range(s + 1, e), key=lambda m: cost.cost(s, m) + cost.cost(m, e))
            stack.append((m, e))
            stack.append((s, m))
    return [c for c in out if c > 0]


_GRAPHEME = regex.compile(r"\X")


def grapheme_starts(text: str, start: int = 0, end: int | None = None) -> np.ndarray:
    """Sorted offsets in ``[start, end]`` where a grapheme cluster of ``text[start:end]`` starts, and ``end``."""
    end = len(text) if end is None else end
    lengths = np.fromiter(map(len, _GRAPHEME.findall(text, start, end)), dtype=np.int64)
    return np.concatenate([[start], start + np.cumsum(lengths)]).astype(np.int64)


def best_cut(text: str, s: int, e: int, tok_start: np.ndarray, tok_end: np.ndarray,
             clusters: np.ndarray | None = None) -> int:
    """A split point near the middle of ``text[s:e]`` on a grapheme cluster boundary (``clusters``,
    from :func:`grapheme_starts`): after whitespace, else at a token start, else the cluster boundary
    nearest the middle; inside a cluster only when ``text[s:e]`` is one cluster."""
    if clusters is None:
        clusters = grapheme_starts(text, s, e)

    def on_boundary(c) -> bool:
        i = int(np.searchsorted(clusters, c))
        return i < len(clusters) and clusters[i] == c

    mid = (s + e) // 2
    for radius in range(0, (e - s) // 2):
        for c in (mid + radius, mid - radius):
            if s < c < e and text[c - 1].isspace() and not text[c].isspace() and on_boundary(c):
                return c
    i = int(np.searchsorted(tok_start, mid))
    for c in (tok_start[i] if i < len(tok_start) else -1, tok_start[i - 1] if i > 0 else -1):
        if s < c < e and on_boundary(c):
            return int(c)
    j = int(np.searchsorted(clusters, mid))
    inside = [int(clusters[k]) for k in (j - 1, j) if 0 <= k < len(clusters) and s < clusters[k] < e]
    if inside:
        return min(inside, key=lambda c: (abs(c - mid), c))
    c = mid
    # never split a "\r\n" pair
    if text[c - 1] == "\r" and text[c] == "\n" and c + 1 < e:
        c += 1
    return c
