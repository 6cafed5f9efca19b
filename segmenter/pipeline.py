"""The segmentation pipeline: text in, segments with exact offsets out, over any capture backend.

Pipeline (data flows one way; each step has its own module)::

    text ─ units (sentence-like spans; units.py), short lines of code and markup in groups (verbatim.py),
           cut to the hard limits (limits.py)
         ─ one isolated window per unit ─ the topic heads' context vectors, pooled per unit (encode.py)
         ─ the level's strategy (levels.py): for topics, line groups and headings (lines.py), the
           structural prior (cuts.py) and the optimal partition under the size limits (topics.py,
           search.py)
         ─ Segmentation (exact character offsets; analysis/segments.py)

Each unit is encoded on its own so that no context leaks across a candidate
boundary.  Units are compared across the whole document, not inside one model
window, and the boundaries come from a global optimum, not from local depth
scores.  :class:`Pipeline` depends on a contract, not on an engine: a
:class:`~headseg.segmenter.encode.UnitEncoder` (the tokenizer, one
:class:`~headseg.analysis.capture.CaptureBackend`, the heads it reads, the
batch sizes).  Choosing and building the engine is the front door's
(:class:`headseg.Segmenter`).  Options are one
:class:`~headseg.segmenter.options.SegmentOptions`; streaming over a corpus is
in stream.py.
"""

from __future__ import annotations

import copy
import logging
from types import MappingProxyType
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from headseg.analysis.capture import CaptureBackend, HeadActivations
from headseg.analysis.errors import HeadsegError, InputError, shown
from headseg.analysis.profile import HeadProfile
from headseg.analysis.segments import Segmentation
from headseg.analysis.text import TokenizedText, Window, tokenize, window_width

from .blocks import split_at_blocks
from .document import Document, TokenCount, unit_token_counts
from .encode import UnitEncoder
from .evidence import evidence_for
from .levels import LevelContext, get_level, whitespace_result
from .limits import split_oversized
from .options import SegmentOptions, check_splitter
from .speakers import content_spans
from .structure import SourceText, resolve_structure
from .stream import (DEFAULT_BATCH_CHARS, DEFAULT_BATCH_DOCS, DocumentError, check_batch_sizes, check_errors, checked,
                     iter_batches, iterable_of, segment_batch)
from .topics import TopicParams, document_boundaries
from .runs import group_heading_runs, group_tiny_runs
from .units import UnitParams, find_units
from .verbatim import group_verbatim_lines, share_fits

__all__ = ["Pipeline", "DocumentError", "TopicParams", "UnitParams", "SegmentOptions", "DEFAULT_BATCH_DOCS",
           "DEFAULT_BATCH_CHARS", "UNIT_MODES"]

#: how units are found: sentence rules with the heads' detector for long unpunctuated stretches
#: (auto), rules only, or the heads' detector everywhere (:func:`~headseg.segmenter.units.find_units`)
UNIT_MODES = ("auto", "rules", "heads")

SentenceSplitter = Callable[[str], Sequence[tuple[int, int]]]
#: what the pipeline segments: a text, a text with its source's structure hint, or a text's tokens
TextInput = str | SourceText | TokenizedText


