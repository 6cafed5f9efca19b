"""Line groups and headings: which units the topic search compares as one item.

Short units on one line (the sentences of a dialogue turn) say little alone, so
consecutive units on one line are compared as one while together they hold at
most ``TopicParams.line_tokens`` tokens; a heading (a short label or title alone
on its line, :func:`headseg.segmenter.units.looks_like_heading`) is compared
together with the line after it, so it opens the next segment instead of
closing the previous one.  Groups never outgrow a hard size limit, so every
limit the search must meet stays satisfiable; the segments still start at unit
starts (:func:`group_units` returns the first unit of each group).  With a size
target (retrieval chunks), :func:`cut_discounts` makes a cut at a line break or
before a heading cheaper, so chunks follow paragraphs and sections; without one,
a cut where a paragraph opens (:func:`paragraph_starts`) is cheaper by
``TopicParams.paragraph_bonus``.  When a text's lines are paragraphs
(:func:`lines_are_paragraphs`), its units are never grouped by line: the
sentences of a paragraph are no dialogue turn, and a group would straddle the
paragraphs of a text with no line breaks at all.

Everything here is O(U) in the number of units.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from headseg.analysis.text import ANY_LINE_BREAK, LINE_BREAK, LINE_BREAK_CHARS

from .penalty import BLOCK_ROWS
from .units import looks_like_heading

#: a blank line: two line breaks with only spaces or tabs (any whitespace but a line break) between
#: them, or a PARAGRAPH SEPARATOR, which is one by definition
_BLANK_LINE = re.compile(rf"(?:{LINE_BREAK})[^\S{re.escape(LINE_BREAK_CHARS)}]*(?:{LINE_BREAK})|\u2029")
#: a speaker's label opening a line of a transcript: a name of up to four words, then a colon
_SPEAKER = re.compile(r"[^\W\d_][\w.'-]*(?: [\w.'-]+){0,3}:\s")

#: with a size target, a cut at a line break saves this fraction of the boundary penalty, and a
#: cut before a heading :data:`HEADING_DISCOUNT` more (chosen on the dev retrieval corpora by the
#: rule in docs/segmenter.md, "Chunks for retrieval")
LINE_BREAK_DISCOUNT = 0.25
HEADING_DISCOUNT = 0.25
#: a text's line breaks are paragraph breaks when its lines hold at least this many units on
#: average: one sentence a line (the benchmark sets, transcripts: at most 1.1) or a dialogue turn
#: a line (1.4-1.5) is not prose in paragraphs; a paragraph of a few sentences a line is
PARAGRAPH_UNITS_PER_LINE = 2.0
#: the longest heading the discount knows, in tokens: longer than ``TopicParams.heading_tokens``,
#: so a heading in markup such as "= = = The Waldrons = = =" (10 tokens) counts too (the search's
#: own heading groups keep ``heading_tokens``)
DISCOUNT_HEADING_TOKENS = 24


def starts_same_line(text: str, units: Sequence[tuple[int, int]]) -> np.ndarray:
    """``[U]`` bool: unit ``i`` starts on the line unit ``i - 1`` started on (no line break between; the first: False)."""
    out = np.zeros(len(units), dtype=bool)
    for i in range(1, len(units)):
        out[i] = ANY_LINE_BREAK.search(text, units[i - 1][0], units[i][0]) is None
    return out


def lines_are_paragraphs(text: str, units: Sequence[tuple[int, int]], same_line: np.ndarray) -> bool:
    """Whether a text's lines hold paragraphs: :data:`PARAGRAPH_UNITS_PER_LINE` units or more a line
    on average (``same_line [U]`` from :func:`starts_same_line`), and not a transcript (most lines
    opening with a speaker's label, ``Grad G:``), whose long turns are no paragraphs either."""
    same = np.asarray(same_line, dtype=bool)
    starts = np.flatnonzero(~same)
    if len(same) < PARAGRAPH_UNITS_PER_LINE * max(len(starts), 1):
        return False
    labelled = sum(1 for i in starts if _SPEAKER.match(text, units[i][0]))
    return labelled * 2 < len(starts)


def paragraph_starts(text: str, units: Sequence[tuple[int, int]], same_line: np.ndarray,
                     paragraph_lines: bool | None = None) -> np.ndarray:
    """``[U]`` bool: unit ``i`` opens a paragraph: a blank line before it, or a line break when the
    text's lines are paragraphs (``paragraph_lines``: :func:`lines_are_paragraphs`, computed here
    when None).  The first unit: False."""
    n = len(units)
    out = np.zeros(n, dtype=bool)
    if n < 2:
        return out
    if paragraph_lines is None:
        paragraph_lines = lines_are_paragraphs(text, units, same_line)
    if paragraph_lines:
        out[1:] = ~np.asarray(same_line, dtype=bool)[1:]
    for i in range(1, n):
        if not out[i] and _BLANK_LINE.search(text, units[i - 1][0], units[i][0]):
            out[i] = True
    return out


def paragraph_bonus(opens: np.ndarray, bonus: float, count: float, surcharge: float) -> np.ndarray | None:
    """``[U]``: the fraction of the penalty a cut before unit ``i`` saves, from the paragraph starts
    ``opens [U]`` (:func:`paragraph_starts`): ``bonus · min(1, count / P)`` where a paragraph opens,
    ``P`` the number of paragraphs, and ``−surcharge`` inside a paragraph; None when the text has a
    single paragraph (no prior) or both are 0."""
    opens = np.asarray(opens, dtype=bool)
    paragraphs = 1 + int(np.count_nonzero(opens[1:]))
    b = bonus * min(1.0, count / paragraphs)
    if paragraphs < 2 or (b == 0 and surcharge == 0):
        return None
    out = np.where(opens, b, -surcharge)
    out[0] = 0.0
    return out


def heading_units(text: str, units: Sequence[tuple[int, int]], tokens, max_tokens: int,
                  same_line: np.ndarray | None = None) -> np.ndarray:
    """``[U]`` bool: unit ``i`` is a heading — alone on its line, at most ``max_tokens``
    tokens (``tokens [U]``), and reads as a label or a title (:func:`looks_like_heading`).
    ``same_line``: :func:`starts_same_line` of the units, when the caller has it already.
    """
    n = len(units)
    out = np.zeros(n, dtype=bool)
    if not max_tokens or n < 2:
        return out
    same = starts_same_line(text, units) if same_line is None else np.asarray(same_line, dtype=bool)
    alone = ~same
    alone[:-1] &= ~same[1:]
    for i in np.flatnonzero(alone & (np.asarray(tokens) <= max_tokens)):
        out[i] = looks_like_heading(text[units[i][0]:units[i][1]])
    return out


def cut_discounts(text: str, units: Sequence[tuple[int, int]], tokens, same_line: np.ndarray,
                  headings: np.ndarray | None = None) -> np.ndarray:
    """``[U]``: the fraction of the boundary penalty a cut before unit ``i`` saves under a size target,
    :data:`LINE_BREAK_DISCOUNT` when it starts a line (``same_line [U]`` False, :func:`starts_same_line`)
    plus :data:`HEADING_DISCOUNT` when it is a heading of at most :data:`DISCOUNT_HEADING_TOKENS`
    tokens (``tokens [U]``; :func:`heading_units`); 0 inside a line.  ``headings [U]``: those
    headings, when the caller has them already (``text`` and ``units`` are not read then).
    """
    same = np.asarray(same_line, dtype=bool)
    if headings is None:
        headings = heading_units(text, units, tokens, DISCOUNT_HEADING_TOKENS, same_line=same)
    return np.where(same, 0.0, LINE_BREAK_DISCOUNT) + np.where(headings, HEADING_DISCOUNT, 0.0)


def line_groups(same_line, tokens, max_tokens: int, sizes: np.ndarray | None = None,
                limits: Sequence[float | None] = (), headings=None) -> np.ndarray:
    """Group index ``[U]`` of each unit: consecutive units on one line (``same_line [U]``,
    :func:`starts_same_line`) share a group while it holds at most ``max_tokens`` tokens, and
    the unit after a heading (``headings [U]`` bool, :func:`heading_units`) joins the heading's
    group whatever its length; a group holds, per column of ``sizes [U, C]``, at most
    ``limits[c]``, so that any group fits the hard size limits alone.
    """
    n = len(same_line)
    g = np.zeros(n, dtype=np.int64)
    if n == 0:
        return g
    tokens = np.asarray(tokens, dtype=np.float64)
    sizes = None if sizes is None else np.asarray(sizes, dtype=np.float64).reshape(n, -1)
    cur, tot = 0, tokens[0]
    size = None if sizes is None else sizes[0].copy()
    for i in range(1, n):
        after_heading = headings is not None and bool(headings[i - 1])
        join = after_heading or (max_tokens > 0 and same_line[i] and tot + tokens[i] <= max_tokens)
        if join and size is not None:
            join = all(lim is None or size[c] + sizes[i, c] <= lim for c, lim in enumerate(limits))
        if join:
            tot += tokens[i]
            if size is not None:
                size += sizes[i]
        else:
            cur, tot = cur + 1, tokens[i]
            size = None if sizes is None else sizes[i].copy()
        g[i] = cur
    return g


def open_groups_at(groups: np.ndarray, starts) -> np.ndarray:
    """``groups [U]`` (non-decreasing group indices) with a new group opening at each unit of ``starts``
    (a segment tree's parent boundaries: splitting a group keeps it within the limits)."""
    starts = np.asarray(starts, dtype=np.int64)
    if not starts.size:
        return groups
    opens = np.concatenate([[False], groups[1:] != groups[:-1]])
    opens[starts] = True
    return np.cumsum(opens)


def group_starts(groups: np.ndarray) -> np.ndarray:
    """First unit of each group, for non-decreasing group indices ``[U]`` starting at 0."""
    m = int(groups[-1]) + 1 if len(groups) else 0
    return np.searchsorted(groups, np.arange(m), side="left")


def group_vectors(x: np.ndarray, tokens, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token-weighted mean vector ``[G, D]``, token count ``[G]`` and first unit ``[G]`` of each group,
    for unit vectors ``x [U, D]``, unit token counts ``tokens [U]`` and group indices ``groups [U]``."""
    tokens = np.asarray(tokens, dtype=np.float64)
    first = group_starts(groups)
    m = len(first)
    w = np.maximum(tokens, 1e-9)
    sums = np.zeros((m, x.shape[1]))
    # weighted a block of rows at a time and divided in place: ``x · w`` whole and the quotient beside the
    # sums were two more copies of the vectors at once (the same numbers: add.at adds in index order)
    for s in range(0, len(x), BLOCK_ROWS):
        np.add.at(sums, groups[s:s + BLOCK_ROWS], x[s:s + BLOCK_ROWS] * w[s:s + BLOCK_ROWS, None])
    mass = np.zeros(m)
    np.add.at(mass, groups, w)
    tok = np.zeros(m)
    np.add.at(tok, groups, tokens)
    sums /= mass[:, None]
    return sums, tok, first



def group_units(x: np.ndarray, tokens, groups: np.ndarray, segments: int | None = None):
    """``(x, tokens, first)`` of the groups the search compares, or the units' own with ``first=None``.

    Units stay alone when grouping changes nothing (every unit its own group) or
    leaves nothing to cut (one group), and when ``segments`` asks for more
    segments than there are groups.
    """
    n = len(groups)
    if 1 <= groups[-1] < n - 1 and (segments is None or segments <= groups[-1] + 1):
        return group_vectors(x, tokens, groups)
    return x, tokens, None
