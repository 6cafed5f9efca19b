"""The segmenter's Python API.

Pipeline (data flows one way)::

    text ─ units (sentence-like spans) ─ one isolated window per unit
         ─ selected heads' context vectors Z_h, pooled per unit
         ─ per-head normalised unit vectors, weighted by the head profile
         ─ optimal partition with a per-segment penalty (or exactly N segments)

Each unit is encoded on its own so that no context leaks across a candidate
boundary (inside a shared window the heads blend neighbouring sentences, which
blurs exactly the contrast a boundary needs).  Units are compared across the
whole document, not inside one model window, and the boundaries come from a
global optimum, not from local depth scores.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import regex

from headseg.analysis.capture import HeadActivations, iter_batches
from headseg.analysis.errors import HeadsegError, InputError, ProfileError, first_line
from headseg.analysis.model import LoadedModel, load_model
from headseg.analysis.profile import HeadProfile, resolve_profile
from headseg.analysis.progress import progress_bar
from headseg.analysis.segments import Segment, Segmentation
from headseg.analysis.text import TokenizedText, Window, make_window, tokenize, window_width

from .options import LEVELS, SegmentOptions, validate_options
from .search import SegmentCost, boundary_strength, partition_k, partition_penalised
from .tokens import TokenCounterSpec, resolve_token_counter
from .units import UnitParams, find_units, looks_like_heading

#: :meth:`Segmenter.iter_segment` batches: at most this many documents ...
DEFAULT_BATCH_DOCS = 32
#: ... and about this many characters (a longer document is a batch of its own)
DEFAULT_BATCH_CHARS = 1_000_000


def check_options(level: str = "topic", segments: int | None = None, min_chars: int | None = None,
                  max_chars: int | None = None, max_tokens: int | None = None,
                  penalty: float | None = None) -> None:
    """Validate :meth:`Segmenter.segment`'s options without a model (raises :class:`InputError`)."""
    validate_options(dict(level=level, segments=segments, min_chars=min_chars, max_chars=max_chars,
                          max_tokens=max_tokens, penalty=penalty))


@dataclass(frozen=True)
class DocumentError:
    """A document of :meth:`Segmenter.iter_segment` that could not be segmented (``errors="yield"``)."""

    #: position in the input (0-based)
    index: int
    #: the record's id, or None for a plain text without one
    document: str | None
    #: one line saying why
    reason: str
    #: the exception itself
    error: BaseException | None = None


@dataclass
class TopicParams:
    """Knobs of the topic search, with the defaults used everywhere (documented in docs/segmenter.md)."""

    #: a boundary must save ``σ² · (1 + penalty · R)`` of scatter, where ``σ²`` is the
    #: local noise (half the mean squared distance between adjacent unit vectors)
    #: and ``R`` the local correlation length: how many units on, on average,
    #: similarity to a unit persists (the autocorrelation of the unit vectors,
    #: summed up to its first non-positive lag, over its first lag).  The best
    #: split inside a segment, true or not, saves more the longer the segment, so
    #: the bar rises with the segment length the document itself shows; nothing
    #: here grows with the document's length (docs/segmenter.md has the sweep).
    penalty: float = 0.3
    #: the bar is never below ``floor · σ²``: one noisy unit (a short dialogue
    #: turn) must not open a segment of its own
    floor: float = 1.3
    #: ``σ²`` and ``R`` are measured on the units within this many units of a
    #: candidate boundary, so a long document or a concatenation keeps each
    #: part's own scale
    window: int = 400
    #: longest lag of the autocorrelation, in units
    max_lag: int = 100
    #: a unit weighs ``min(1, tokens / weight_tokens)`` in the segment scatter: a
    #: unit of a few tokens has a noisy vector (0 = every unit weighs the same)
    weight_tokens: float = 8.0
    #: longest segment considered, in units (bounds the search to O(n·max_units))
    max_units: int = 400
    #: subtract the document mean before comparing units (removes the shared
    #: "this is English prose" direction that makes every cosine positive)
    center: bool = True
    #: rescale every centred vector to length 1 again (off: a generic unit, "Yes
    #: please.", lies near the document mean, and renormalising would blow its
    #: small remainder up into a full-length random direction)
    renormalize: bool = False
    #: consecutive units on one line (no line break between them) are compared as
    #: one, their vectors averaged by tokens, while together they hold at most
    #: this many tokens: the short sentences of a dialogue turn say little alone
    #: (0 = every unit on its own; the segments still start at unit starts)
    line_tokens: int = 32
    #: a heading (a unit alone on its line, of at most this many tokens, that
    #: reads as a label or a title: "2.", "B.", "Introduction", "## Results",
    #: "3.1 Methods"; :func:`looks_like_heading`) is compared together with the
    #: line after it, so it opens the next segment instead of closing the
    #: previous one: alone, its few tokens give a noisy vector that the search
    #: hands to either side (0 = off)
    heading_tokens: int = 8
    #: a segment of ``T`` tokens pays ``β · (1 + short_surcharge · (1 − T / short_tokens))``
    #: when ``T < short_tokens``: a few tokens make a noisy mean, so a short
    #: segment needs more evidence (0 = no surcharge)
    short_surcharge: float = 0.5
    short_tokens: float = 64.0


