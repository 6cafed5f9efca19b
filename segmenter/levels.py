"""Segmentation levels: what a segmentation is made of, each a registered strategy.

A level turns one prepared text (its tokens, units and token measure:
:class:`Prepared`) and, when it needs them, its unit vectors into a
:class:`~headseg.analysis.segments.Segmentation`.  Each registers itself here
with :func:`register_level`, next to its definition, saying whether it needs
the unit vectors (``search``: the model runs) and which options it takes
(``segments``, ``overlap``); the options' validation, the command line's
``--level`` choices, the HTTP schema and the adapters read the names from
:func:`level_names`, so a new level is its strategy and nothing else.  The
registry's order is the order users see: ``topic`` (the default), ``unit``, ``tree``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from headseg.analysis.errors import HeadsegError
from headseg.analysis.segments import Segmentation
from headseg.analysis.text import TokenizedText

from .encode import unit_token_ranges
from .limits import TokenMeasure, overlap_chunks
from .structure import Structure
from .topics import TopicParams, document_boundaries
from .tree import tree_levels, tree_nodes

if TYPE_CHECKING:  # read, never built, here (options.py validates levels)
    from .options import SegmentOptions


@dataclass
class Prepared:
    """One text on its way through the pipeline: its tokens, the measure of its size limits, and
    its units (character spans tiling ``text``, each within the hard limits)."""

    text: str
    doc: TokenizedText
    measure: TokenMeasure
    units: list[tuple[int, int]]
    #: the text's Markdown structure (:mod:`~headseg.segmenter.structure`), None for plain text
    structure: Structure | None = None

    @property
    def unit_tokens(self) -> np.ndarray:
        """``[U]`` model tokens of each unit (a token counts for the unit its first character falls in)."""
        r = unit_token_ranges(self.doc, self.units)
        return r[:, 1] - r[:, 0]

    def finish(self, result: Segmentation) -> Segmentation:
        """``result`` with every segment's (and tree node's) ``token_count`` and ``headings`` (the
        heading path above its start; empty in plain text) filled in."""
        result = self.measure.counted(result)
        if self.structure is None:
            return result
        path = self.structure.heading_path
        return replace(result, segments=[replace(s, headings=tuple(path(s.start))) for s in result.segments],
                       nodes=[replace(n, headings=tuple(path(n.start))) for n in result.nodes])


@dataclass(frozen=True)
class LevelContext:
    """What a level's strategy may read of the pipeline: the topic search's knobs and the profile's hash
    (recorded in ``meta``)."""

    params: TopicParams
    profile_hash: str


#: a level's strategy: ``(prepared text, unit vectors [U, D] or None, options, context) -> Segmentation``
Strategy = Callable[[Prepared, "np.ndarray | None", "SegmentOptions", LevelContext], Segmentation]


@dataclass(frozen=True)
class Level:
    """One registered level: its strategy, its one-clause help, and what it needs and takes."""

    name: str
    help: str
    strategy: Strategy
    #: the strategy reads unit vectors (the model runs); False: units alone
    search: bool
    #: takes ``SegmentOptions.segments`` (exactly N segments)
    segments: bool
    #: takes ``SegmentOptions.overlap`` (overlapped chunks in ``meta["chunks"]``)
    overlap: bool
    #: takes ``SegmentOptions.depth`` (the levels of a segment tree)
    depth: bool = False


_REGISTRY: dict[str, Level] = {}


def register_level(name: str, help: str, *, search: bool, segments: bool = False,
                   overlap: bool = False, depth: bool = False) -> Callable[[Strategy], Strategy]:
    """Decorator: register the decorated strategy as level ``name`` (refuses a name already taken)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise HeadsegError(f"a level name must be an identifier (got {name!r})")
    if name in _REGISTRY:
        raise HeadsegError(f"level '{name}' is already registered")

    def decorate(strategy: Strategy) -> Strategy:
        _REGISTRY[name] = Level(name, help, strategy, bool(search), bool(segments), bool(overlap), bool(depth))
        return strategy

    return decorate


