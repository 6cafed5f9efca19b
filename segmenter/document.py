"""One text prepared once: its tokens, structure, units within the limits, their token counts and the text features.

A :class:`Document` is built once per text (:meth:`Pipeline.document
<headseg.segmenter.pipeline.Pipeline.document>` tokenizes it, finds its units
and cuts them to the hard limits, then calls :meth:`Document.build`), and every
reader after that reads it: the levels, every scale of a segment tree, the
size limits, the structural prior and the final token counts.  Nothing derives
these again.  What it holds:

* the text, its tokens (:class:`~headseg.analysis.text.TokenizedText`) and its
  Markdown structure (None for plain text);
* the units: character spans tiling the text, each within the hard limits, with
  their token ranges ``[U, 2]`` and model-token counts ``[U]`` (a token belongs
  to the unit its first character falls in: :func:`unit_token_ranges`);
* the span counter of ``max_tokens`` (:class:`TokenCount`: the model's tokens, or
  a token counter's, memoised);
* the text features of the topic search: which units start on the line of the
  unit before, which open a paragraph, whether the lines are paragraphs, which
  read as headings (:meth:`Document.headings`), and for the structural prior the
  unit starts, which of them open a line and which follow a sentence's end, and
  the text's line starts (those read by some searches only: on first reading, once).

Construction checks the invariants (units tiling the text, one feature value
per unit, the tokens being the text's) and raises :class:`HeadsegError`; the
arrays are read-only.  Cost: O(U + N) for U units and N tokens, plus one regex
test per unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Sequence

import numpy as np
import regex

from headseg.analysis.errors import HeadsegError
from headseg.analysis.segments import Segmentation
from headseg.analysis.text import CLOSER, TokenizedText

from .lines import heading_units, lines_are_paragraphs, paragraph_starts, starts_same_line
from .structure import Structure, line_starts

Span = tuple[int, int]

#: a sentence's end before a cut: a terminal, closing quotes or brackets after it, then whitespace
_SENTENCE_END = regex.compile(rf"[\p{{Sentence_Terminal}}…]{CLOSER}*\s*$")


def unit_token_ranges(tokens: TokenizedText, units: Sequence[Span]) -> np.ndarray:
    """Token range ``[U, 2]`` of each unit in the text's token stream (a token belongs to the unit its
    first character falls in)."""
    if not len(units):
        return np.zeros((0, 2), np.int64)
    tok_start = tokens.offsets[:, 0] if len(tokens) else np.zeros(0, np.int64)
    first = np.searchsorted(tok_start, np.asarray([a for a, _ in units], dtype=np.int64), side="left")
    return np.stack([first, np.append(first[1:], len(tokens))], axis=1)


def unit_token_counts(tokens: TokenizedText, units: Sequence[Span]) -> np.ndarray:
    """``[U]`` the model's tokens of each unit (:func:`unit_token_ranges`' widths)."""
    ranges = unit_token_ranges(tokens, units)
    return ranges[:, 1] - ranges[:, 0]


def at_line_start(text: str, offset: int) -> bool:
    """Whether only spaces or tabs stand between ``offset`` and the start of its line (the indentation
    of a list item's or a quote's lines belongs to the unit before)."""
    i = offset
    while i > 0 and text[i - 1] in " \t":
        i -= 1
    return i == 0 or text[i - 1] in "\r\n"


def after_sentence_end(text: str, offset: int) -> bool:
    """Whether ``text[:offset]`` ends with a sentence's end (whitespace after it allowed)."""
    return _SENTENCE_END.search(text, max(0, offset - 16), offset) is not None