def unit_token_ranges(doc: TokenizedText, units: Sequence[tuple[int, int]]) -> np.ndarray:
    """Token range ``[U, 2]`` of each unit in the document's token stream.

    A token belongs to the unit its first character falls in.
    """
    if not len(units):
        return np.zeros((0, 2), np.int64)
    tok_start = doc.offsets[:, 0] if len(doc) else np.zeros(0, np.int64)
    first = np.searchsorted(tok_start, np.asarray([a for a, _ in units], dtype=np.int64), side="left")
    return np.stack([first, np.append(first[1:], len(doc))], axis=1)


def unit_windows(doc: TokenizedText, units: Sequence[tuple[int, int]], tokenizer, max_tokens: int
                 ) -> tuple[list[Window], np.ndarray]:
    """One window per unit (several for a unit longer than ``max_tokens``).

    Returns the windows and ``owner [W]``, the unit of each window.
    """
    width = window_width(tokenizer, max_tokens)
    windows, owner = [], []
    for u, (a, b) in enumerate(unit_token_ranges(doc, units)):
        # a unit of whitespace only has no tokens: the caller handles it
        for s in range(a, b, width):
            windows.append(make_window(doc, int(s), int(min(s + width, b)), tokenizer, index=len(windows),
                                       sentence_id=u, with_tokens=False))
            owner.append(u)
    return windows, np.asarray(owner, dtype=np.int64)


