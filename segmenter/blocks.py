"""Structure in the search: units that never straddle a block, and the cut prior of a document's structure.

The search sees structure only through a :class:`~headseg.segmenter.cuts.CutPrior`
(docs/segmenter.md, "Priors and constraints in the search"); this module builds it:

* :func:`split_at_blocks` cuts the units at every block start and every piece of a
  block (a line of code, a table row, a list item: :class:`~headseg.segmenter.structure.Block`),
  so a block larger than the budget can be cut between them;
* :func:`structure_prior`: ``allowed`` is False for a unit start strictly inside a
  block that must stay whole (:data:`~headseg.segmenter.structure.ATOMIC`) and fits
  the budget (``max_tokens``, ``max_chars``; without them every block fits), inside a
  larger code block, table, HTML block or front matter anywhere but between its
  pieces, right after a heading, and inside a line that fits the budget anywhere but
  after a sentence's end (plain text too, when it has a budget; a start inside a
  line over the budget stays allowed: the limit is hard).  A heading's unit saves
  :data:`HEADING_BONUS` of the penalty by its level (a strong prior, not a rule: two
  headings 20 tokens apart need not be two chunks) and carries its level.  A paragraph
  ending in a colon stays with the block right after it when the two fit together
  (:func:`_keep_introductions`).
* :func:`line_start_boundaries`: once the cuts are offsets, a boundary after a line's
  indentation in a code block, table, HTML block or front matter moves back to the
  line's start, where the limits allow: chunks of code end at line ends.
* A stretch that the constraints would leave longer than the limits or than the
  search's longest segment (``TopicParams.max_units``) gets its line starts back, then
  every start: the hard limits always win, and the search always has a way through.

Cost: O(U + B · log U) for U units and B blocks, plus one token count per line and
per forbidden stretch.
"""

from __future__ import annotations

import bisect
from dataclasses import replace
from typing import Sequence

import numpy as np

from headseg.analysis.segments import Segmentation

from .cuts import CutPrior
from .document import Document, after_sentence_end, at_line_start  # noqa: F401 (benchmarks read them here)
from .structure import ATOMIC, Structure

#: what a heading's unit saves of the penalty, by level (h1 first; deeper levels take the last):
#: more than the cut's own price, so that it also outweighs the size target's and the short-segment
#: surcharges of a short section, more before a higher heading.  On the 96 Markdown documents of
#: benchmarks/structure.py, (1.5, 1.25, 1.0, 0.75) opened a chunk at 88 % of headings at 256 tokens
#: and 76 % at 512; twice that, 99.9 % and 99.7 % (docs/results.md, "Documents with structure")
HEADING_BONUS = (3.0, 2.5, 2.0, 1.5)
#: the kinds that are cut only between their pieces (lines, rows) when larger than the budget
LINED = frozenset({"code", "table", "html", "front_matter", "definitions"})


def split_at_blocks(text: str, units: Sequence[tuple[int, int]], structure: Structure) -> list[tuple[int, int]]:
    """``units`` (spans tiling ``text``) cut at :meth:`Structure.breaks`; a whitespace-only piece
    joins the unit before it, as the units' own whitespace does."""
    # a break goes after a line's indentation, which joins the unit before (as the sentence rules do)
    breaks = sorted({_past_indent(text, p) for p in structure.breaks()})
    out: list[tuple[int, int]] = []
    for a, b in units:
        lo, hi = bisect.bisect_right(breaks, a), bisect.bisect_left(breaks, b)
        edges = [a, *breaks[lo:hi], b]
        for s, e in zip(edges[:-1], edges[1:]):
            if out and not text[s:e].strip():
                out[-1] = (out[-1][0], e)
            else:
                out.append((s, e))
    return out


def _past_indent(text: str, offset: int) -> int:
    while offset < len(text) and text[offset] in " \t":
        offset += 1
    return offset


def content_start(text: str, start: int, end: int) -> int:
    """The first character of ``text[start:end]`` that is not whitespace (``end`` if none)."""
    i = start
    while i < end and text[i].isspace():
        i += 1
    return i


class _Budget:
    """Whether a span of the text fits the hard limits (no limit: everything fits)."""

    def __init__(self, doc: Document, max_chars: int | None, max_tokens: int | None):
        self.doc, self.max_chars, self.max_tokens = doc, max_chars, max_tokens

    @property
    def limited(self) -> bool:
        return self.max_chars is not None or self.max_tokens is not None

    def fits(self, s: int, e: int) -> bool:
        if self.max_chars is not None and e - s > self.max_chars:
            return False
        return self.max_tokens is None or self.doc.span_tokens(s, e) <= self.max_tokens


