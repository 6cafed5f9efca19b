"""Segmentation levels: what a segmentation is made of, each a registered strategy.

A level turns one prepared text (:class:`~headseg.segmenter.document.Document`),
when it needs them its unit vectors, and what the search is asked
(:class:`~headseg.segmenter.request.SearchRequest`) into a
:class:`~headseg.analysis.segments.Segmentation`.  Each registers itself here
with :func:`register_level`, next to its definition, saying whether it needs
the unit vectors (``search``: the model runs) and which of the options it
takes (``options``: names of :class:`~headseg.segmenter.options.SegmentOptions`
fields that go with some levels only, such as ``segments``, ``overlap``,
``depth``); the options' validation, the command line's ``--level`` choices,
the HTTP schema and the adapters read the registry, so a new level is its
strategy and nothing else, and a level's own option is its field and the level
that reads it.  A strategy gets its own options' values in
:attr:`LevelContext.options`; it never sees the whole ``SegmentOptions``.  The
registry's order is the order users see: ``topic`` (the default), ``unit``, ``tree``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from headseg.analysis.errors import HeadsegError, shown
from headseg.analysis.registry import Registry
from headseg.analysis.segments import Segmentation, check_chunks

from .blocks import LinedSpans, line_start_boundaries
from .document import Document
from .limits import overlap_chunks
from .request import SearchRequest
from .topics import TopicParams, document_boundaries
from .tree import tree_levels, tree_nodes


@dataclass(frozen=True)
class LevelContext:
    """What a level's strategy may read beyond the document, its vectors and the search request: the
    topic search's knobs, the profile's hash (recorded in ``meta``) and the values of the options
    the level declared (``options``: name -> value, None where not given)."""

    params: TopicParams
    profile_hash: str
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


#: a level's strategy: ``(document, unit vectors [U, D] or None, search request, context) -> Segmentation``
Strategy = Callable[[Document, "np.ndarray | None", SearchRequest, LevelContext], Segmentation]


@dataclass(frozen=True)
class Level:
    """One registered level: its strategy, its one-clause help, and what it needs and takes."""

    name: str
    help: str
    strategy: Strategy
    #: the strategy reads unit vectors (the model runs); False: units alone
    search: bool
    #: the level-specific options it takes (fields of ``SegmentOptions``; ``segments``: exactly N segments,
    #: ``overlap``: overlapped chunks (``Segmentation.chunks``), ``depth``: the levels of a segment tree)
    options: frozenset[str] = frozenset()

    def takes(self, option: str) -> bool:
        """Whether this level takes the level-specific option ``option``."""
        return option in self.options


#: the levels by name, in registry order (``topic``, ``unit``, then any added later)
LEVELS: Registry[Level] = Registry("level")


def register_level(name: str, help: str, *, search: bool,
                   options: Sequence[str] = ()) -> Callable[[Strategy], Strategy]:
    """Decorator: register the decorated strategy as level ``name`` (refuses a name already taken),
    taking the level-specific ``options`` (names of ``SegmentOptions`` fields; the options check them)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise HeadsegError(f"a level name must be an identifier (got {shown(name)})")
    if isinstance(options, str) or not all(isinstance(o, str) and o.isidentifier() for o in options):
        raise HeadsegError(f"a level's options must be option names (got {shown(options)})")
    return LEVELS.register(name, lambda strategy: Level(name, help, strategy, bool(search), frozenset(options)))


def level_names() -> tuple[str, ...]:
    """The registered level names, in registry order (``topic``, ``unit``, then any added later)."""
    return LEVELS.names()


def level_help() -> str:
    """One line for ``--level``'s help: ``name: what it gives`` for every level."""
    return LEVELS.help()


def get_level(name: str) -> Level:
    """The registered level ``name`` (raises :class:`HeadsegError` naming the choices)."""
    return LEVELS.get(name)


def level_options() -> tuple[str, ...]:
    """Every option some registered level declares, in first-declared order: the options that go with
    some levels only (the others go with every level)."""
    return tuple(dict.fromkeys(o for lv in LEVELS.values() for o in sorted(lv.options)))