def pool_units(acts_iter, n_units: int, weights: np.ndarray) -> np.ndarray:
    """Mean-pool each head's context vectors over a unit's tokens, normalise per head, weight, concatenate.

    ``acts_iter`` yields ``(HeadActivations, owners [B], content_masks [B, T])``.
    Returns ``[n_units, N·d]``; a unit without tokens gets a zero vector.
    """
    sums = None
    counts = np.zeros(n_units)
    for acts, owners, content in acts_iter:
        z = acts.z  # [B, N, T, d]
        if sums is None:
            sums = np.zeros((n_units, z.shape[1], z.shape[3]), dtype=np.float64)
        pooled = np.einsum("bntd,bt->bnd", z.astype(np.float64), content.astype(np.float64))
        np.add.at(sums, owners, pooled)
        np.add.at(counts, owners, content.sum(axis=1))
    if sums is None:
        return np.zeros((n_units, 0))
    means = sums / np.maximum(counts, 1)[:, None, None]
    norms = np.linalg.norm(means, axis=-1, keepdims=True)
    unit = np.where(norms > 0, means / np.maximum(norms, 1e-12), 0.0)
    unit = unit * np.sqrt(weights)[None, :, None]
    return unit.reshape(n_units, -1)


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
        if not isinstance(backend, str) and not hasattr(backend, "capture"):
            raise HeadsegError(f"backend must be 'auto', 'onnx', 'torch' or a capture backend (got {backend!r})")
        if backend not in ("auto", "onnx", "torch") and isinstance(backend, str):
            raise HeadsegError(f"unknown backend '{backend}' (use auto, onnx or torch)")
        if unit_mode not in ("auto", "rules", "heads"):
            raise HeadsegError(f"unit_mode must be auto, rules or heads (got '{unit_mode}')")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise HeadsegError("batch_size must be a positive integer")
        if isinstance(model, LoadedModel):
            self.loaded = model
        else:
            # The ONNX engine needs no torch weights: load them only for the torch backend.
            self.loaded = load_model(model, weights=backend == "torch")
        if artifact is not None and profile is None:
            from headseg.export.backend import artifact_profile

            profile = artifact_profile(artifact, self.loaded)
        self.profile = resolve_profile(self.loaded.info, profile)
        if hasattr(backend, "capture"):
            self.backend = backend
        else:
            from headseg.export.backend import make_backend

            self.backend = make_backend(self.loaded, self.profile, backend=backend, device=device, artifact=artifact,
                                        precision=precision, threads=threads, quiet=quiet)
        self.batch_size = int(batch_size)
        self.max_tokens = int(max_tokens)
        self.params = params or TopicParams()
        self.unit_params = unit_params or UnitParams()
        self.unit_mode = unit_mode
        self.sentence_splitter = _check_splitter(sentence_splitter)
        if not 8 <= self.max_tokens <= self.loaded.info.max_positions:
            raise HeadsegError(f"max_tokens must be between 8 and {self.loaded.info.max_positions}")
        info = self.loaded.info
        # Unit detection reads the profile's separator-focused heads; topic
        # similarity reads the topic heads (default: the whole last layer, which
        # compares sentences best, and the first layer at a quarter of the weight,
        # which keeps their words: docs/segmenter.md).
        self.heads, self.weights = _sorted_selection(self.profile.heads, self.profile.weights)
        self.topic_heads, self.topic_weights = _sorted_selection(
            *self.profile.topic_selection(info.num_layers, info.num_heads))

    def __repr__(self) -> str:
        return (f"Segmenter(model={self.loaded.info.name!r}, backend={self.backend.name!r}, "
                f"device={getattr(self.backend, 'device', '?')!r}, profile={self.profile.hash()})")

    # ------------------------------------------------------------------ units
    def units(self, text: str, doc: TokenizedText | None = None, mode: str | None = None,
              sentence_splitter: Callable[[str], Sequence[tuple[int, int]]] | None = None) -> list[tuple[int, int]]:
        """Sentence-like unit spans tiling ``text`` (see :func:`segmenter.units.find_units`).

        ``sentence_splitter`` overrides the one given to the constructor.
        """
        splitter = self.sentence_splitter if sentence_splitter is None else _check_splitter(sentence_splitter)
        return find_units(text, self, doc=doc, params=self.unit_params, mode=mode or self.unit_mode,
                          sentence_splitter=splitter)

    # --------------------------------------------------------------- vectors
    def capture(self, windows: Sequence[Window], heads=None) -> HeadActivations:
        """Context vectors of ``heads`` (default: the unit-detection heads) for a batch of windows."""
        return self.backend.capture(windows, heads=self.heads if heads is None else heads,
                                    attention=False, norms=False)

    def unit_vectors(self, doc: TokenizedText, units: Sequence[tuple[int, int]], progress=None) -> np.ndarray:
        """``[U, N·d]`` weighted, per-head-normalised unit vectors (each unit encoded alone)."""
        return self._vectors_many([(doc, units)], progress=progress)[0]

    def _vectors_many(self, items, progress=None) -> list[np.ndarray]:
        """Unit vectors for several documents, encoded in shared batches (less padding, fewer calls)."""
        windows, owners, bounds = [], [], [0]
        for doc, units in items:
            w, o = unit_windows(doc, units, self.loaded.tokenizer, self.max_tokens)
            windows.extend(w)
            owners.append(o + bounds[-1])
            bounds.append(bounds[-1] + len(units))
        owner = np.concatenate(owners) if owners else np.zeros(0, np.int64)
        index = {id(w): i for i, w in enumerate(windows)}
        own_bar = progress is True
        bar = progress_bar(total=len(windows), desc="encoding units", unit="unit") if own_bar else progress or None

        def batches():
            for batch in iter_batches(windows, self.batch_size):
                acts = self.capture(batch, heads=self.topic_heads)
                batch_owner = owner[[index[id(w)] for w in batch]]
                content = acts.attention_mask.copy()
                for b, w in enumerate(batch):
                    content[b, : len(w)] &= ~w.special
                if bar is not None:
                    bar.update(len(batch))
                yield acts, batch_owner, content

        try:
            x = pool_units(batches(), bounds[-1], self.topic_weights)
        finally:
            if own_bar:
                bar.close()
        return [x[bounds[i]: bounds[i + 1]] for i in range(len(items))]

    # ---------------------------------------------------------------- topics
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

    def __call__(self, text: str, **kwargs) -> Segmentation:
        """Same as :meth:`segment`."""
        return self.segment(text, **kwargs)

    def segment_many(self, texts: Sequence[str], options: SegmentOptions | Mapping[str, Any] | None = None, *,
                     progress=None, **overrides: Any) -> list[Segmentation]:
        """:meth:`segment` for several documents, batching the model across them; order is kept."""
        opts = SegmentOptions.of(options, **overrides)
        level, segments, min_chars, max_chars, max_tokens, penalty = (
            opts.level, opts.segments, opts.min_chars, opts.max_chars, opts.max_tokens, opts.penalty)
        counter = opts.counter
        splitter = self.sentence_splitter if opts.sentence_splitter is None else opts.sentence_splitter
        results: list[Segmentation | None] = [None] * len(texts)
        work = []
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise InputError(f"expected text as str, got {type(text).__name__}")
            doc = tokenize(text, self.loaded.tokenizer)
            measure = TokenMeasure(text, doc, counter)
            if not text.strip():
                # Nothing to compare: only the hard limits can cut whitespace.
                spans = _split_oversized(text, doc, [(0, len(text))] if text else [], max_chars, max_tokens,
                                         measure)
                results[i] = measure.counted(Segmentation.from_boundaries(
                    text, [a for a, _ in spans[1:]], [0.0] * (len(spans) - 1), level=level,
                    meta={"units": len(spans)}))
                continue
            units = _split_oversized(text, doc, self.units(text, doc=doc, sentence_splitter=splitter),
                                     max_chars, max_tokens, measure)
            if level == "unit":
                results[i] = measure.counted(Segmentation.from_boundaries(
                    text, [a for a, _ in units[1:]], [1.0] * (len(units) - 1), level="unit",
                    meta={"units": len(units)}))
            else:
                work.append((i, doc, units, measure))
        if work:
            vectors = self._vectors_many([(doc, units) for _, doc, units, _ in work], progress=progress)
            for (i, doc, units, measure), x in zip(work, vectors):
                text = texts[i]
                cuts, scores = self._topic_cuts(x, text, doc, units, segments, min_chars, max_chars,
                                                max_tokens, penalty, measure)
                results[i] = measure.counted(Segmentation.from_boundaries(
                    text, [units[c][0] for c in cuts], scores, level="topic",
                    meta={"units": len(units), "profile": self.profile.hash()}))
        if segments is not None and level == "topic":
            # A segment is at least one unit: more segments than units cannot be had.
            # Said on stderr (the "headseg" logger) and in meta, never silently.
            for i, r in enumerate(results):
                r.meta["segments_requested"] = int(segments)
                r.meta["segments_capped"] = len(r) < segments
                if len(r) < segments:
                    name = f"document {i + 1}: " if len(results) > 1 else ""
                    logging.getLogger("headseg").warning(
                        "warning: %s%d segments requested, but the text has only %d unit(s): "
                        "returning %d segment(s)", name, segments, r.meta.get("units", len(r)), len(r))
        return results

    # ------------------------------------------------------------- streaming
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
        goes on with the rest.
        """
        for batch in self.iter_segment_batches(items, options, text_field=text_field, id_field=id_field,
                                               batch_docs=batch_docs, batch_chars=batch_chars,
                                               errors=errors, progress=progress, **overrides):
            yield from batch

    def iter_segment_batches(self, items: Iterable[Any], options: SegmentOptions | Mapping[str, Any] | None = None,
                             *, text_field: str = "text", id_field: str = "id",
                             batch_docs: int = DEFAULT_BATCH_DOCS, batch_chars: int = DEFAULT_BATCH_CHARS,
                             errors: str = "raise", progress=None, **overrides: Any
                             ) -> Iterator[list[Segmentation | DocumentError]]:
        """:meth:`iter_segment`, one list per batch (a writer can make each batch durable at once)."""
        if errors not in ("raise", "yield"):
            raise HeadsegError(f"errors must be 'raise' or 'yield' (got '{errors}')")
        if batch_docs < 1 or batch_chars < 1:
            raise HeadsegError("batch_docs and batch_chars must be at least 1")
        opts = SegmentOptions.of(options, **overrides)
        batch: list[tuple[int, str | None, Any]] = []
        size = 0
        for index, item in enumerate(items):
            doc_id, text = _document(item, text_field, id_field)
            batch.append((index, doc_id, text))
            size += len(text) if isinstance(text, str) else 0
            if len(batch) >= batch_docs or size >= batch_chars:
                yield from _checked(self._segment_batch(batch, opts, progress), errors)
                batch, size = [], 0
        if batch:
            yield from _checked(self._segment_batch(batch, opts, progress), errors)

    def _segment_batch(self, batch, opts: SegmentOptions, progress) -> list[Segmentation | DocumentError]:
        results: list[Segmentation | DocumentError | None] = [None] * len(batch)
        good = [i for i, (_, _, text) in enumerate(batch) if isinstance(text, str)]
        for i, (index, doc_id, text) in enumerate(batch):
            if not isinstance(text, str):
                results[i] = DocumentError(index, doc_id, str(text), text)
        try:
            done = self.segment_many([batch[i][2] for i in good], options=opts, progress=progress)
        except Exception:  # noqa: BLE001 - isolate the failing document(s) below
            done = None
        if done is None:
            # One document spoilt the batch: run them one by one so that only it fails.
            done = []
            for i in good:
                index, doc_id, text = batch[i]
                try:
                    done.append(self.segment_many([text], options=opts, progress=progress)[0])
                except Exception as exc:  # noqa: BLE001 - reported per document, the rest go on
                    done.append(DocumentError(index, doc_id, _reason(exc), exc))
        for i, res in zip(good, done):
            if isinstance(res, Segmentation) and batch[i][1] is not None:
                res.meta["document"] = batch[i][1]
            results[i] = res
        return results  # type: ignore[return-value]

    def _topic_cuts(self, x, text, doc, units, segments, min_chars, max_chars, max_tokens, penalty,
                    measure: "TokenMeasure | None" = None):
        n = len(units)
        if n == 1:
            return [], []
        measure = measure or TokenMeasure(text, doc, None)
        sizes, limit, lower, token_limit = None, None, None, None
        if max_chars is not None or max_tokens is not None or min_chars is not None:
            # The search runs on characters (max_chars, min_chars) and forbids spans
            # over the token limit on the side, so min_chars stays in characters.
            chars = np.asarray([b - a for a, b in units], dtype=np.float64)
            sizes, limit = chars, None if max_chars is None else float(max_chars)
            lower = None if min_chars is None else float(min_chars)
            if max_tokens is not None:
                toks, token_limit = measure.additive_sizes(units, max_tokens)
                sizes = np.stack([chars, toks], axis=1)
        r = unit_token_ranges(doc, units)
        tokens = r[:, 1] - r[:, 0]
        first = None
        if self.params.line_tokens or self.params.heading_tokens:
            # Short units on one line (a dialogue turn's sentences) are compared as one, and
            # a heading with the line after it; a group never outgrows a size limit, so
            # every limit stays satisfiable.
            limits = () if sizes is None else (limit,) if sizes.ndim == 1 else (limit, token_limit)
            same_line = starts_same_line(text, units)
            headings = heading_units(text, units, tokens, self.params.heading_tokens, same_line=same_line)
            groups = line_groups(same_line, tokens, self.params.line_tokens, sizes, limits, headings=headings)
            starts = group_starts(groups)
            ends = np.append(starts[1:], n)
            if max_tokens is not None and not measure.exact and not all(
                    measure.span(units[a][0], units[b - 1][1]) <= max_tokens for a, b in zip(starts, ends)):
                groups = np.arange(n)  # a foreign counter's counts do not add up: no groups then
            x, tokens, first = group_units(x, tokens, groups, segments)
            if first is not None:
                bounds = np.append(first, n)
                units = [(units[a][0], units[b - 1][1]) for a, b in zip(bounds[:-1], bounds[1:])]
                if sizes is not None:
                    sizes = np.add.reduceat(sizes, first, axis=0)
        x = prepare_vectors(x, self.params)
        weights = unit_weights(tokens, self.params)
        cost = _make_cost(x, sizes, limit, lower, self.params.max_units, token_limit, weights)
        cuts = search_cuts(cost, x, self.params, segments=segments, penalty=penalty, tokens=tokens)
        if max_tokens is not None and not measure.exact:
            cuts = _repair_cuts(cost, cuts, lambda a, b: measure.span(units[a][0], units[b - 1][1]) <= max_tokens)
        scores = boundary_strength(cost, cuts)
        return (cuts if first is None else [int(first[c]) for c in cuts]), scores


def _checked(results: list, errors: str) -> Iterator[list]:
    """The batch, or with ``errors="raise"`` the results before its first failure and then that error."""
    if errors == "raise":
        for j, res in enumerate(results):
            if isinstance(res, DocumentError):
                if j:
                    yield results[:j]
                raise res.error if isinstance(res.error, Exception) else HeadsegError(res.reason)
    yield results


def _reason(exc: BaseException) -> str:
    """One line for a failed document: the message of a headseg error, else the exception's type and message."""
    msg = first_line(exc, 500)
    return msg if isinstance(exc, HeadsegError) or msg == type(exc).__name__ else f"{type(exc).__name__}: {msg}"