class TokenCount:
    """Token counts of spans of one text, in the units of its ``max_tokens`` limit.

    Without a counter: the model's tokens of the whole text, a token counted in the
    span its first character falls in, so counts add up exactly over concatenation
    (``exact``).  With a counter: ``counter(text[s:e])``, memoised (the unit split,
    the search's sizes and the final check count the same spans); such counts need
    not add up, so the search uses an additive estimate and the final segments are
    checked with the counter.
    """

    def __init__(self, text: str, tokens: TokenizedText, counter: Callable[[str], int] | None):
        if tokens.text != text:
            raise HeadsegError("the tokens are not those of the text")
        self.text = text
        self.counter = counter
        self.exact = counter is None
        self._tok_start = tokens.offsets[:, 0] if len(tokens) else np.zeros(0, np.int64)
        self._memo: dict[Span, int] = {}

    def span(self, s: int, e: int) -> int:
        """Tokens of ``text[s:e]`` (characters ``s`` to ``e``)."""
        if self.counter is None:
            return int(np.searchsorted(self._tok_start, e, "left") - np.searchsorted(self._tok_start, s, "left"))
        n = self._memo.get((s, e))
        if n is None:
            n = self._memo[(s, e)] = self.counter(self.text[s:e])
        return n


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Document:
    """One text on its way through the segmenter, prepared once (see the module's docstring).

    Build it with :meth:`build`, which derives the features; the constructor checks them.
    """

    text: str
    tokens: TokenizedText
    units: tuple[Span, ...]
    count: TokenCount
    #: the text's Markdown structure (:mod:`~headseg.segmenter.structure`), None for plain text
    structure: Structure | None
    #: ``[U, 2]`` each unit's token range; ``unit_tokens [U]`` its model tokens
    token_ranges: np.ndarray
    unit_tokens: np.ndarray
    #: ``[U]`` unit ``i`` starts on the line unit ``i − 1`` started on (:func:`~.lines.starts_same_line`)
    same_line: np.ndarray
    #: the text's lines hold paragraphs (:func:`~.lines.lines_are_paragraphs`)
    prose: bool
    #: ``[U]`` unit ``i`` opens a paragraph (:func:`~.lines.paragraph_starts`)
    paragraph_starts: np.ndarray
    #: ``[U]`` each unit's start offset
    starts: np.ndarray
    #: the headings found so far, by their longest length in tokens (:meth:`headings`)
    _headings: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.units)
        if self.tokens.text != self.text or self.count.text != self.text:
            raise HeadsegError("a document's tokens and token count must be its text's")
        pos = 0
        for a, b in self.units:
            if a != pos or b <= a:
                raise HeadsegError(f"a document's units must tile its text (at offset {pos}: {a}..{b})")
            pos = b
        if pos != len(self.text):
            raise HeadsegError(f"a document's units end at {pos}, its text at {len(self.text)}")
        for name in ("unit_tokens", "same_line", "paragraph_starts", "starts"):
            if len(getattr(self, name)) != n:
                raise HeadsegError(f"a document needs one {name} value per unit ({len(getattr(self, name))} for {n})")
        if self.token_ranges.shape != (n, 2):
            raise HeadsegError(f"a document's token ranges need shape [{n}, 2] (got {self.token_ranges.shape})")
        if self.structure is not None and self.structure.text != self.text:
            raise HeadsegError("a document's structure must be its text's")

    @classmethod
    def build(cls, text: str, tokens: TokenizedText, units: Sequence[Span], structure: Structure | None = None,
              count: TokenCount | None = None) -> "Document":
        """The document of ``text`` (tokenized as ``tokens``) over ``units`` (spans tiling it, each within
        the hard limits), its features derived here once (those only some searches read, on first
        reading).  ``count``: the span counter of its ``max_tokens`` (None: the model's tokens)."""
        units = tuple((int(a), int(b)) for a, b in units)
        ranges = unit_token_ranges(tokens, units)
        same = starts_same_line(text, units)
        prose = lines_are_paragraphs(text, units, same)
        unit_tokens = ranges[:, 1] - ranges[:, 0]
        starts = np.asarray([a for a, _ in units], dtype=np.int64)
        return cls(
            text, tokens, units, count if count is not None else TokenCount(text, tokens, None), structure,
            _frozen(ranges), _frozen(unit_tokens), _frozen(same), bool(prose),
            _frozen(paragraph_starts(text, units, same, prose)), _frozen(starts))

    @cached_property
    def at_line(self) -> np.ndarray:
        """``[U]`` bool: unit ``i`` opens a line (:func:`at_line_start`; the structural prior's)."""
        return _frozen([at_line_start(self.text, int(s)) for s in self.starts])

    @cached_property
    def after_end(self) -> np.ndarray:
        """``[U]`` bool: a sentence's end precedes unit ``i`` (:func:`after_sentence_end`; the structural prior's)."""
        return _frozen([after_sentence_end(self.text, int(s)) for s in self.starts])

    @cached_property
    def lines(self) -> tuple[int, ...]:
        """The text's line starts, ``len(text)`` last (:func:`~.structure.line_starts`): read only by the
        structural prior (with a budget or Markdown), so found on first reading, once."""
        return tuple(line_starts(self.text))

    def __len__(self) -> int:
        """The number of units."""
        return len(self.units)

    def headings(self, max_tokens: int) -> np.ndarray:
        """``[U]`` bool: the units that are headings of at most ``max_tokens`` tokens
        (:func:`~.lines.heading_units`; 0: none).  The text is read once per longest length asked
        for: a shorter one is the longer one's headings of at most that many tokens."""
        if not max_tokens:
            return np.zeros(len(self.units), dtype=bool)
        longer = [m for m in self._headings if m >= max_tokens]
        if longer:
            return self._headings[min(longer)] & (self.unit_tokens <= max_tokens)
        found = _frozen(heading_units(self.text, self.units, self.unit_tokens, max_tokens, same_line=self.same_line))
        self._headings[max_tokens] = found
        return found

    def span_tokens(self, s: int, e: int) -> int:
        """Tokens of ``text[s:e]`` in the units of ``max_tokens`` (:meth:`TokenCount.span`)."""
        return self.count.span(s, e)

    def finish(self, result: Segmentation) -> Segmentation:
        """``result`` (a segmentation of this text) with every segment's and tree node's ``token_count``
        and ``headings`` (the heading path above its start; empty in plain text) filled in."""
        return result.annotated(self.count.span, None if self.structure is None else self.structure.heading_path)


__all__ = ("Document", "TokenCount", "after_sentence_end", "at_line_start", "unit_token_counts", "unit_token_ranges")