def levels_taking(option: str) -> tuple[str, ...]:
    """The registered levels that take the level-specific ``option``, in registry order."""
    return tuple(n for n, lv in LEVELS.items() if option in lv.options)


def whitespace_result(d: Document, level: str) -> Segmentation:
    """The result of a text with nothing to compare (empty or whitespace only): its units as they are
    (only the hard limits cut whitespace), scored 0."""
    return d.finish(Segmentation.from_boundaries(
        d.text, [a for a, _ in d.units[1:]], [0.0] * (len(d.units) - 1), level=level,
        meta={"units": len(d.units)}))


@register_level("topic", "coherent groups of units (their number chosen automatically unless --segments)",
                search=True, options=("segments", "overlap"))
def topic_level(d: Document, x: np.ndarray | None, request: SearchRequest, ctx: LevelContext) -> Segmentation:
    """Topic segments from the unit vectors ``x [U, D]``: the optimal partition under the size limits
    (:func:`~headseg.segmenter.topics.document_boundaries`), with overlapped chunks when asked
    (:attr:`Segmentation.chunks`, their offsets also in ``meta["chunks"]``)."""
    found = document_boundaries(d, x, request, ctx.params)
    cuts = found.cuts
    meta = {"units": len(d.units), "profile": ctx.profile_hash}
    result = Segmentation.from_boundaries(d.text, [d.units[c][0] for c in cuts], found.scores, level="topic",
                                          meta=meta, confidence=found.confidence)
    result = line_start_boundaries(d, result, request.max_chars, request.max_tokens)
    overlap = ctx.options.get("overlap")
    if overlap:
        spans = overlap_chunks(d, cuts, overlap, request.max_chars, request.max_tokens,
                               starts=[s.start for s in result], begin=LinedSpans(d).indent_start)
        result.meta["chunks"] = spans  # the offsets alone, as before the chunks were records (issue 24)
        result.chunks = [replace(s, start=a, text=d.text[a:b]) for s, (a, b) in zip(result.segments, spans)]
        check_chunks(d.text, result.segments, result.chunks)
    return d.finish(result)


@register_level("unit", "sentence-like units (short lines of code and markup in groups)", search=False)
def unit_level(d: Document, x: np.ndarray | None, request: SearchRequest, ctx: LevelContext) -> Segmentation:
    """The units themselves, each a segment scored 1: what the search reads, so in Markdown the short lines of a
    code block, an HTML block, a JSX element, front matter or link definitions come in groups
    (:mod:`~headseg.segmenter.verbatim`)."""
    return d.finish(Segmentation.from_boundaries(
        d.text, [a for a, _ in d.units[1:]], [1.0] * (len(d.units) - 1), level="unit",
        meta={"units": len(d.units)}))


@register_level("tree", "topic segments within topic segments, the leaves within the limits "
                        "(--depth N levels; default: the text decides)", search=True, options=("depth",))
def tree_level(d: Document, x: np.ndarray | None, request: SearchRequest, ctx: LevelContext) -> Segmentation:
    """A segment tree from the unit vectors ``x [U, D]`` (:mod:`~headseg.segmenter.tree`): the
    segments are its leaves, ``nodes`` the whole tree."""
    levels = tree_levels(d, x, request, ctx.params, depth=ctx.options.get("depth"))
    cuts, scores, nodes = tree_nodes(levels, d.units, len(d.text))
    inner = {n.parent for n in nodes if n.parent is not None}
    sure = [n.confidence for n in nodes if n.id not in inner][1:]  # the leaves', past the text's start
    result = Segmentation.from_boundaries(d.text, cuts, scores, level="tree", nodes=nodes,
                                          meta={"units": len(d.units), "profile": ctx.profile_hash},
                                          confidence=None if None in sure else sure)
    return d.finish(line_start_boundaries(d, result, request.max_chars, request.max_tokens))


__all__: Sequence[str] = ("Level", "LevelContext", "Strategy", "get_level", "level_help", "level_names",
                          "level_options", "levels_taking", "register_level", "whitespace_result")