def _document(item: Any, text_field: str, id_field: str) -> tuple[str | None, Any]:
    """``(id, text)`` of one input item; ``text`` is an :class:`InputError` when the item is unusable."""
    if isinstance(item, str):
        return None, item
    if isinstance(item, Exception):
        # a reader's error for this document (e.g. unreadable file) passes through in its place
        return None, item
    if isinstance(item, Mapping):
        doc_id = item.get(id_field)
        doc_id = None if doc_id is None else str(doc_id)
        text = item.get(text_field)
        if not isinstance(text, str):
            what = "missing" if text is None else f"a {type(text).__name__}, not a string"
            return doc_id, InputError(f"field '{text_field}' is {what}")
        return doc_id, text
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], str):
        return (None if item[0] is None else str(item[0])), item[1]
    return None, InputError(f"expected a text, a record or an (id, text) pair, got {type(item).__name__}")


def prepare_vectors(x: np.ndarray, params: TopicParams) -> np.ndarray:
    """The unit vectors the topic search compares: centred on the document mean (renormalised if asked)."""
    if params.center:
        x = x - x.mean(axis=0, keepdims=True)
        if params.renormalize:
            norms = np.linalg.norm(x, axis=1, keepdims=True)
            x = np.where(norms > 0, x / np.maximum(norms, 1e-12), 0.0)
    return x