class Pipeline:
    """Segment text into the units or segments of a registered level, over one :class:`UnitEncoder`.

    ``profile``: the head profile the encoder reads (its hash goes into each
    result's ``meta``); ``params``/``unit_params``: the topic search's and the
    unit detector's knobs; ``unit_mode``: one of :data:`UNIT_MODES`;
    ``sentence_splitter``: a callable ``text -> [(start, end), ...]`` (pysbd,
    spaCy...) for the units instead of the sentence rules.  The knobs are
    plain attributes a caller may change between calls.
    """

    def __init__(self, encoder: UnitEncoder, profile: HeadProfile, params: TopicParams | None = None,
                 unit_params: UnitParams | None = None, unit_mode: str = "auto",
                 sentence_splitter: SentenceSplitter | None = None):
        if not isinstance(encoder, UnitEncoder):
            raise HeadsegError(f"encoder must be a UnitEncoder (got {type(encoder).__name__})")
        check_knobs(params, unit_params, unit_mode, sentence_splitter)
        self._encoder = encoder
        self.profile = profile
        # the likeness term is the default model's scale: other models' profiles test z alone
        self.params = params or TopicParams(evidence=evidence_for(profile))
        self.unit_params = unit_params or UnitParams()
        self.unit_mode = unit_mode
        self.sentence_splitter = check_splitter(sentence_splitter)

    @property
    def encoder(self) -> UnitEncoder:
        """The :class:`UnitEncoder` the pipeline runs on."""
        return self._encoder

    @property
    def backend(self) -> CaptureBackend:
        """The capture backend of the encoder."""
        return self._encoder.backend

    @property
    def batch_size(self) -> int:
        """Windows per capture call."""
        return self._encoder.batch_size

    @property
    def window_tokens(self) -> int:
        """The model window, in tokens (special tokens included)."""
        return self._encoder.window_tokens

    @property
    def topic_heads(self) -> tuple:
        """The heads the unit vectors read, in capture order."""
        return self._encoder.topic_heads

    @property
    def topic_weights(self) -> np.ndarray:
        """Their normalised weights ``[N]``."""
        return self._encoder.topic_weights

    def with_encoder(self, encoder: UnitEncoder) -> "Pipeline":
        """A pipeline like this one (same knobs, as they are now) over ``encoder``."""
        if not isinstance(encoder, UnitEncoder):
            raise HeadsegError(f"encoder must be a UnitEncoder (got {type(encoder).__name__})")
        other = copy.copy(self)
        other._encoder = encoder
        return other

    def with_backend(self, backend: CaptureBackend) -> "Pipeline":
        """A pipeline like this one whose model calls go to ``backend`` (a batcher's, say)."""
        return self.with_encoder(self._encoder.with_backend(backend))

    def units(self, text: str, doc: TokenizedText | None = None, mode: str | None = None,
              sentence_splitter: SentenceSplitter | None = None, progress: bool = False) -> list[tuple[int, int]]:
        """Sentence-like unit spans tiling ``text`` (see :func:`segmenter.units.find_units`).

        ``sentence_splitter`` overrides the pipeline's; ``progress=True`` shows the unit detector's
        bar on stderr (on a terminal) for long unpunctuated text.
        """
        splitter = self.sentence_splitter if sentence_splitter is None else check_splitter(sentence_splitter)
        return find_units(text, self._encoder, doc=doc, params=self.unit_params, mode=mode or self.unit_mode,
                          sentence_splitter=splitter, progress=progress)

    def capture(self, windows: Sequence[Window], heads=None, hidden: bool = False) -> HeadActivations:
        """Context vectors of ``heads`` (default: the unit-detection heads) for a batch of windows;
        ``hidden=True`` adds the model's last hidden states."""
        return self._encoder.capture(windows, heads=heads, hidden=hidden)

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
        return self._encoder.unit_vectors([(doc, content_spans(doc.text, units)) for doc, units in items],
                                          progress=progress)

    def segment(self, text: str, options: SegmentOptions | Mapping[str, Any] | None = None, *,
                progress=None, **overrides: Any) -> Segmentation:
        """Segment ``text`` with ``options`` (:class:`SegmentOptions`, or its fields as keywords).

        ``level="unit"``: sentence-like units.  ``level="topic"`` (default): coherent
        groups of units; their number is chosen automatically unless ``segments``
        is given.  ``max_chars`` / ``max_tokens`` are hard limits never exceeded
        (a unit larger than the limit is itself split); ``min_chars`` is honoured
        whenever the limits allow it.  The invariant
        ``"".join(s.text for s in result) == text`` always holds.
        ``progress=True`` shows progress bars on stderr (when it is a terminal).

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
        pipeline's); its spans must be in order and leave only whitespace out.
        """
        return self.segment_many([text], options, progress=progress, **overrides)[0]

    def __call__(self, text: str, options: SegmentOptions | Mapping[str, Any] | None = None,
                 **kwargs: Any) -> Segmentation:
        """Same as :meth:`segment`."""
        return self.segment(text, options, **kwargs)

    def segment_many(self, texts: Sequence[TextInput], options: SegmentOptions | Mapping[str, Any] | None = None,
                     *, progress=None, unit_progress: bool = False, **overrides: Any) -> list[Segmentation]:
        """:meth:`segment` for several documents, batching the model across them; order is kept.

        Each item is a text, a :class:`~headseg.segmenter.structure.SourceText` (a text with its source's
        structure hint), or a text's tokens from :meth:`tokenize` (a caller that counted them first, like
        the service's token bound): those are not tokenized again.
        ``progress``: True, False/None, or an open bar to update (windows encoded);
        ``unit_progress=True``: the unit detector's bar alone, for a caller that shows
        a bar of its own per document (the command line).
        """
        opts = SegmentOptions.of(options, **overrides)
        texts = iterable_of(texts, "texts must be a list of str")
        _check_progress(progress)
        level = get_level(opts.level)
        docs = [self.document(text, opts, progress=bool(progress) or bool(unit_progress)) for text in texts]
        request = opts.request()
        context = LevelContext(self.params, self.profile.hash(),
                               MappingProxyType({name: getattr(opts, name) for name in sorted(level.options)}))
        results: list[Segmentation | None] = [None if d.text.strip() else whitespace_result(d, opts.level)
                                              for d in docs]
        todo = [i for i, r in enumerate(results) if r is None]
        vectors = (self.unit_vectors_many([(docs[i].tokens, docs[i].units) for i in todo], progress=progress)
                   if todo and level.search else [None] * len(todo))
        for i, x in zip(todo, vectors):
            results[i] = level.strategy(docs[i], x, request, context)
        if opts.segments is not None and level.takes("segments"):
            _note_capped(results, opts.segments)
        return results

    def tokenize(self, text: str) -> TokenizedText:
        """``text``'s tokens as :meth:`document` makes them (the encoder's tokenizer, no special tokens).

        A caller that needs them before segmenting (to count them) hands them to :meth:`segment_many`
        or :meth:`document` in place of the text, and the text is tokenized once."""
        return tokenize(text, self._encoder.tokenizer)

    def document(self, text: TextInput, options: SegmentOptions | Mapping[str, Any] | None = None,
                 progress: bool = False) -> Document:
        """The :class:`~headseg.segmenter.document.Document` of ``text``: tokenized once, its units found
        (none for whitespace only) and cut to ``options``' hard limits, its features derived once;
        every level reads it (``options``' structure, counter, splitter and limits apply).  ``text`` may
        be its tokens from :meth:`tokenize`, which are then read as they are, or a
        :class:`~headseg.segmenter.structure.SourceText` (its hint read under ``structure="auto"``)."""
        tokens = hint = None
        if isinstance(text, TokenizedText):
            tokens, text = text, text.text
        elif isinstance(text, SourceText):
            text, hint = text.text, text.hint
        if not isinstance(text, str):
            raise InputError(f"expected text as str, got {type(text).__name__}")
        opts = SegmentOptions.of(options)
        structure = resolve_structure(text, opts.structure, hint)
        if tokens is None:
            tokens = self.tokenize(text)
        count = TokenCount(text, tokens, opts.counter)
        if not text.strip():
            # Nothing to compare: only the hard limits can cut whitespace.
            units = [(0, len(text))] if text else []
        else:
            splitter = self.sentence_splitter if opts.sentence_splitter is None else opts.sentence_splitter
            units = self.units(text, doc=tokens, sentence_splitter=splitter, progress=progress)
            if structure is not None:
                units = split_at_blocks(text, units, structure)  # no unit straddles a block
                # ...but a long run of short headings is read in groups, as tiny units are
                units = group_heading_runs(text, units, unit_token_counts(tokens, units),
                                           [(h.start, h.end) for h in structure.headings])
                # ...and the lines of code and markup too, each group within a share of the hard limits
                units = group_verbatim_lines(text, units, unit_token_counts(tokens, units),
                                             structure, window_width(self._encoder.tokenizer, self.window_tokens),
                                             share_fits(count, opts.max_chars, opts.max_tokens))
            units = group_tiny_runs(units, unit_token_counts(tokens, units),
                                    structure.breaks() if structure is not None else ())
        units = split_oversized(text, tokens, units, opts.max_chars, opts.max_tokens, count)
        return Document.build(text, tokens, units, structure, count)

    def topic_boundaries(self, x: np.ndarray, doc: Document,
                         options: SegmentOptions | Mapping[str, Any] | None = None) -> tuple[list[int], list[float]]:
        """Unit indices that open topic segments 2..m of ``doc`` (:meth:`document`), and their strengths.

        ``x [U, D]``: the unit vectors of ``doc``'s units; the search's preparation and the
        search are :func:`~headseg.segmenter.topics.document_boundaries`'.
        """
        found = document_boundaries(doc, x, SegmentOptions.of(options).request(), self.params)
        return found.cuts, found.scores

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
                             errors: str = "raise", progress=None, unit_progress: bool = False, **overrides: Any
                             ) -> Iterator[list[Segmentation | DocumentError]]:
        """:meth:`iter_segment`, one list per batch (a writer can make each batch durable at once);
        ``unit_progress`` as in :meth:`segment_many`."""
        # checked now, not at the first next(): the caller learns of a slip where it made it
        check_errors(errors)
        opts = SegmentOptions.of(options, **overrides)
        _check_progress(progress)
        check_batch_sizes(batch_docs, batch_chars)
        if not isinstance(text_field, str) or not isinstance(id_field, str):
            # else every record would fail alike ("field '5' is missing"), one by one
            raise HeadsegError(f"text_field and id_field must be strings (got {shown(text_field)}, {shown(id_field)})")
        items = iterable_of(items, "items must be an iterable of texts, records or (id, text) pairs", lazy=True)

        def segment_many(texts: Sequence[str]) -> list[Segmentation]:
            return self.segment_many(texts, options=opts, progress=progress, unit_progress=unit_progress)

        return (done for batch in iter_batches(items, text_field, id_field, batch_docs, batch_chars)
                for done in checked(segment_batch(segment_many, batch), errors))


def check_knobs(params: Any, unit_params: Any, unit_mode: Any, sentence_splitter: Any) -> None:
    """The pipeline's knobs are of the right kinds (raises :class:`HeadsegError`); a caller that builds
    an engine first checks them before it does."""
    if unit_mode not in UNIT_MODES:
        raise HeadsegError(f"unit_mode must be {', '.join(UNIT_MODES[:-1])} or {UNIT_MODES[-1]} "
                           f"(got '{unit_mode}')")
    if params is not None and not isinstance(params, TopicParams):
        raise HeadsegError(f"params must be a TopicParams (got {type(params).__name__})")
    if unit_params is not None and not isinstance(unit_params, UnitParams):
        raise HeadsegError(f"unit_params must be a UnitParams (got {type(unit_params).__name__})")
    check_splitter(sentence_splitter)


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