def structure_prior(doc: Document, structure: Structure | None, max_chars: int | None, max_tokens: int | None,
                    max_units: int) -> CutPrior | None:
    """The :class:`CutPrior` of ``doc``'s units from ``structure`` (``doc``'s, or a coarser view of it;
    None: plain text; then only the line rule, and only with a budget), or None when it says nothing.
    The text features (unit starts, line starts, sentence ends) are the document's, derived once."""
    text, units, n = doc.text, doc.units, len(doc.units)
    budget = _Budget(doc, max_chars, max_tokens)
    if n < 2 or (structure is None and not budget.limited):
        return None
    starts = doc.starts
    allowed = np.ones(n, dtype=bool)
    bonus = np.zeros(n)
    level = np.zeros(n, dtype=np.int64)
    lines = doc.lines
    at_line = doc.at_line
    lined = np.zeros(n, dtype=bool)  # inside a code block, a table...: no sentences there
    soft = np.zeros(n, dtype=bool)  # forbidden only to keep a heading or an introduction with what follows it
    if structure is not None:
        for b in structure.blocks:
            # a unit opens after the indentation of its line: the block's own first unit is not inside it
            first = content_start(text, b.start, b.end)
            lo, hi = int(np.searchsorted(starts, first, "right")), int(np.searchsorted(starts, b.end, "left"))
            if b.kind == "heading":
                i = lo - 1
                if i >= 0 and starts[i] == first:
                    bonus[i] = HEADING_BONUS[min(b.level, len(HEADING_BONUS)) - 1]
                    level[i] = b.level
                    # a heading stays with what follows it, when the two fit together
                    if i + 1 < n and allowed[i + 1] and budget.fits(first, units[i + 1][1]):
                        allowed[i + 1] = False
                        soft[i + 1] = True
                continue
            if b.kind == "paragraph":
                # a hard-wrapped paragraph's soft line breaks are not sentence ends: no cut there (given
                # back by _relax only where a sentence alone outgrows the limits)
                for i in range(lo, hi):
                    if at_line[i] and not doc.after_end[i]:
                        allowed[i] = False
                continue
            if b.kind not in ATOMIC or hi <= lo:
                continue
            if budget.fits(b.start, b.end):
                allowed[lo:hi] = False
                soft[lo:hi] = False
            elif b.kind in LINED:
                lined[lo:hi] = True
                pieces = {_past_indent(text, p) for p in b.pieces}
                for i in range(lo, hi):
                    if at_line[i] and int(starts[i]) not in pieces:
                        allowed[i] = False
    if structure is not None:
        _keep_introductions(doc, structure, budget, allowed, soft)
    for i in np.flatnonzero(~at_line):
        if i == 0 or not allowed[i]:
            continue
        s = int(starts[i])
        if not lined[i] and doc.after_end[i]:
            continue
        li = bisect.bisect_right(lines, s) - 1
        if budget.fits(lines[li], lines[li + 1] if li + 1 < len(lines) else len(text)):
            allowed[i] = False
    allowed[0] = True
    _relax(allowed, starts, (soft, at_line), budget, len(text), max_units)
    if allowed.all() and not bonus.any():
        return None
    return CutPrior(allowed, bonus, level)


#: what a paragraph that introduces the block after it ends with (a full-width colon too)
INTRODUCES = (":", "\uff1a")


def _keep_introductions(doc: Document, structure: Structure, budget: _Budget, allowed: np.ndarray,
                        soft: np.ndarray) -> None:
    """Forbid a cut between a paragraph ending in a colon and the block right after it (a code block, a
    table, a list, a quote...: :data:`ATOMIC`), when the unit that ends in the colon and the whole block fit
    the budget together: "Build it from the repository root:" belongs with its code.  Marked ``soft`` (in
    place), so :func:`_relax` gives such a start back first where a stretch has no way through.  O(B)."""
    text, starts, blocks = doc.text, doc.starts, structure.blocks
    for b, c in zip(blocks, blocks[1:]):
        if b.kind != "paragraph" or c.kind not in ATOMIC or text[b.end:c.start].strip():
            continue
        end = len(text[b.start:b.end].rstrip()) + b.start
        if end <= b.start or not text[end - 1] in INTRODUCES:
            continue
        j = int(np.searchsorted(starts, end - 1, "right")) - 1  # the unit that ends in the colon
        i = int(np.searchsorted(starts, content_start(text, c.start, c.end), "right")) - 1  # the block's first
        if i > j and budget.fits(int(starts[j]), c.end):
            soft[j + 1:i + 1] |= allowed[j + 1:i + 1]
            allowed[j + 1:i + 1] = False