def unit_weights(tokens, params: TopicParams) -> np.ndarray | None:
    """Weight of each unit in the scatter, ``min(1, tokens / weight_tokens)`` scaled to mean 1 (None: equal)."""
    if not params.weight_tokens:
        return None
    w = np.minimum(1.0, np.maximum(np.asarray(tokens, dtype=np.float64), 1.0) / params.weight_tokens)
    return w / w.mean()


def search_cuts(cost: SegmentCost, x: np.ndarray, params: TopicParams, segments: int | None = None,
                penalty: float | None = None, tokens=None) -> list[int]:
    """Unit indices that open segments 2..m: exactly ``segments`` of them, or the penalised optimum.

    ``tokens [n]`` (the units' token counts) add the short-segment surcharge
    (:class:`TopicParams` ``short_surcharge``) to the penalised search.
    """
    if segments is not None:
        return partition_k(cost, min(segments, cost.n))
    beta = boundary_penalty(x, params, params.penalty if penalty is None else penalty)
    extra = None
    if tokens is not None and params.short_surcharge and params.short_tokens > 0:
        ct = np.concatenate([[0.0], np.cumsum(np.asarray(tokens, dtype=np.float64))])
        rate, full = float(params.short_surcharge), float(params.short_tokens)

        def extra(a: np.ndarray, b: int) -> np.ndarray:
            return beta[a] * rate * np.maximum(0.0, 1.0 - (ct[b] - ct[a]) / full)
    return partition_penalised(cost, beta, extra=extra)


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
    """Token-weighted mean vector, token count and first unit of each group."""
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


