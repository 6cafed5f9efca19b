"""What the framework adapters share: the segmenter (built once, on first use) and its one :class:`SegmentOptions`.

The adapters take the segmentation options as keyword arguments and pass them
here unchanged, so an option added to :class:`SegmentOptions` reaches every
adapter without being named in it.
"""

from __future__ import annotations

import asyncio
import os
import threading
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from headseg.analysis.errors import HeadsegError
from headseg.analysis.profile import HeadProfile
from headseg.analysis.segments import Segment, Segmentation
from headseg.api import Segmenter
from headseg.config import SegmenterConfig
from headseg.segmenter.options import SegmentOptions, option_names


#: held while an adapter builds its segmenter: adapters used from several threads load the model once
_BUILD_LOCK = threading.Lock()

#: why an adapter holding a ready Segmenter cannot be pickled
UNPICKLABLE = ("an adapter built from a Segmenter object cannot be pickled (for Ray or a process pool): "
               "build it from model/profile/backend/device, and each process loads the model itself")


#: the frameworks' own overlap keywords (LangChain's and LlamaIndex's chunk_overlap, Haystack's split_overlap)
FOREIGN_OVERLAP = ("chunk_overlap", "split_overlap")


def refuse_foreign_overlap(adapter: str, options: dict[str, Any]) -> None:
    """Take the frameworks' overlap keywords out of ``options``: 0 is no overlap, as there; any other value
    is refused, pointing at ``overlap=N`` (theirs counts characters or tokens, headseg's whole sentences)."""
    for key in FOREIGN_OVERLAP:
        value = options.pop(key, 0)
        if value:
            raise ValueError(f"{adapter} does not take {key}={value!r}: it overlaps by whole sentences, "
                             f"use overlap=N (each chunk repeats up to N sentences of the one before)")


def adapter_options(options: Mapping[str, Any]) -> SegmentOptions:
    """The validated :class:`SegmentOptions` of an adapter's keyword arguments (None keeps the default).

    A name that is no option is a :class:`TypeError`, as for any other unexpected
    keyword argument; a bad value is an :class:`InputError` naming the option.
    """
    unknown = sorted(set(options) - set(option_names()))
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r} "
                        f"(the segmentation options are {', '.join(option_names())})")
    return SegmentOptions.of(options)


class SegmenterRunner:
    """A :class:`Segmenter` (given, or built on first use) and the :class:`SegmentOptions` every call passes it.

    ``options`` are :class:`SegmentOptions`' fields as keyword arguments,
    validated here (a token counter given by name is loaded here, once).  The
    segmenter is built from :attr:`config`, a :class:`SegmenterConfig` of the
    adapter's ``model``/``profile``/``backend``/``device`` (``config``: one to
    start from); a profile may also be a :class:`HeadProfile` object.
    """

    def __init__(self, segmenter: Segmenter | None = None, *, model: str | os.PathLike | None = None,
                 profile: Any = None, backend: str = "auto", device: str | None = None,
                 config: SegmenterConfig | None = None, **options: Any):
        if segmenter is not None:
            if not isinstance(segmenter, Segmenter):
                raise HeadsegError(f"segmenter must be a headseg Segmenter (got {type(segmenter).__name__})")
            if model is not None or profile is not None or backend != "auto" or device is not None \
                    or config is not None:
                raise HeadsegError("pass either a ready segmenter or model/profile/backend/device, not both")
        self._segmenter = segmenter
        self.given = segmenter is not None
        #: a profile given as an object (a config holds names and paths only)
        self.profile_object = profile if isinstance(profile, HeadProfile) else None
        named = {"model": model, "profile": None if self.profile_object is not None else profile,
                 "backend": backend, "device": device}
        self.config = SegmenterConfig.of(config, **{k: v for k, v in named.items() if v is not None})
        self.options = adapter_options(options)

    def __getstate__(self) -> dict[str, Any]:
        # Ray and process pools (LlamaIndex's IngestionPipeline(num_workers=N)) pickle the adapters: the
        # model travels as the names it is built from and is built again on first use over there.  A
        # Segmenter object cannot travel (its backend holds a live model), and must not be dropped
        # silently: the other side would segment with the default model instead.
        if self.given:
            raise TypeError(UNPICKLABLE)
        return dict(self.__dict__, _segmenter=None)

    def __deepcopy__(self, memo: dict) -> "SegmenterRunner":
        # A copy of an adapter shares its model (read-only, and a Segmenter cannot be copied).
        new = object.__new__(type(self))  # not copy.copy: that goes through __getstate__
        new.__dict__.update(self.__dict__)
        memo[id(self)] = new
        return new

    @property
    def loaded(self) -> bool:
        """Whether the segmenter exists yet (given, or built by a first use)."""
        return self._segmenter is not None

    @property
    def segmenter(self) -> Segmenter:
        """The segmenter, loading the model on first access (once, however many threads ask at once)."""
        if self._segmenter is None:
            with _BUILD_LOCK:
                if self._segmenter is None:
                    self._segmenter = Segmenter(profile=self.profile_object, config=self.config)
        return self._segmenter

    def segment_many(self, texts: Sequence[str]) -> list[Segmentation]:
        """The segmentations of ``texts`` with the options, in one call (the model batches across documents)."""
        if not texts:
            return []
        return self.segmenter.segment_many(list(texts), self.options)

    async def asegment_many(self, texts: Sequence[str]) -> list[Segmentation]:
        """:meth:`segment_many` for asyncio (:meth:`Segmenter.asegment_many`): the event loop is never
        blocked, and concurrent calls share model calls through one batcher."""
        if not texts:
            return []
        segmenter = self._segmenter
        if segmenter is None:  # the first use loads the model (seconds): off the event loop too
            segmenter = await asyncio.get_running_loop().run_in_executor(None, lambda: self.segmenter)
        return await segmenter.asegment_many(list(texts), self.options)


