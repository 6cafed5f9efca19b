"""Runs that would cost more than their text: cut on a grid, or grouped (issue 35 item 7, issue 49 items 7 and 9).

The unit detector (:mod:`~headseg.segmenter.units`) reads each long sentence in 64-token windows; a
stretch of one symbol, or of a few tokens repeated, has no sentence blocks for the heads to find and
made it read each token many times.  Units of a few tokens each (``"a.\\n" * N``, a page of short
headings) cost a model call and a row of the search each.  Here: where a unit may start, the filler
stretches cut every :data:`FILLER_TOKENS` tokens without the detector, and runs of tiny units and of
short headings joined into groups.  Ordinary text is untouched (the thresholds and what the dev
documents hold: docs/performance.md, "Hostile Markdown").
"""

from __future__ import annotations

import bisect
import zlib
from typing import Sequence

import numpy as np
import regex

from headseg.analysis.errors import HeadsegError


def may_start(text: str, offsets: np.ndarray, i: int) -> bool:
    """Whether a unit may start at token ``i >= 1`` of ``offsets`` (a word start, not inside a word)."""
    prev_end, start = offsets[i - 1, 1], offsets[i, 0]
    gap = text[prev_end:start]
    prev_tok = text[offsets[i - 1, 0]:prev_end]
    return (gap != "" and gap.isspace()) or (prev_tok != "" and not prev_tok[-1].isalnum())



#: a sentence of more than ``FILLER_RUN`` tokens with no letter or digit (``'.' * N``, ``'*' * N``: a
#: token per byte) is cut every ``FILLER_TOKENS`` tokens without the unit detector, whose contrast
#: between blocks of the same symbol reads noise: its 64-token windows read each such token about
#: three times more (17× prose's time per byte for ``'*' * N``, issue 49 item 9).  Far above
#: ``UnitParams.auto_tokens``: the widest letterless line in the repository's Markdown (a table's
#: separator row) is 104 tokens, and such lines keep the detector's cuts
FILLER_RUN = 512
#: the most tokens a unit made of a hostile run holds (a filler stretch's piece, a group of tiny units or of
#: short headings): a unit is a row of every search array, about 9 KB of float64 vectors each, so 1 MB of
#: ``'.'`` (a million tokens) at 32 tokens a unit peaked at 1.5 GB; at 64, about half (docs/performance.md).
#: Half a model window, so a group is read in one call.
GROUP_TOKENS = 64
FILLER_TOKENS = GROUP_TOKENS
#: a stretch of at least ``FILLER_RUN`` tokens of a longer sentence is *repetitive* when its token ids
#: (int32, little-endian) compress by zlib to at most this many bytes per token: ``'*a_' * N``, brackets
#: around one letter, backticks and ``'`a' * N`` are 0.05-0.07, and are cut on the same grid as
#: letterless runs (the detector committed only about 10 of its 64 tokens a window on backticks: 52×
#: prose's time per byte, issue 49 item 9).  Real text is far above it: unpunctuated prose 1.9 at least;
#: of the stretches with letters of every sentence over 120 tokens in the dev documents, the most
#: compressible is 0.68 (a changelog's list of commit links; docs/performance.md, "Hostile Markdown")
FILLER_BYTES = 0.25


def _letterless(text: str, a: int, b: int) -> bool:
    """Whether ``text[a:b]`` holds no letter or digit."""
    return _ALNUM.search(text, a, b) is None


def _repetitive(ids: np.ndarray) -> bool:
    """Whether the token ids ``ids`` are a few tokens repeated (:data:`FILLER_BYTES`)."""
    raw = np.ascontiguousarray(ids, dtype="<i4").tobytes()
    return len(zlib.compress(raw, 6)) <= FILLER_BYTES * len(ids)


def _next_start(text: str, offsets: np.ndarray, i: int, end: int) -> int | None:
    """The first token in ``[i, end)`` where a unit may start (:func:`may_start`), or None."""
    for j in range(max(i, 1), end):
        if may_start(text, offsets, j):
            return j
    return None