def boundary_penalty(x: np.ndarray, params: TopicParams, penalty: float) -> np.ndarray:
    """Penalty of a segment by the unit it starts at ``[n + 1]``: ``σ² · max(1 + penalty · R, floor)``.

    ``σ²`` (local noise) and ``R`` (correlation length) are measured on the units
    within ``params.window`` of the start; see :class:`TopicParams`.
    """
    n = len(x)
    s2, acf = local_statistics(x, params.window, params.max_lag)
    # the autocorrelation up to its first non-positive lag, in units of its first lag
    keep = np.cumprod(acf > 0, axis=1)
    first = acf[:, 0] if acf.shape[1] else np.zeros(n + 1)
    length = np.where(first > 0, (acf * keep).sum(axis=1) / np.maximum(first, 1e-12), 0.0)
    return s2 * np.maximum(1.0 + penalty * length, params.floor)


def local_statistics(x: np.ndarray, window: int, max_lag: int) -> tuple[np.ndarray, np.ndarray]:
    """Local noise ``[n + 1]`` and autocorrelation ``[n + 1, L]`` around each unit boundary.

    Around boundary ``i`` the window is units ``[i − window, i + window)``.  The
    noise is half the mean squared distance between adjacent units there; the
    autocorrelation at lag ``l`` the mean dot product (the cosine, for unit-length
    vectors) of unit pairs ``l`` apart that start there, minus the mean of all
    pairs of the window (centring a
    short document on its mean pushes every cosine down by about ``1/(n − 1)``,
    which a long one does not feel; relative to the window's own average pair
    both read the same).  Prefix sums keep this O(n · L · D).
    """
    n = len(x)
    lags = max(min(max_lag, n - 1), 0)
    pos = np.arange(n + 1)
    lo = np.clip(pos - window, 0, n)
    hi = np.clip(pos + window, 0, n)
    d = x[1:] - x[:-1]
    sq = np.concatenate([[0.0], np.cumsum(np.einsum("ij,ij->i", d, d))])
    a_lo, a_hi = np.minimum(lo, n - 1), np.minimum(hi, n - 1)
    s2 = (sq[a_hi] - sq[a_lo]) / np.maximum(a_hi - a_lo, 1) / 2.0
    s2 = np.maximum(s2, 1e-9)
    acf = np.zeros((n + 1, lags))
    for l in range(1, lags + 1):
        # pairs (j, j + l) with j in [lo, min(hi, n − l))
        c = np.concatenate([[0.0], np.cumsum(np.einsum("ij,ij->i", x[:-l], x[l:]))])
        top = np.minimum(hi, n - l)
        count = np.maximum(top - lo, 0)
        acf[:, l - 1] = np.where(count > 0, (c[np.maximum(top, lo)] - c[lo]) / np.maximum(count, 1), 0.0)
    cx = np.vstack([np.zeros((1, x.shape[1])), np.cumsum(x, axis=0)])
    tot = cx[hi] - cx[lo]
    cq = np.concatenate([[0.0], np.cumsum(np.einsum("ij,ij->i", x, x))])
    m = (hi - lo).astype(np.float64)
    base = (np.einsum("ij,ij->i", tot, tot) - (cq[hi] - cq[lo])) / np.maximum(m * (m - 1), 1.0)
    return s2, acf - base[:, None]


