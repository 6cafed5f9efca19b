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
before a heading cheaper, so chunks follow paragraphs and sections.

Everything here is O(U) in the number of units.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .units import looks_like_heading

#: with a size target, a cut at a line break saves this fraction of the boundary penalty, and a
#: cut before a heading :data:`HEADING_DISCOUNT` more (chosen on the dev retrieval corpora by the
#: rule in docs/segmenter.md, "Chunks for retrieval")
LINE_BREAK_DISCOUNT = 0.25
HEADING_DISCOUNT = 0.25
#: the longest heading the discount knows, in tokens: longer than ``TopicParams.heading_tokens``,
#: so a heading in markup such as "= = = The Waldrons = = =" (10 tokens) counts too (the search's
#: own heading groups keep ``heading_tokens``)
DISCOUNT_HEADING_TOKENS = 24


def starts_same_line(text: str, units: Sequence[tuple[int, int]]) -> np.ndarray:
    """``[U]`` bool: unit ``i`` starts on the line unit ``i - 1`` started on (no line break between; the first: False)."""
    out = np.zeros(len(units), dtype=bool)
    for i in range(1, len(units)):
        out[i] = "\n" not in text[units[i - 1][0]:units[i][0]]
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
    np.add.at(sums, groups, x * w[:, None])
    mass = np.zeros(m)
    np.add.at(mass, groups, w)
    tok = np.zeros(m)
    np.add.at(tok, groups, tokens)
    return sums / mass[:, None], tok, first


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