def grid_starts(text: str, offsets: np.ndarray, lo: int, hi: int) -> list[int]:
    """Unit starts inside a filler stretch ``[lo, hi)``: every :data:`FILLER_TOKENS` tokens, each moved on to
    the next token where a unit may start (no cut inside a word; a letterless stretch may start anywhere,
    so its starts are exactly ``lo + FILLER_TOKENS, lo + 2 · FILLER_TOKENS, ...``).  O(hi − lo)."""
    out, s = [], lo + FILLER_TOKENS
    while s < hi:
        j = _next_start(text, offsets, s, min(s + FILLER_TOKENS, hi))
        if j is None:
            s += FILLER_TOKENS
            continue
        out.append(j)
        s = j + FILLER_TOKENS
    return out


def filler_pieces(text: str, doc, span):
    """``span = (a, b, lo, hi, detect)`` of :func:`find_units`, its filler marked ``"grid"``: the whole of a
    letterless sentence of more than :data:`FILLER_RUN` tokens, and in a longer sentence with letters each
    run of its :data:`FILLER_RUN`-token stretches (the last one takes the rest) that are
    :func:`_repetitive`, the rest staying with the detector.  Any other span comes back as it is."""
    a, b, lo, hi, detect = span
    if detect is not True or hi - lo <= FILLER_RUN:
        return [span]
    if _letterless(text, a, b):
        return [(a, b, lo, hi, "grid")]
    n = (hi - lo) // FILLER_RUN
    edges = [lo + k * FILLER_RUN for k in range(n)] + [hi]
    kinds = ["grid" if _repetitive(doc.ids[s:e]) else True for s, e in zip(edges[:-1], edges[1:])]
    if "grid" not in kinds:
        return [span]
    pieces: list[list] = []  # [first token, last token, kind], neighbours of one kind joined
    for s, e, kind in zip(edges[:-1], edges[1:], kinds):
        if pieces and pieces[-1][2] == kind:
            pieces[-1][1] = e
            continue
        if pieces:  # a piece starts where a unit may (not inside a word), else joins the one before
            s = _next_start(text, doc.offsets, s, e)
            if s is None:
                pieces[-1][1] = e
                continue
            pieces[-1][1] = s
        pieces.append([s, e, kind])
    chars = [a] + [int(doc.offsets[s, 0]) for s, _, _ in pieces[1:]] + [b]
    return [(chars[k], chars[k + 1], s, e, kind) for k, (s, e, kind) in enumerate(pieces)]


_ALNUM = regex.compile(r"[\p{L}\p{N}]")

#: a unit of at most this many tokens ("a.", "Ok.", "1.") is tiny
TINY_TOKENS = 3
#: this many tiny units in a row are encoded and searched in groups (no dev document has such a run:
#: dialogue's "Yes." "Okay." come one or two at a time, benchmarks/hostile_cost.py)
TINY_RUN = 8
#: the most tokens a group of tiny units holds (and a group of short headings)
TINY_GROUP = GROUP_TOKENS


def group_tiny_runs(units: Sequence[tuple[int, int]], tokens, breaks: Sequence[int] = ()) -> list[tuple[int, int]]:
    """``units`` with every run of at least :data:`TINY_RUN` tiny units (``tokens [U]``, at most
    :data:`TINY_TOKENS` each) joined into consecutive groups of at most :data:`TINY_GROUP` tokens;
    other units unchanged, and no group crosses an offset of ``breaks`` (a Markdown block's start).

    Units that short carry almost no context to leak, and one vector each made ``"a.\\n" * N`` cost
    22 MB and 1.6 s per KB (27× prose): the unit vectors, and the search over them, grow with the
    number of units, not of bytes.  The spans still tile the text.  O(U).
    """
    tokens = [int(t) for t in tokens]
    if len(tokens) != len(units):
        raise HeadsegError(f"{len(units)} units but {len(tokens)} token counts")
    cut = set(int(b) for b in breaks)
    out: list[tuple[int, int]] = []
    i, n = 0, len(units)
    while i < n:
        j = i
        while j < n and tokens[j] <= TINY_TOKENS:
            j += 1
        if j - i < TINY_RUN:
            out.extend(units[i:max(j, i + 1)])
            i = max(j, i + 1)
            continue
        start, size = units[i][0], 0
        for k in range(i, j):
            if k > i and (size + tokens[k] > TINY_GROUP or units[k][0] in cut):
                out.append((start, units[k][0]))
                start, size = units[k][0], 0
            size += tokens[k]
        out.append((start, units[j - 1][1]))
        i = j
    return out