def page_numbers(text: str, result: Segmentation | Sequence[Segment]) -> list[int]:
    """Page (1-based, pages separated by form feeds) on which each segment's first non-form-feed character lies."""
    pages, seen, pos = [], 0, 0
    for s in result:
        seen += text.count("\f", pos, s.start)
        pos = s.start
        lead = len(s.text) - len(s.text.lstrip("\f"))
        pages.append(1 + seen + lead)
    return pages


def chunk_segments(result: Segmentation) -> list[Segment]:
    """The chunks an adapter emits for ``result``: its segments, or with the ``overlap`` option its
    overlapped chunks (:attr:`Segmentation.chunks`: ``start``/``end`` the chunk's offsets in the
    document, its ``text`` repeating the end of the segment before, ``token_count`` the chunk's)."""
    return list(result.chunks or result.segments)


def overlap_chars(result: Segmentation) -> list[int | None]:
    """Per chunk of :func:`chunk_segments`: how many characters at the start of its text repeat the segment
    before (the records' ``overlap_chars``), None for every chunk without the ``overlap`` option."""
    if not result.chunks:
        return [None] * len(result.segments)
    return [s.start - c.start for s, c in zip(result.segments, result.chunks)]


@dataclass(frozen=True)
class TreeChunk:
    """One node of a segment tree (``level="tree"``) as the adapters emit it: ``segment`` holds its span,
    text, score, token count and headings; ``id``/``parent``/``depth`` as in the records
    (:data:`~headseg.analysis.segments.RECORD_FIELDS`); ``leaf``: it has no children (it is a segment)."""

    segment: Segment
    id: int
    parent: int | None
    depth: int
    leaf: bool


def tree_chunks(result: Segmentation) -> list[TreeChunk] | None:
    """The nodes of ``result``'s segment tree in pre-order (a parent before its children), or None
    for a flat segmentation (its chunks are :func:`chunk_segments`').  Read from the segmentation's
    records (:meth:`Segmentation.to_records`), so a chunk's metadata is what the outputs write."""
    if not result.nodes:
        return None
    return [TreeChunk(Segment(r["start"], r["end"], r["text"], r["score"], r["token_count"], tuple(r["headings"]),
                              r["confidence"]),
                      r["id"], r["parent"], r["depth"], r["index"] is not None)
            for r in result.to_records()]