def level_names() -> tuple[str, ...]:
    """The registered level names, in registry order (``topic``, ``unit``, then any added later)."""
    return tuple(_REGISTRY)


def level_help() -> str:
    """One line for ``--level``'s help: ``name: what it gives`` for every level."""
    return "; ".join(f"{name}: {lv.help}" for name, lv in _REGISTRY.items())


def get_level(name: str) -> Level:
    """The registered level ``name`` (raises :class:`HeadsegError` naming the choices)."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise HeadsegError(f"unknown level {name!r} (use {', '.join(_REGISTRY)})") from None


def whitespace_result(d: Prepared, level: str) -> Segmentation:
    """The result of a text with nothing to compare (empty or whitespace only): its units as they are
    (only the hard limits cut whitespace), scored 0."""
    return d.finish(Segmentation.from_boundaries(
        d.text, [a for a, _ in d.units[1:]], [0.0] * (len(d.units) - 1), level=level,
        meta={"units": len(d.units)}))


@register_level("topic", "coherent groups of units (their number chosen automatically unless --segments)",
                search=True, segments=True, overlap=True)
def topic_level(d: Prepared, x: np.ndarray | None, opts: "SegmentOptions", ctx: LevelContext) -> Segmentation:
    """Topic segments from the unit vectors ``x [U, D]``: the optimal partition under the size limits
    (:func:`~headseg.segmenter.topics.document_boundaries`), with overlapped chunks when asked."""
    cuts, scores = topic_cuts(d, x, opts, ctx.params)
    meta = {"units": len(d.units), "profile": ctx.profile_hash}
    if opts.overlap:
        meta["chunks"] = overlap_chunks(d.units, cuts, opts.overlap, d.measure, opts.max_chars, opts.max_tokens)
    return d.finish(Segmentation.from_boundaries(
        d.text, [d.units[c][0] for c in cuts], scores, level="topic", meta=meta))


def topic_cuts(d: Prepared, x: np.ndarray, opts: "SegmentOptions",
               params: TopicParams) -> tuple[list[int], list[float]]:
    """Unit indices that open topic segments 2..m of ``d``, and their boundary strengths."""
    return document_boundaries(x, d.text, d.units, d.unit_tokens, d.measure, opts, params,
                               structure=d.structure)


@register_level("unit", "sentence-like units", search=False)
def unit_level(d: Prepared, x: np.ndarray | None, opts: "SegmentOptions", ctx: LevelContext) -> Segmentation:
    """The units themselves, each a segment scored 1."""
    return d.finish(Segmentation.from_boundaries(
        d.text, [a for a, _ in d.units[1:]], [1.0] * (len(d.units) - 1), level="unit",
        meta={"units": len(d.units)}))


@register_level("tree", "topic segments within topic segments, the leaves within the limits "
                        "(--depth N levels; default: the text decides)", search=True, depth=True)
def tree_level(d: Prepared, x: np.ndarray | None, opts: "SegmentOptions", ctx: LevelContext) -> Segmentation:
    """A segment tree from the unit vectors ``x [U, D]`` (:mod:`~headseg.segmenter.tree`): the
    segments are its leaves, ``nodes`` the whole tree."""
    levels = tree_levels(x, d.text, d.units, d.unit_tokens, d.measure, opts, ctx.params,
                         structure=d.structure, depth=opts.depth)
    cuts, scores, nodes = tree_nodes(levels, d.units, len(d.text))
    flat = Segmentation.from_boundaries(d.text, cuts, scores, level="tree",
                                        meta={"units": len(d.units), "profile": ctx.profile_hash})
    return d.finish(replace(flat, nodes=nodes))


__all__: Sequence[str] = ("Level", "LevelContext", "Prepared", "get_level", "level_help", "level_names",
                          "register_level", "topic_cuts", "whitespace_result")