def _relax(allowed: np.ndarray, starts: np.ndarray, tiers: Sequence[np.ndarray], budget: _Budget, end: int,
           max_units: int) -> None:
    """Give back the starts of any forbidden stretch the search could not get through (longer than
    the budget or than ``max_units`` units), tier by tier (``tiers``: masks of the starts to give back
    first: a heading's follower, then line starts), then all of them (in place)."""
    n = len(allowed)
    for relaxed in (*tiers, np.ones(n, dtype=bool)):
        opened = np.flatnonzero(allowed)
        bounds = np.append(opened, n)
        for a, b in zip(bounds[:-1], bounds[1:]):
            if b - a <= 1:
                continue
            stop = end if b == n else int(starts[b])
            if b - a > max_units or not budget.fits(int(starts[a]), stop):
                allowed[a + 1:b] |= relaxed[a + 1:b]


def line_start_boundaries(doc: Document, result: Segmentation, max_chars: int | None,
                          max_tokens: int | None) -> Segmentation:
    """``result`` (a segmentation of ``doc``'s text) with every boundary that falls after a line's indentation
    inside a code block, table, HTML block or front matter (:data:`LINED`) moved back to that line's start,
    where the segment it opens still fits ``max_chars`` and ``max_tokens``: a chunk of code then ends at a
    line end, newline included, and the next begins with the line's indentation.  Tree nodes move with the
    segments.  Plain text (no structure) and every other boundary are left where they are.

    Units start after a line's indentation by design (:func:`split_at_blocks`: the prior reads a block's
    first unit there), so the move is made here, once the cuts are offsets.  O(K · log B + B · log B)
    for K boundaries and B blocks."""
    bounds = result.boundaries
    if doc.structure is None or not bounds:
        return result
    budget, lined = _Budget(doc, max_chars, max_tokens), LinedSpans(doc)
    moved = {}
    for i, p in enumerate(bounds):
        q = lined.indent_start(p)
        # never onto the segment before's start (a text that opens with indentation: its first unit is that)
        if result.segments[i].start < q < p and budget.fits(q, result.segments[i + 1].end):
            moved[p] = q
    if not moved:
        return result
    at = lambda o: moved.get(o, o)  # noqa: E731 - one mapping for the segments and the nodes
    nodes = [replace(n, start=at(n.start), end=at(n.end)) for n in result.nodes]
    sure = [s.confidence for s in result.segments[1:]]  # a moved boundary keeps its score and confidence
    return Segmentation.from_boundaries(result.text, [at(p) for p in bounds], [s.score for s in result.segments[1:]],
                                        level=result.level, meta=result.meta, nodes=nodes,
                                        confidence=None if None in sure else sure)


class LinedSpans:
    """Where ``doc``'s code blocks, tables, HTML blocks and front matter (:data:`LINED`) lie, read once:
    their starts sorted, and the furthest end of the blocks up to each (they may nest)."""

    def __init__(self, doc: Document):
        self.doc = doc
        spans = sorted((b.start, b.end) for b in doc.structure.blocks if b.kind in LINED) if doc.structure else []
        self.starts = [s for s, _ in spans]
        self.reach = list(np.maximum.accumulate([e for _, e in spans])) if spans else []

    def indent_start(self, offset: int) -> int:
        """The start of ``offset``'s line when only spaces or tabs precede ``offset`` on it and the line
        lies in one of the blocks; else ``offset``."""
        text, lines = self.doc.text, self.doc.lines
        if not self.starts or offset <= 0 or offset >= len(text) or text[offset - 1] not in " \t":
            return offset
        line = lines[bisect.bisect_right(lines, offset) - 1]
        if text[line:offset].strip(" \t"):
            return offset
        i = bisect.bisect_right(self.starts, line) - 1
        return line if i >= 0 and self.reach[i] > offset else offset


def heading_mask(units: Sequence[tuple[int, int]], structure: Structure) -> np.ndarray:
    """``[U]`` bool: unit ``i`` starts a heading of ``structure``."""
    starts = {content_start(structure.text, b.start, b.end) for b in structure.headings}
    return np.asarray([a in starts for a, _ in units], dtype=bool)


#: how far one Markdown block may widen the search's length bound to be kept whole (× ``max_units``)
BLOCK_STRETCH = 4


def units_bound(units: Sequence[tuple[int, int]], structure: Structure | None, max_units: int) -> int:
    """The search's length bound in units for a text: ``max_units``, or where a block that must stay
    whole (a code block, table, list...) holds more units than that, enough for it and the unit before
    it, up to ``BLOCK_STRETCH · max_units``.  A block the bound cannot hold is cut between its pieces
    (:func:`_relax`); a 431-line code block without a budget was, at the bound of 400.  O(U + B)."""
    if structure is None or not len(units):
        return max_units
    starts = np.asarray([a for a, _ in units], dtype=np.int64)
    most = 0
    for b in structure.blocks:
        if b.kind in ATOMIC:
            most = max(most, int(np.searchsorted(starts, b.end, "left") - np.searchsorted(starts, b.start, "left")))
    return int(min(max(max_units, most + 2), BLOCK_STRETCH * max_units))