#: a heading of at most this many tokens is short ("# H12", "## Notes"; a run of real ones in the dev Markdown,
#: the 13 option headings of Node's cli.md, are 8-18 tokens, 14 in the middle)
HEADING_TOKENS = 8


def group_heading_runs(text: str, units: Sequence[tuple[int, int]], tokens,
                       headings: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """``units`` with every run of at least :data:`TINY_RUN` short headings (``headings``: the heading blocks'
    spans, in order; each of at most :data:`HEADING_TOKENS` tokens, ``tokens [U]`` the units'), nothing but
    whitespace between one and the next, joined into consecutive groups of at most :data:`TINY_GROUP` tokens
    that start at a heading; other units unchanged.

    A heading is a Markdown block of its own, so :func:`group_tiny_runs` never joins two; 16 KB of
    ``'# H{i}\n'`` was 2,139 units, one model call and one row of the search each (14× prose's time per
    byte, memory growing with the headings).  A document's title over its subtitle, or a few headings in a
    row, stay as they are: the longest run of headings in the dev Markdown is 13, none of them short.  O(U + H).
    """
    tokens = [int(t) for t in tokens]
    if len(tokens) != len(units):
        raise HeadsegError(f"{len(units)} units but {len(tokens)} token counts")
    if len(headings) < TINY_RUN:
        return list(units)
    starts = [h[0] for h in headings]
    owner, size = [], [0] * len(headings)  # each unit's heading (-1: none), each heading's tokens
    for (a, _), t in zip(units, tokens):
        k = bisect.bisect_right(starts, a) - 1
        k = k if k >= 0 and a < headings[k][1] else -1
        owner.append(k)
        if k >= 0:
            size[k] += t
    # runs of short headings, each right after the one before: run[k] is the first heading of k's run
    run = list(range(len(headings)))
    for k in range(1, len(headings)):
        (_, e0), (s1, _) = headings[k - 1], headings[k]
        if size[k - 1] <= HEADING_TOKENS and size[k] <= HEADING_TOKENS and e0 <= s1 and not text[e0:s1].strip():
            run[k] = run[k - 1]
    length = {}
    for r in run:
        length[r] = length.get(r, 0) + 1
    out: list[tuple[int, int]] = []
    i, n = 0, len(units)
    while i < n:
        k = owner[i]
        if k < 0 or length[run[k]] < TINY_RUN or size[k] > HEADING_TOKENS:
            out.append(units[i])
            i += 1
            continue
        start, total, j = units[i][0], 0, i
        while j < n and owner[j] >= 0 and run[owner[j]] == run[k]:
            if j > i and owner[j] != owner[j - 1] and total + size[owner[j]] > TINY_GROUP:
                out.append((start, units[j][0]))
                start, total = units[j][0], 0
            if j == i or owner[j] != owner[j - 1]:
                total += size[owner[j]]
            j += 1
        out.append((start, units[j - 1][1]))
        i = j
    return out


__all__ = ("FILLER_BYTES", "FILLER_RUN", "FILLER_TOKENS", "GROUP_TOKENS", "HEADING_TOKENS", "TINY_GROUP", "TINY_RUN",
           "TINY_TOKENS", "filler_pieces", "grid_starts", "group_heading_runs", "group_tiny_runs", "may_start")
