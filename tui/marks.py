"""What the document pane marks: units and topics, from headseg's segmenter (one pass) or sentences.

:class:`AutoSegmenter` builds one :class:`~headseg.Segmenter` from a
:class:`~headseg.config.SegmenterConfig`, as every command does, and segments
each document once: the segment tree, and the units that tree was searched
over, from the same pass.  Nothing here imports Textual.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Mapping

from headseg.analysis.errors import HeadsegError, first_line
from headseg.analysis.text import split_sentences
from headseg.config import SegmenterConfig


@dataclass
class MarkedSpans:
    """What the document pane marks: ``units`` and ``topics`` as ``[(start, end)]`` char spans.

    Plain spans, not a :class:`headseg.analysis.segments.Segmentation`: the
    sentence fallback has no segmenter result, and an injected segmenter may
    return these directly.  ``topic_scores``: one per topic (the segmenter's
    boundary scores); ``source``: ``"sentences"`` or ``"segmenter"``, named in
    the pane's header.  ``tree``: the segment tree's nodes in pre-order as
    ``(depth, start, end, path)`` (path ``"2.1"``: child numbers from the document
    down), empty when the topics are one level; the topics are then its leaves.
    ``topic_headings``: the heading path of each topic (``["Install", "GPU"]``).
    """

    units: list[tuple[int, int]]
    topics: list[tuple[int, int]]
    topic_scores: list[float] = field(default_factory=list)
    source: str = "sentences"
    tree: list[tuple[int, int, int, str]] = field(default_factory=list)
    #: each topic's heading path (Markdown: the headings above its start), empty lists in plain text
    topic_headings: list[list[str]] = field(default_factory=list)


def sentence_segmentation(text: str) -> MarkedSpans:
    """The fallback: sentences from :func:`headseg.analysis.text.split_sentences`, no topics."""
    return MarkedSpans(units=split_sentences(text), topics=[], source="sentences")


class AutoSegmenter:
    """Units and topics from ``headseg.Segmenter`` when it exists and works.

    ``config``: the segmenter's :class:`SegmenterConfig` (or its fields), validated
    here: a bad setting raises :class:`HeadsegError` now, it is never traded for
    another model.  ``loaded``: the model the TUI already holds (a
    :class:`~headseg.analysis.model.LoadedModel`), so it is not loaded twice.
    Each call builds its segmenter and drops it after its one pass: the app marks
    one document, and a segmenter of its own per call needs no lock around the
    units it keeps (``searched_units``).

    A call returns ``(MarkedSpans, warning)``; when the segmenter cannot be built
    or fails, the warning says why in one line and the marks fall back to
    sentences, because the TUI must keep working without the segmenter.
    """

    def __init__(self, config: SegmenterConfig | Mapping[str, Any] | None = None, loaded: Any = None):
        self.config = SegmenterConfig.of(config)
        self.loaded = loaded

    def __call__(self, text: str) -> tuple[MarkedSpans, str]:
        try:
            seg = self._build()
        except ImportError as exc:  # the front door or its engine is not installed here
            return sentence_segmentation(text), f"segmenter unavailable ({type(exc).__name__}); showing sentences"
        except Exception as exc:  # noqa: BLE001 - the segmenter is optional; never crash the app
            return sentence_segmentation(text), f"segmenter failed ({first_line(exc)}); showing sentences"
        try:
            return _marks(seg, text), ""
        except Exception as exc:  # noqa: BLE001 - as above
            return sentence_segmentation(text), f"segmenter failed ({first_line(exc)}); showing sentences"

    def _build(self):
        """A marking segmenter of this configuration, on the model handed over if there is one."""
        cls = _marking_segmenter()
        return cls(config=self.config) if self.loaded is None else cls(model=self.loaded, config=self.config)


def _marks(seg, text: str) -> MarkedSpans:
    """One tree-level pass of ``seg`` (a :func:`_marking_segmenter`) over ``text``, as marks."""
    seg.searched_units = None
    tree = seg.segment(text, level="tree")
    # the tree's leaves are flat headseg's topics exactly; the levels above them are marked too
    units = seg.searched_units
    if units is None:
        if text.strip():
            raise HeadsegError("the segmenter encoded no units")  # a pipeline that no longer says them
        units = [(s.start, s.end) for s in tree]  # nothing to compare: the whitespace units are the segments
    nodes = list(tree.nodes)
    deep = any(n.depth > 1 for n in nodes)
    return MarkedSpans(
        units=[(int(a), int(b)) for a, b in units],
        topics=[(s.start, s.end) for s in tree],
        topic_scores=[float(s.score) for s in tree],
        source="segmenter",
        tree=[(n.depth, n.start, n.end, p) for n, p in zip(nodes, tree.node_paths())] if deep else [],
        topic_headings=[list(s.headings) for s in tree],
    )


def _marking_segmenter() -> type:
    """:func:`_marking_class` of the front door's :class:`headseg.Segmenter` (imported on first use:
    without the front door the TUI shows sentences)."""
    from headseg.api import Segmenter

    return _marking_class(Segmenter)


@functools.cache
def _marking_class(segmenter: type) -> type:
    """A ``segmenter`` (:class:`headseg.Segmenter`) that keeps the units its last pass encoded.

    The tree is searched over the text's units (split at blocks, tiny runs grouped, each within the
    limits); keeping the ones it encoded (``searched_units``) shows exactly those, without preparing
    the text a second time for ``level="unit"``.
    """

    class MarkingSegmenter(segmenter):
        searched_units: list[tuple[int, int]] | None = None

        def unit_vectors_many(self, items, progress=None):
            units = [list(u) for _, u in items]
            self.searched_units = units[0] if len(units) == 1 else None
            return super().unit_vectors_many(items, progress=progress)

    return MarkingSegmenter