def topic_cuts(x: np.ndarray, params: TopicParams | None = None, segments: int | None = None,
               penalty: float | None = None, unit_tokens=None, lines=None, headings=None) -> list[int]:
    """Topic boundaries (unit indices) of raw unit vectors ``x [n, D]``, without size limits.

    The search :meth:`Segmenter.segment` runs, for vectors computed elsewhere
    (cached for a sweep, say); ``unit_tokens [n]`` gives the unit weights and
    the short-segment surcharge, ``lines [n]`` the line each unit starts on
    (for the line groups; without it, or without tokens, no groups), ``headings [n]``
    which units are headings (:func:`heading_units`; the search cannot then cut
    between a heading and the unit after it).
    """
    params = params or TopicParams()
    if len(x) < 2:
        return []
    x = np.asarray(x, dtype=np.float64)
    first = None
    if unit_tokens is not None and (lines is not None or headings is not None):
        lines = np.arange(len(x)) if lines is None else np.asarray(lines)
        same_line = np.concatenate([[False], lines[1:] == lines[:-1]])
        groups = line_groups(same_line, unit_tokens, params.line_tokens, headings=headings)
        x, unit_tokens, first = group_units(x, unit_tokens, groups, segments)
    x = prepare_vectors(x, params)
    weights = None if unit_tokens is None else unit_weights(unit_tokens, params)
    cost = SegmentCost(x, max_units=params.max_units, weights=weights)
    cuts = search_cuts(cost, x, params, segments=segments, penalty=penalty, tokens=unit_tokens)
    return cuts if first is None else [int(first[c]) for c in cuts]


def _check_splitter(splitter):
    if splitter is not None and not callable(splitter):
        raise HeadsegError("sentence_splitter must be a callable text -> [(start, end), ...]")
    return splitter


class _TwoLimitCost(SegmentCost):
    """Character limit via the base class, plus a token limit on the side."""

    def __init__(self, x, chars, toks, max_chars, max_toks, min_chars, max_units, weights=None):
        super().__init__(x, chars, max_chars, min_chars, max_units, weights)
        self.ct = np.concatenate([[0.0], np.cumsum(toks)])
        self.max_toks = max_toks
        if toks.size and toks.max() > max_toks:
            raise HeadsegError("a single unit is longer than the token limit; split units first")

    def costs_ending_at(self, b):
        a, c = super().costs_ending_at(b)
        ok = self.ct[b] - self.ct[a] <= self.max_toks
        return a[ok], c[ok]


def _sorted_selection(heads, weights) -> tuple[list[tuple[int, int]], np.ndarray]:
    """Heads sorted by (layer, head) as capture() returns them, with normalised weights aligned."""
    w = np.asarray(weights, dtype=np.float64)
    if w.size != len(heads) or np.any(w < 0) or w.sum() <= 0:
        raise ProfileError("head weights must be non-negative, one per head, and not all zero")
    order = sorted(range(len(heads)), key=lambda i: tuple(heads[i]))
    return [tuple(heads[i]) for i in order], (w / w.sum())[order]


def _make_cost(x, sizes, limit, lower, max_units, token_limit, weights=None):
    if sizes is not None and sizes.ndim == 2:
        return _TwoLimitCost(x, sizes[:, 0], sizes[:, 1], limit, float(token_limit), lower, max_units, weights)
    return SegmentCost(x, sizes, limit, lower, max_units, weights)


def _split_oversized(text, doc, units, max_chars, max_tokens, measure: "TokenMeasure | None" = None):
    """Split any unit over a hard limit at whitespace (else anywhere) so every limit is satisfiable.

    Token counts come from ``measure`` (default: the model's tokens in ``doc``).
    Cuts fall on grapheme cluster boundaries (never inside an emoji sequence or
    between a letter and its combining mark), unless one cluster is itself over
    the limit: the limit is hard.
    """
    if max_chars is None and max_tokens is None:
        return units
    measure = measure or TokenMeasure(text, doc, None)
    tok_start = doc.offsets[:, 0] if len(doc) else np.zeros(0, np.int64)
    tok_end = doc.offsets[:, 1] if len(doc) else np.zeros(0, np.int64)
    out = []
    for a, b in units:
        stack = [(a, b)]
        clusters = None
        while stack:
            s, e = stack.pop()
            over_chars = max_chars is not None and e - s > max_chars
            n_tok = measure.span(s, e) if max_tokens is not None and not over_chars else 0
            too_long = over_chars or (max_tokens is not None and n_tok > max_tokens)
            if not too_long:
                out.append((s, e))
                continue
            if e - s <= 1:
                raise HeadsegError(f"max_tokens={max_tokens} cannot be met: {text[s:e]!r} alone counts "
                                   f"{n_tok} tokens")
            if clusters is None:
                clusters = grapheme_starts(text, a, b)  # once per unit, only for units that need a cut
            cut = _best_cut(text, s, e, tok_start, tok_end, clusters)
            stack.append((cut, e))
            stack.append((s, cut))
    return out


