"""The segmenter's Python API: :class:`Segmenter`.

Pipeline (data flows one way; each step has its own module)::

    text ─ units (sentence-like spans; units.py), cut to the hard limits (limits.py)
         ─ one isolated window per unit ─ the topic heads' context vectors, pooled per unit (encode.py)
         ─ line groups and headings (lines.py) ─ optimal partition with a per-segment penalty,
           or exactly N segments, under the size limits (topics.py, search.py)
         ─ Segmentation (exact character offsets; analysis/segments.py)

Each unit is encoded on its own so that no context leaks across a candidate
boundary.  Units are compared across the whole document, not inside one model
window, and the boundaries come from a global optimum, not from local depth
scores.  Options are one :class:`~headseg.segmenter.options.SegmentOptions`;
streaming over a corpus is in stream.py.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from headseg.analysis.capture import HeadActivations
from headseg.analysis.errors import HeadsegError, InputError, is_integer
from headseg.analysis.model import LoadedModel, load_model
from headseg.analysis.profile import HeadProfile, resolve_profile
from headseg.analysis.segments import Segmentation
from headseg.analysis.text import TokenizedText, Window, tokenize

from headseg.export.backends import backend_names, make_backend
from headseg.export.serve import artifact_profile

from . import aio
from .encode import encode_units, sorted_selection, unit_token_ranges
from .limits import TokenMeasure, overlap_chunks, split_oversized
from .speakers import content_spans
from .options import SegmentOptions, check_splitter
from .stream import (DEFAULT_BATCH_CHARS, DEFAULT_BATCH_DOCS, DocumentError, check_batch_sizes, check_errors, checked,
                     iter_batches, iterable_of, segment_batch)
from . import topics
from .topics import TopicParams
from .units import UnitParams, find_units

__all__ = ["Segmenter", "DocumentError", "TopicParams", "SegmentOptions", "DEFAULT_BATCH_DOCS", "DEFAULT_BATCH_CHARS"]


@dataclass
class _Document:
    """One text on its way through :meth:`Segmenter.segment_many`."""

    text: str
    doc: TokenizedText
    measure: TokenMeasure
    units: list[tuple[int, int]]


class Segmenter:
    """Segment text into sentence-like units or topic segments.

    >>> seg = Segmenter()                      # embedded model, shipped head profile
    >>> result = seg.segment(text)             # topic segments, number chosen automatically
    >>> "".join(s.text for s in result) == text
    True
    """

    def __init__(self, model: "str | os.PathLike | LoadedModel | None" = None,
                 profile: "HeadProfile | str | os.PathLike | None" = None,
                 backend: str = "auto", device: str | None = None, batch_size: int = 64, max_tokens: int = 128,
                 params: TopicParams | None = None, unit_params: UnitParams | None = None, unit_mode: str = "auto",
                 artifact: "str | os.PathLike | None" = None, precision: str | None = None,
                 threads: int | None = None, quiet: bool = False,
                 sentence_splitter: Callable[[str], Sequence[tuple[int, int]]] | None = None):
        """``model``: None (embedded), a local directory, a cached hub id, or a :class:`LoadedModel`.

        ``backend``: ``"auto"`` (default) serves from the ONNX artifact of the
        model, profile and precision, exporting it into the cache on first use,
        and falls back to torch where ONNX cannot serve; ``"onnx"`` insists on
        ONNX; ``"torch"`` is the reference.  ``artifact``: serve this exported
        artifact directory (its ``profile.json`` is the default profile).
        ``device``: auto, cpu or cuda; ``precision``: fp32, fp16 or int8 instead
        of the device's default (int8 on CPU, fp16 on CUDA; fp32 gives exactly
        the torch backend's boundaries); ``threads``: onnxruntime intra-op threads.
        ``sentence_splitter``: a callable ``text -> [(start, end), ...]`` (pysbd,
        spaCy...) for the units instead of the sentence rules.
        """
        names = backend_names()
        if not isinstance(backend, str) and not hasattr(backend, "capture"):
            raise HeadsegError(f"backend must be {', '.join(repr(n) for n in names)} or a capture backend "
                               f"(got {backend!r})")
        if isinstance(backend, str) and backend not in names:
            raise HeadsegError(f"unknown backend '{backend}' (use {', '.join(names[:-1])} or {names[-1]})")
        if unit_mode not in ("auto", "rules", "heads"):
            raise HeadsegError(f"unit_mode must be auto, rules or heads (got '{unit_mode}')")
        if not is_integer(batch_size) or batch_size < 1:
            raise HeadsegError("batch_size must be a positive integer")
        if not is_integer(max_tokens):
            raise HeadsegError(f"max_tokens must be an integer (got {max_tokens!r})")
        if threads is not None and (not is_integer(threads) or threads < 1):
            raise HeadsegError(f"threads must be a positive integer or None (got {threads!r})")
        if params is not None and not isinstance(params, TopicParams):
            raise HeadsegError(f"params must be a TopicParams (got {type(params).__name__})")
        if unit_params is not None and not isinstance(unit_params, UnitParams):
            raise HeadsegError(f"unit_params must be a UnitParams (got {type(unit_params).__name__})")
        self.sentence_splitter = check_splitter(sentence_splitter)
        if isinstance(model, LoadedModel):
            self.loaded = model
        else:
            # The ONNX engine needs no torch weights: load them only for the torch backend.
            self.loaded = load_model(model, weights=backend == "torch")
        # before the backend: building one may export its serving graph into the cache
        if not 8 <= max_tokens <= self.loaded.info.max_positions:
            raise HeadsegError(f"max_tokens must be between 8 and {self.loaded.info.max_positions}")
        if artifact is not None and profile is None:
            profile = artifact_profile(artifact, self.loaded)
        self.profile = resolve_profile(self.loaded.info, profile)
        if hasattr(backend, "capture"):
            self.backend = backend
        else:
            self.backend = make_backend(self.loaded, self.profile, backend=backend, device=device, artifact=artifact,
                                        precision=precision, threads=threads, quiet=quiet)
        self.batch_size = int(batch_size)
        self.max_tokens = int(max_tokens)
        self.params = params or TopicParams()
        self.unit_params = unit_params or UnitParams()
        self.unit_mode = unit_mode
        info = self.loaded.info
        # Unit detection reads the profile's separator-focused heads; topic
        # similarity reads the topic heads (default: the whole last layer, which
        # compares sentences best, and the first layer at a quarter of the weight,
        # which keeps their words: docs/segmenter.md).
        self.heads, self.weights = sorted_selection(self.profile.heads, self.profile.weights)
        self.topic_heads, self.topic_weights = sorted_selection(
            *self.profile.topic_selection(info.num_layers, info.num_heads))

    def __repr__(self) -> str:
        return (f"Segmenter(model={self.loaded.info.name!r}, backend={self.backend.name!r}, "
                f"device={getattr(self.backend, 'device', '?')!r}, profile={self.profile.hash()})")

    def units(self, text: str, doc: TokenizedText | None = None, mode: str | None = None,
              sentence_splitter: Callable[[str], Sequence[tuple[int, int]]] | None = None) -> list[tuple[int, int]]:
        """Sentence-like unit spans tiling ``text`` (see :func:`segmenter.units.find_units`).

        ``sentence_splitter`` overrides the one given to the constructor.
        """
        splitter = self.sentence_splitter if sentence_splitter is None else check_splitter(sentence_splitter)
        return find_units(text, self, doc=doc, params=self.unit_params, mode=mode or self.unit_mode,
                          sentence_splitter=splitter)

    def capture(self, windows: Sequence[Window], heads=None, hidden: bool = False) -> HeadActivations:
        """Context vectors of ``heads`` (default: the unit-detection heads) for a batch of windows;
        ``hidden=True`` adds the model's last hidden states."""
        heads = self.heads if heads is None else heads
        if hidden:
            return self.backend.capture(windows, heads=heads, attention=False, norms=False, hidden=True)
        return self.backend.capture(windows, heads=heads, attention=False, norms=False)

    def unit_vectors(self, doc: TokenizedText, units: Sequence[tuple[int, int]], progress=None) -> np.ndarray:
        """``[U, N·d]`` weighted, per-head-normalised unit vectors (each unit encoded alone), with the
        model's own embedding appended (``[U, N·d + hidden]``) when the profile gives it a share."""
        return self.unit_vectors_many([(doc, units)], progress=progress)[0]

    def unit_vectors_many(self, items: Sequence[tuple[TokenizedText, Sequence[tuple[int, int]]]],
                          progress=None) -> list[np.ndarray]:
        """:meth:`unit_vectors` of several ``(doc, units)``, encoded in shared batches (less padding, fewer calls).

        In a transcript a unit is pooled over its text after the speaker label
        (:func:`~headseg.segmenter.speakers.content_spans`).
        """
        items = [(doc, content_spans(doc.text, units)) for doc, units in items]
        return encode_units(items, self.loaded.tokenizer, self.capture, self.topic_heads, self.topic_weights,
                            self.batch_size, self.max_tokens, progress=progress,
                            output_weight=self.profile.topic_output_weight)

    def segment(self, text: str, options: SegmentOptions | Mapping[str, Any] | None = None, *,
                progress=None, **overrides: Any) -> Segmentation:
        """Segment ``text`` with ``options`` (:class:`SegmentOptions`, or its fields as keywords).

        ``level="unit"``: sentence-like units.  ``level="topic"`` (default): coherent
        groups of units; their number is chosen automatically unless ``segments``
        is given.  ``max_chars`` / ``max_tokens`` are hard limits never exceeded
        (a unit larger than the limit is itself split); ``min_chars`` is honoured
        whenever the limits allow it.  The invariant
        ``"".join(s.text for s in result) == text`` always holds.
        ``progress=True`` shows a progress bar on stderr (when it is a terminal).

        ``max_tokens`` counts the segmenter model's tokens unless ``token_counter``
        is given: a callable ``str -> int``, a tokenizer, a local Hugging Face
        tokenizer directory or a cached model name (see
        :func:`headseg.segmenter.tokens.resolve_token_counter`).  Every segment's
        ``token_counter(segment.text) <= max_tokens`` then holds, checked on the
        final segments; a segment that the search's additive estimate let through
        over the limit (subword counts do not add up over concatenation) is split
        again at its best unit boundary, so in that rare case there can be more
        than ``segments`` segments.  ``Segment.token_count`` is in the counter's
        units, or the model's without one.
        ``sentence_splitter``: a callable ``text -> [(start, end), ...]`` (pysbd,
        spaCy...) used for the units instead of the sentence rules (default: the
        constructor's); its spans must be in order and leave only whitespace out.
        """
        return self.segment_many([text], options, progress=progress, **overrides)[0]

    def __call__(self, text: str, options: SegmentOptions | Mapping[str, Any] | None = None,
                 **kwargs: Any) -> Segmentation:
        """Same as :meth:`segment`."""
        return self.segment(text, options, **kwargs)

    async def asegment(self, text: str, options: SegmentOptions | Mapping[str, Any] | None = None,
                       **overrides: Any) -> Segmentation:
        """:meth:`segment` for asyncio: the work runs off the event loop (:mod:`.aio`), and the model
        calls of concurrent ``asegment`` calls are packed together by a token budget."""
        return await aio.asegment(self, text, options, **overrides)

    async def asegment_many(self, texts: Sequence[str], options: SegmentOptions | Mapping[str, Any] | None = None,
                            **overrides: Any) -> list[Segmentation]:
        """:meth:`segment_many` for asyncio (see :meth:`asegment`)."""
        return await aio.asegment_many(self, texts, options, **overrides)

    def segment_many(self, texts: Sequence[str], options: SegmentOptions | Mapping[str, Any] | None = None, *,
                     progress=None, **overrides: Any) -> list[Segmentation]:
        """:meth:`segment` for several documents, batching the model across them; order is kept."""
        opts = SegmentOptions.of(options, **overrides)
        texts = iterable_of(texts, "texts must be a list of str")
        _check_progress(progress)
        docs = [self._prepare(text, opts) for text in texts]
        results = [self._without_search(d, opts) for d in docs]
        todo = [i for i, r in enumerate(results) if r is None]
        vectors = self.unit_vectors_many([(docs[i].doc, docs[i].units) for i in todo], progress=progress) \
            if todo else []
        for i, x in zip(todo, vectors):
            results[i] = self._topic_segmentation(docs[i], x, opts)
        if opts.segments is not None and opts.level == "topic":
            _note_capped(results, opts.segments)
        return results

    def _prepare(self, text: str, opts: SegmentOptions) -> _Document:
        """Tokenize ``text`` and find its units, each within the hard limits (none for whitespace only)."""
        if not isinstance(text, str):
            raise InputError(f"expected text as str, got {type(text).__name__}")
        doc = tokenize(text, self.loaded.tokenizer)
        measure = TokenMeasure(text, doc, opts.counter)
        if not text.strip():
            # Nothing to compare: only the hard limits can cut whitespace.
            units = [(0, len(text))] if text else []
        else:
            splitter = self.sentence_splitter if opts.sentence_splitter is None else opts.sentence_splitter
            units = self.units(text, doc=doc, sentence_splitter=splitter)
        return _Document(text, doc, measure, split_oversized(text, doc, units, opts.max_chars, opts.max_tokens,
                                                             measure))

    def _without_search(self, d: _Document, opts: SegmentOptions) -> Segmentation | None:
        """The result of a document that needs no topic search (whitespace only, or ``level="unit"``)."""
        if d.text.strip() and opts.level == "topic":
            return None
        level, score = ("unit", 1.0) if d.text.strip() else (opts.level, 0.0)
        return d.measure.counted(Segmentation.from_boundaries(
            d.text, [a for a, _ in d.units[1:]], [score] * (len(d.units) - 1), level=level,
            meta={"units": len(d.units)}))

    def _topic_segmentation(self, d: _Document, x: np.ndarray, opts: SegmentOptions) -> Segmentation:
        """Topic segments of one document from its unit vectors ``x [U, D]``."""
        cuts, scores = self.topic_boundaries(x, d.text, d.doc, d.units, opts, d.measure)
        meta = {"units": len(d.units), "profile": self.profile.hash()}
        if opts.overlap:
            meta["chunks"] = overlap_chunks(d.units, cuts, opts.overlap, d.measure, opts.max_chars, opts.max_tokens)
        return d.measure.counted(Segmentation.from_boundaries(
            d.text, [d.units[c][0] for c in cuts], scores, level="topic", meta=meta))

    def topic_boundaries(self, x: np.ndarray, text: str, doc: TokenizedText, units: Sequence[tuple[int, int]],
                         opts: SegmentOptions, measure: TokenMeasure | None = None) -> tuple[list[int], list[float]]:
        """Unit indices that open topic segments 2..m of ``text``, and their boundary strengths.

        ``x [U, D]``: the unit vectors of ``units``; the search's preparation and the
        search are :func:`~headseg.segmenter.topics.document_boundaries`'.
        """
        measure = measure or TokenMeasure(text, doc, opts.counter)
        r = unit_token_ranges(doc, units)
        return topics.document_boundaries(x, text, units, r[:, 1] - r[:, 0], measure, opts, self.params)

    def iter_segment(self, items: Iterable[Any], options: SegmentOptions | Mapping[str, Any] | None = None, *,
                     text_field: str = "text", id_field: str = "id",
                     batch_docs: int = DEFAULT_BATCH_DOCS, batch_chars: int = DEFAULT_BATCH_CHARS,
                     errors: str = "raise", progress=None, **overrides: Any) -> Iterator[Segmentation | DocumentError]:
        """Segment a stream of documents, yielding one result per input item, in input order.

        ``items`` may be any iterable (a generator over a corpus of any size) of
        texts (``str``), records (mappings with ``text_field`` and optionally
        ``id_field``) or ``(id, text)`` pairs.  At most one batch is read ahead:
        ``batch_docs`` documents, or fewer once they hold ``batch_chars``
        characters, are segmented together by :meth:`segment_many`, so memory is
        bounded by the batch, not by the corpus.  A record's id is in
        ``result.meta["document"]``.  ``options`` and ``overrides`` are :meth:`segment`'s.

        ``errors="raise"`` (default) raises a document's error when its turn
        comes; ``errors="yield"`` yields a :class:`DocumentError` in its place and
        goes on with the rest.  Bad arguments raise here, not at the first ``next()``.
        """
        batches = self.iter_segment_batches(items, options, text_field=text_field, id_field=id_field,
                                            batch_docs=batch_docs, batch_chars=batch_chars,
                                            errors=errors, progress=progress, **overrides)
        return (result for batch in batches for result in batch)

    def iter_segment_batches(self, items: Iterable[Any], options: SegmentOptions | Mapping[str, Any] | None = None,
                             *, text_field: str = "text", id_field: str = "id",
                             batch_docs: int = DEFAULT_BATCH_DOCS, batch_chars: int = DEFAULT_BATCH_CHARS,
                             errors: str = "raise", progress=None, **overrides: Any
                             ) -> Iterator[list[Segmentation | DocumentError]]:
        """:meth:`iter_segment`, one list per batch (a writer can make each batch durable at once)."""
        # checked now, not at the first next(): the caller learns of a slip where it made it
        check_errors(errors)
        opts = SegmentOptions.of(options, **overrides)
        _check_progress(progress)
        check_batch_sizes(batch_docs, batch_chars)
        if not isinstance(text_field, str) or not isinstance(id_field, str):
            # else every record would fail alike ("field '5' is missing"), one by one
            raise HeadsegError(f"text_field and id_field must be strings (got {text_field!r}, {id_field!r})")
        items = iterable_of(items, "items must be an iterable of texts, records or (id, text) pairs", lazy=True)

        def segment_many(texts: Sequence[str]) -> list[Segmentation]:
            return self.segment_many(texts, options=opts, progress=progress)

        return (done for batch in iter_batches(items, text_field, id_field, batch_docs, batch_chars)
                for done in checked(segment_batch(segment_many, batch), errors))


def _check_progress(progress: Any) -> None:
    """``progress`` is None, a bool, or a bar with ``update`` (tqdm's interface)."""
    if progress is not None and not isinstance(progress, bool) and not hasattr(progress, "update"):
        raise HeadsegError(f"progress must be True, False, None or a progress bar (got {type(progress).__name__})")


def _note_capped(results: list[Segmentation], segments: int) -> None:
    """Record ``segments`` in each result's meta, and warn where a text has fewer units than that.

    A segment is at least one unit: more segments than units cannot be had.
    Said on stderr (the "headseg" logger) and in meta, never silently.
    """
    for i, r in enumerate(results):
        r.meta["segments_requested"] = int(segments)
        r.meta["segments_capped"] = len(r) < segments
        if len(r) < segments:
            name = f"document {i + 1}: " if len(results) > 1 else ""
            logging.getLogger("headseg").warning(
                "warning: %s%d segments requested, but the text has only %d unit(s): "
                "returning %d segment(s)", name, segments, r.meta.get("units", len(r)), len(r))
