"""Lines of code and markup read in groups, not a unit a line (issue 49: hostile pages, cut between lines).

The sentence rules end a unit at every line break, and a unit costs a model call and a row of the
search whatever its length: a Docusaurus page, ``<Tabs>`` and ``<TabItem>`` tag lines around short
fences, is about 5 tokens a unit (``'<Tabs>\\n'``, ``'```py\\n'``, ``'import tool\\n'``), and 100 KB
of it was 7,646 units, 5.8× prose's time per byte and 537 MB at its peak (docs/performance.md,
"Hostile Markdown").  The line ends of code, of an HTML block, of a JSX element's tag lines, of
front matter and of link reference definitions (:data:`VERBATIM`) are no sentence ends and no topic
boundaries, so here consecutive short such lines are joined into units of at most one model window
(``most``: its content tokens, read in one call).  These blocks are
:data:`~headseg.segmenter.structure.ATOMIC`: without a size
limit no cut falls inside one, so the groups change no place a cut may fall, only how many calls and
rows read the lines.  Under a hard limit a group holds at most :data:`LIMIT_SHARE` of it
(``max_chars``, and ``max_tokens`` counted by the limit's own counter): it never needs cutting
itself, and a block larger than the limit, cut into chunks, loses at most that share of a chunk to
the grouping.

What stays as it was: every unit of a paragraph, a heading, a list, a table or a quote (inside a JSX
element too: an admonition's text is prose), all of plain text (a transcript's short lines end turns),
and a block whose lines average more than :data:`SHORT_LINES` tokens (more than half the code blocks of
the dev Markdown; link definitions, a label and a URL, are grouped whatever their length:
:data:`ALWAYS`), so ordinary Markdown keeps most of its units and results.  A group never crosses
the edge of the outermost such block it lies in (two code blocks in a row stay apart), and it ends
only where a cut may fall: at a line start, and inside a code block, an HTML block or front matter
only between its pieces (:class:`~headseg.segmenter.structure.Block`), so a block larger than the
budget is still cut between lines, never after a line's indentation, and no group ends on a JSX
element's opening tag line or opens on its closing one.  Cost: O(U + B) for U units and B blocks,
plus one count per joined span under a foreign token counter.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

from headseg.analysis.errors import HeadsegError

from .blocks import LINED, content_start
from .document import TokenCount
from .structure import Block, Structure

#: the kinds whose lines are read in groups: code, HTML, JSX elements (their tag lines), front matter and
#: link reference definitions
VERBATIM = frozenset({"code", "html", "jsx", "front_matter", "definitions"})
#: the kinds whose lines are grouped whatever their length: a link reference definition is a label and a
#: URL, no sentence (20,000 of them were 20,000 model calls: issue 49, item 8)
ALWAYS = frozenset({"definitions"})
#: a block's lines are grouped when they average at most this many tokens (a unit of fewer tokens than
#: ``TopicParams.weight_tokens``, 8, weighs less in the search: its vector is noisy)
SHORT_LINES = 8.0
#: under a hard limit a group holds at most this share of it
LIMIT_SHARE = 0.25

Fits = Callable[[int, int], bool]


def share_fits(count: TokenCount, max_chars: int | None, max_tokens: int | None) -> Fits | None:
    """Whether ``text[s:e]`` holds at most :data:`LIMIT_SHARE` of each hard limit (``max_tokens`` in
    ``count``'s units); None without limits."""
    if max_chars is None and max_tokens is None:
        return None

    def fits(s: int, e: int) -> bool:
        if max_chars is not None and e - s > LIMIT_SHARE * max_chars:
            return False
        return max_tokens is None or count.span(s, e) <= LIMIT_SHARE * max_tokens

    return fits


def group_verbatim_lines(text: str, units: Sequence[tuple[int, int]], tokens, structure: Structure, most: int,
                         fits: Fits | None = None) -> list[tuple[int, int]]:
    """``units`` (spans tiling ``text``, ``tokens [U]`` the model's tokens of each) with the consecutive
    short lines of each outermost :data:`VERBATIM` block of ``structure`` joined into groups of at most
    ``most`` tokens (a model window's content) that ``fits`` (:func:`share_fits`; None: any), each
    opening where a cut may fall (the module's docstring); other units unchanged.  O(U + B)."""
    tokens = [int(t) for t in tokens]
    if len(tokens) != len(units):
        raise HeadsegError(f"{len(units)} units but {len(tokens)} token counts")
    out: list[tuple[int, int]] = []
    run: list[int] = []  # units of the current outermost verbatim block
    starts: list[bool] = []  # whether each of them may open a group
    root = None
    pieces: dict[int, frozenset[int]] = {}  # a lined block's pieces, by the block's id, as a set
    tags = _tag_lines(text, structure.blocks)
    for i, (inner, outer) in enumerate(_owners(text, units, structure.blocks)):
        if outer is None or outer is not root:
            _pack(units, tokens, run, starts, most, fits, out, root)
            run, starts, root = [], [], outer
        if outer is None:
            out.append(units[i])
            continue
        if inner.kind in LINED and id(inner) not in pieces:
            pieces[id(inner)] = frozenset((inner.start, *inner.pieces))
        starts.append(not run or _cut_allowed(text, units[i][0], pieces.get(id(inner)), tags))
        run.append(i)
    _pack(units, tokens, run, starts, most, fits, out, root)
    return out


def _owners(text: str, units: Sequence[tuple[int, int]], blocks: Sequence[Block]):
    """For each unit, ``(innermost, outermost)``: the innermost block holding it when that is
    :data:`VERBATIM` and the unit ends inside it (but for whitespace), and the outermost block of the
    verbatim blocks nested around it; ``(None, None)`` for any other unit.  One sweep over the blocks
    (in document order, an enclosing block first), a stack of the open ones."""
    stack: list[Block] = []
    j = 0
    for a, b in units:
        p = content_start(text, a, b)
        while j < len(blocks) and blocks[j].start <= p:
            while stack and stack[-1].end <= blocks[j].start:
                stack.pop()
            stack.append(blocks[j])
            j += 1
        while stack and stack[-1].end <= p:
            stack.pop()
        top = stack[-1] if stack else None
        if top is None or top.kind not in VERBATIM or (b > top.end and text[top.end:b].strip()):
            yield None, None
            continue
        k = len(stack) - 1
        while k > 0 and stack[k - 1].kind in VERBATIM:
            k -= 1
        yield top, stack[k]


def _cut_allowed(text: str, offset: int, lined: frozenset[int] | None, tags: set[int]) -> bool:
    """Whether a group may open at ``offset`` (a unit's start): at a line start (after its indentation) that
    is not in ``tags`` (:func:`_tag_lines`), and inside a block cut by lines
    (:data:`~headseg.segmenter.blocks.LINED`; ``lined``: its start and its pieces, None for another
    block) only at one of those."""
    i = offset
    while i > 0 and text[i - 1] in " \t":
        i -= 1
    if i > 0 and text[i - 1] not in "\r\n":
        return False
    return i not in tags and (lined is None or i in lined)


def _tag_lines(text: str, blocks: Sequence[Block]) -> set[int]:
    """The line starts where no group opens: the second line and the last line of every JSX element of two
    lines or more (``<TabItem value="py">`` stays with what it opens, ``</TabItem>`` with what it closes, so
    a chunk cut between groups inside a larger element never ends on an opening tag nor opens on a closing
    one).  An
    element is a ``jsx`` block of depth 1 or more (:mod:`~headseg.segmenter.jsx`; the ESM lines at a
    page's top are depth 0)."""
    out: set[int] = set()
    for b in blocks:
        if b.kind != "jsx" or b.level < 1:
            continue
        second = _BREAK.search(text, b.start, b.end)
        last = b.end - len(_TRAILING.search(text, b.start, b.end).group())
        last = max(text.rfind("\n", b.start, last), text.rfind("\r", b.start, last)) + 1
        if second is not None and second.end() < b.end:
            out.add(second.end())
            if last > b.start:
                out.add(last)
    return out


#: a line break, and the one that ends a block
_BREAK = re.compile(r"\r\n|\r|\n")
_TRAILING = re.compile(r"(?:\r\n|\r|\n)?\Z")


def _pack(units, tokens: list[int], run: list[int], starts: list[bool], most: int, fits: Fits | None,
          out: list[tuple[int, int]], block: Block | None) -> None:
    """Append to ``out`` the units ``run`` (indices) of one ``block``: as they are when they average more
    than :data:`SHORT_LINES` tokens (unless the block is of a kind in :data:`ALWAYS`), else as lines (from
    one start that may open a group to the next) packed greedily into groups of at most ``most`` tokens
    that ``fits``; a line over that stays its units."""
    always = block is not None and block.kind in ALWAYS
    if not run or (not always and sum(tokens[i] for i in run) > SHORT_LINES * len(run)):
        out.extend(units[i] for i in run)  # lines of a sentence's length: each its own unit, as before
        return
    lines: list[list[int]] = []  # first and last unit of each line
    for k, i in enumerate(run):
        if starts[k] or not lines:
            lines.append([i, i])
        else:
            lines[-1][1] = i
    groups: list[list[int]] = []  # first unit, last unit, tokens (-1: a unit of a line left as its units)
    for first, last in lines:
        size = sum(tokens[first:last + 1])
        if size > most or (fits is not None and not fits(units[first][0], units[last][1])):
            groups.extend([i, i, -1] for i in range(first, last + 1))
            continue
        g = groups[-1] if groups else None
        if g is not None and g[2] >= 0 and g[2] + size <= most and (
                fits is None or fits(units[g[0]][0], units[last][1])):
            g[1], g[2] = last, g[2] + size
        else:
            groups.append([first, last, size])
    out.extend((units[first][0], units[last][1]) for first, last, _ in groups)


__all__ = ("ALWAYS", "LIMIT_SHARE", "VERBATIM", "group_verbatim_lines", "share_fits")