class TokenMeasure:
    """Token counts of spans of one document, in the units of its ``max_tokens`` limit.

    Without a counter: the model's tokens of the whole document, a token counted
    in the span its first character falls in, so counts add up exactly over
    concatenation.  With a counter: ``counter(text[s:e])``; such counts need not
    add up (a word cut in two can cost more tokens, or fewer), so the search uses
    an additive estimate and the final segments are checked with the counter.
    """

    def __init__(self, text: str, doc: TokenizedText, counter: Callable[[str], int] | None):
        self.text = text
        self.counter = counter
        self.exact = counter is None
        self.doc = doc
        self._tok_start = doc.offsets[:, 0] if len(doc) else np.zeros(0, np.int64)
        # the same spans are counted by the unit split, the search sizes and the final check
        self._memo: dict[tuple[int, int], int] = {}

    def span(self, s: int, e: int) -> int:
        if self.counter is None:
            return int(np.searchsorted(self._tok_start, e, "left") - np.searchsorted(self._tok_start, s, "left"))
        n = self._memo.get((s, e))
        if n is None:
            n = self._memo[(s, e)] = self.counter(self.text[s:e])
        return n

    def additive_sizes(self, units: Sequence[tuple[int, int]], max_tokens: int) -> tuple[np.ndarray, float]:
        """Per-unit sizes and the limit on their sum for the search.

        A counter's count of the empty string (special tokens it adds to every
        string, say) is charged once per segment, not once per unit: without
        that, ten units would pay for ``[CLS]``/``[SEP]`` ten times.
        """
        if self.counter is None:
            r = unit_token_ranges(self.doc, units)
            return (r[:, 1] - r[:, 0]).astype(np.float64), float(max_tokens)
        overhead = self.counter("")
        sizes = np.asarray([max(self.span(a, b) - overhead, 0) for a, b in units], dtype=np.float64)
        return sizes, float(max_tokens - overhead)

    def counted(self, result: Segmentation) -> Segmentation:
        """``result`` with every segment's ``token_count`` filled in."""
        segs = [replace(s, token_count=self.span(s.start, s.end)) for s in result.segments]
        return Segmentation(text=result.text, segments=segs, level=result.level, meta=result.meta)


def _repair_cuts(cost: SegmentCost, cuts: list[int], fits: Callable[[int, int], bool]) -> list[int]:
    """Cuts (unit indices) such that every span ``[a, b)`` of units ``fits``.

    A span that does not fit is split where the two halves are most coherent
    (least scatter), recursively; single units always fit, since
    :func:`_split_oversized` made them so.
    """
    edges = [0, *cuts, cost.n]
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        stack = [(a, b)]
        while stack:
            s, e = stack.pop()
            if e - s <= 1 or fits(s, e):
                out.append(s)
                continue
            m = min(range(s + 1, e), key=lambda m: cost.cost(s, m) + cost.cost(m, e))
            stack.append((m, e))
            stack.append((s, m))
    return [c for c in out if c > 0]


_GRAPHEME = regex.compile(r"\X")


def grapheme_starts(text: str, start: int = 0, end: int | None = None) -> np.ndarray:
    """Sorted offsets in ``[start, end]`` where a grapheme cluster of ``text[start:end]`` starts, and ``end``."""
    end = len(text) if end is None else end
    lengths = np.fromiter(map(len, _GRAPHEME.findall(text, start, end)), dtype=np.int64)
    return np.concatenate([[start], start + np.cumsum(lengths)]).astype(np.int64)


def _best_cut(text, s, e, tok_start, tok_end, clusters=None):
    """A split point near the middle of ``text[s:e]`` on a grapheme cluster boundary (``clusters``,
    from :func:`grapheme_starts`): after whitespace, else at a token start, else the cluster boundary
    nearest the middle; inside a cluster only when ``text[s:e]`` is one cluster."""
    if clusters is None:
        clusters = grapheme_starts(text, s, e)

    def on_boundary(c) -> bool:
        i = int(np.searchsorted(clusters, c))
        return i < len(clusters) and clusters[i] == c

    mid = (s + e) // 2
    for radius in range(0, (e - s) // 2):
        for c in (mid + radius, mid - radius):
            if s < c < e and text[c - 1].isspace() and not text[c].isspace() and on_boundary(c):
                return c
    i = int(np.searchsorted(tok_start, mid))
    for c in (tok_start[i] if i < len(tok_start) else -1, tok_start[i - 1] if i > 0 else -1):
        if s < c < e and on_boundary(c):
            return int(c)
    j = int(np.searchsorted(clusters, mid))
    inside = [int(clusters[k]) for k in (j - 1, j) if 0 <= k < len(clusters) and s < clusters[k] < e]
    if inside:
        return min(inside, key=lambda c: (abs(c - mid), c))
    c = mid
    # never split a "\r\n" pair
    if text[c - 1] == "\r" and text[c] == "\n" and c + 1 < e:
        c += 1
    return c
