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

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from headseg.analysis.capture import HeadActivations, iter_batches
from headseg.analysis.errors import HeadsegError, InputError, ProfileError
from headseg.analysis.model import LoadedModel, load_model
from headseg.analysis.profile import HeadProfile, default_profile_path
from headseg.analysis.segments import Segment, Segmentation
from headseg.analysis.text import TokenizedText, Window, make_window, tokenize, window_width

from .search import SegmentCost, boundary_strength, partition_k, partition_penalised
from .units import UnitParams, find_units

LEVELS = ("topic", "unit")


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
    floor: float = 1.5
    #: ``σ²`` and ``R`` are measured on the units within this many units of a
    #: candidate boundary, so a long document or a concatenation keeps each
    #: part's own scale
    window: int = 400
    #: longest lag of the autocorrelation, in units
    max_lag: int = 100
    #: a unit weighs ``min(1, tokens / weight_tokens)`` in the segment scatter: a
    #: unit of a few tokens has a noisy vector (0 = every unit weighs the same)
    weight_tokens: float = 16.0
    #: longest segment considered, in units (bounds the search to O(n·max_units))
    max_units: int = 400
    #: subtract the document mean before comparing units (removes the shared
    #: "this is English prose" direction that makes every cosine positive)
    center: bool = True


def fallback_profile(loaded: LoadedModel) -> HeadProfile:
    """Every head of the last layer, equal weights: the paper's sentence-block layer."""
    info = loaded.info
    last = info.num_layers - 1
    heads = [(last, h) for h in range(info.num_heads)]
    return HeadProfile(
        model_fingerprint=info.fingerprint,
        heads=heads,
        weights=[1.0 / len(heads)] * len(heads),
        model_name=info.name,
        num_layers=info.num_layers,
        num_heads=info.num_heads,
        corpus="(none: fallback profile, last layer)",
    )


def resolve_profile(loaded: LoadedModel, profile) -> HeadProfile:
    """A :class:`HeadProfile`, a path to one, or None (shipped default if it matches, else fallback)."""
    if isinstance(profile, HeadProfile):
        prof = profile
    elif profile is not None:
        prof = HeadProfile.load(profile)
    else:
        path = default_profile_path()
        prof = None
        if path.is_file():
            try:
                prof = HeadProfile.load(path)
                prof.check_model(loaded.info)
            except ProfileError:
                prof = None
        if prof is None:
            return fallback_profile(loaded)
    prof.check_model(loaded.info)
    return prof


def make_backend(loaded: LoadedModel, profile: HeadProfile, backend="auto", device: str | None = None):
    """A capture backend: an object with ``capture(windows, heads, attention, norms)``, or a name."""
    if hasattr(backend, "capture"):
        return backend
    if backend not in ("auto", "torch", "onnx"):
        raise HeadsegError(f"unknown backend '{backend}' (use auto, torch or onnx)")
    try:
        from headseg.export.backend import make_backend as export_make_backend
    except ImportError:
        export_make_backend = None
    if export_make_backend is not None:
        return export_make_backend(loaded, profile, backend=backend, device=device)
    if backend == "onnx":
        raise HeadsegError("the ONNX backend is not available in this installation")
    from headseg.analysis.capture import TorchBackend

    return TorchBackend(loaded, device="cpu" if device in (None, "auto") else device)


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

    def __init__(self, model=None, profile=None, backend="auto", device: str | None = None,
                 batch_size: int = 64, max_tokens: int = 128, params: TopicParams | None = None,
                 unit_params: UnitParams | None = None, unit_mode: str = "auto",
                 sentence_splitter: Callable[[str], Sequence[tuple[int, int]]] | None = None):
        self.loaded = model if isinstance(model, LoadedModel) else load_model(model)
        self.profile = resolve_profile(self.loaded, profile)
        self.backend = make_backend(self.loaded, self.profile, backend=backend, device=device)
        self.batch_size = int(batch_size)
        self.max_tokens = int(max_tokens)
        self.params = params or TopicParams()
        self.unit_params = unit_params or UnitParams()
        if unit_mode not in ("auto", "rules", "heads"):
            raise HeadsegError(f"unit_mode must be auto, rules or heads (got '{unit_mode}')")
        self.unit_mode = unit_mode
        self.sentence_splitter = _check_splitter(sentence_splitter)
        if self.batch_size < 1:
            raise HeadsegError("batch_size must be at least 1")
        if not 8 <= self.max_tokens <= self.loaded.info.max_positions:
            raise HeadsegError(f"max_tokens must be between 8 and {self.loaded.info.max_positions}")
        info = self.loaded.info
        # Unit detection reads the profile's separator-focused heads; topic
        # similarity reads the topic heads (default: the whole last layer, which
        # compares sentences best: docs/segmenter.md).
        self.heads, self.weights = _sorted_selection(self.profile.heads, self.profile.weights)
        self.topic_heads, self.topic_weights = _sorted_selection(
            *self.profile.topic_selection(info.num_layers, info.num_heads))

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

        def batches():
            for batch in iter_batches(windows, self.batch_size):
                acts = self.capture(batch, heads=self.topic_heads)
                batch_owner = owner[[index[id(w)] for w in batch]]
                content = acts.attention_mask.copy()
                for b, w in enumerate(batch):
                    content[b, : len(w)] &= ~w.special
                if progress is not None:
                    progress.update(len(batch))
                yield acts, batch_owner, content

        x = pool_units(batches(), bounds[-1], self.topic_weights)
        return [x[bounds[i]: bounds[i + 1]] for i in range(len(items))]

    # ---------------------------------------------------------------- topics
    def segment(self, text: str, level: str = "topic", segments: int | None = None,
                min_chars: int | None = None, max_chars: int | None = None, max_tokens: int | None = None,
                penalty: float | None = None, progress=None,
                sentence_splitter: Callable[[str], Sequence[tuple[int, int]]] | None = None) -> Segmentation:
        """Segment ``text``.

        ``level="unit"``: sentence-like units.  ``level="topic"`` (default): coherent
        groups of units; their number is chosen automatically unless ``segments``
        is given.  ``max_chars`` / ``max_tokens`` are hard limits never exceeded
        (a unit larger than the limit is itself split); ``min_chars`` is honoured
        whenever the limits allow it.  The invariant
        ``"".join(s.text for s in result) == text`` always holds.
        ``sentence_splitter``: a callable ``text -> [(start, end), ...]`` (pysbd,
        spaCy...) used for the units instead of the sentence rules (default: the
        constructor's); its spans must be in order and leave only whitespace out.
        """
        return self.segment_many([text], level=level, segments=segments, min_chars=min_chars,
                                 max_chars=max_chars, max_tokens=max_tokens, penalty=penalty,
                                 progress=progress, sentence_splitter=sentence_splitter)[0]

    def segment_many(self, texts: Sequence[str], level: str = "topic", segments: int | None = None,
                     min_chars: int | None = None, max_chars: int | None = None, max_tokens: int | None = None,
                     penalty: float | None = None, progress=None,
                     sentence_splitter: Callable[[str], Sequence[tuple[int, int]]] | None = None
                     ) -> list[Segmentation]:
        """:meth:`segment` for several documents, batching the model across them; order is kept."""
        if level not in LEVELS:
            raise HeadsegError(f"level must be one of {', '.join(LEVELS)} (got '{level}')")
        for name, v in (("segments", segments), ("min_chars", min_chars), ("max_chars", max_chars),
                        ("max_tokens", max_tokens)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1):
                raise HeadsegError(f"{name} must be a positive integer (got {v!r})")
        if max_chars is not None and min_chars is not None and min_chars > max_chars:
            raise HeadsegError("min_chars is larger than max_chars")
        if penalty is not None and not penalty >= 0:
            raise HeadsegError("penalty must be non-negative")
        splitter = self.sentence_splitter if sentence_splitter is None else _check_splitter(sentence_splitter)
        results: list[Segmentation | None] = [None] * len(texts)
        work = []
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise InputError(f"expected text as str, got {type(text).__name__}")
            if not text.strip():
                segs = [] if not text else [Segment(0, len(text), text, 0.0)]
                results[i] = Segmentation(text=text, segments=segs, level=level, meta={"units": len(segs)})
                continue
            doc = tokenize(text, self.loaded.tokenizer)
            units = _split_oversized(text, doc, self.units(text, doc=doc, sentence_splitter=splitter),
                                     max_chars, max_tokens)
            if level == "unit":
                results[i] = Segmentation.from_boundaries(text, [a for a, _ in units[1:]],
                                                          [1.0] * (len(units) - 1), level="unit",
                                                          meta={"units": len(units)})
            else:
                work.append((i, doc, units))
        if work:
            vectors = self._vectors_many([(doc, units) for _, doc, units in work], progress=progress)
            for (i, doc, units), x in zip(work, vectors):
                text = texts[i]
                cuts, scores = self._topic_cuts(x, text, doc, units, segments, min_chars, max_chars,
                                                max_tokens, penalty)
                results[i] = Segmentation.from_boundaries(
                    text, [units[c][0] for c in cuts], scores, level="topic",
                    meta={"units": len(units), "profile": self.profile.hash()})
        return results

    def _topic_cuts(self, x, text, doc, units, segments, min_chars, max_chars, max_tokens, penalty):
        n = len(units)
        if n == 1:
            return [], []
        sizes, limit, lower = None, None, None
        if max_chars is not None or max_tokens is not None or min_chars is not None:
            # Limits are enforced on characters or tokens; with both, the tighter one wins
            # by searching on characters and forbidding spans over the token limit.
            chars = np.asarray([b - a for a, b in units], dtype=np.float64)
            r = unit_token_ranges(doc, units)
            toks = (r[:, 1] - r[:, 0]).astype(np.float64)
            if max_tokens is not None and max_chars is None:
                sizes, limit = toks, float(max_tokens)
            else:
                sizes, limit = chars, None if max_chars is None else float(max_chars)
            lower = None if min_chars is None else float(min_chars)
            if max_tokens is not None and max_chars is not None:
                sizes = np.stack([chars, toks], axis=1)
        x = prepare_vectors(x, self.params)
        r = unit_token_ranges(doc, units)
        weights = unit_weights(r[:, 1] - r[:, 0], self.params)
        cost = _make_cost(x, sizes, limit, lower, self.params.max_units,
                          max_tokens if max_chars is not None else None, weights)
        cuts = search_cuts(cost, x, self.params, segments=segments, penalty=penalty)
        return cuts, boundary_strength(cost, cuts)


def prepare_vectors(x: np.ndarray, params: TopicParams) -> np.ndarray:
    """The unit vectors the topic search compares: centred on the document mean and renormalised."""
    if params.center:
        x = x - x.mean(axis=0, keepdims=True)
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
                penalty: float | None = None) -> list[int]:
    """Unit indices that open segments 2..m: exactly ``segments`` of them, or the penalised optimum."""
    if segments is not None:
        return partition_k(cost, min(segments, cost.n))
    return partition_penalised(cost, boundary_penalty(x, params, params.penalty if penalty is None else penalty))


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
    autocorrelation at lag ``l`` the mean cosine of unit pairs ``l`` apart that
    start there, minus the mean cosine of all pairs of the window (centring a
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
               penalty: float | None = None, unit_tokens=None) -> list[int]:
    """Topic boundaries (unit indices) of raw unit vectors ``x [n, D]``, without size limits.

    The search :meth:`Segmenter.segment` runs, for vectors computed elsewhere
    (cached for a sweep, say); ``unit_tokens [n]`` gives the unit weights.
    """
    params = params or TopicParams()
    if len(x) < 2:
        return []
    x = prepare_vectors(np.asarray(x, dtype=np.float64), params)
    weights = None if unit_tokens is None else unit_weights(unit_tokens, params)
    cost = SegmentCost(x, max_units=params.max_units, weights=weights)
    return search_cuts(cost, x, params, segments=segments, penalty=penalty)


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


def _split_oversized(text, doc, units, max_chars, max_tokens):
    """Split any unit over a hard limit at whitespace (else anywhere) so every limit is satisfiable."""
    if max_chars is None and max_tokens is None:
        return units
    tok_start = doc.offsets[:, 0] if len(doc) else np.zeros(0, np.int64)
    tok_end = doc.offsets[:, 1] if len(doc) else np.zeros(0, np.int64)
    out = []
    for a, b in units:
        stack = [(a, b)]
        while stack:
            s, e = stack.pop()
            n_tok = int(np.searchsorted(tok_start, e, "left") - np.searchsorted(tok_start, s, "left"))
            too_long = (max_chars is not None and e - s > max_chars) or (max_tokens is not None and n_tok > max_tokens)
            if not too_long or e - s <= 1:
                out.append((s, e))
                continue
            cut = _best_cut(text, s, e, tok_start, tok_end)
            stack.append((cut, e))
            stack.append((s, cut))
    return out


def _best_cut(text, s, e, tok_start, tok_end):
    """A split point near the middle of ``text[s:e]``: after whitespace, else at a token start, else mid."""
    mid = (s + e) // 2
    for radius in range(0, (e - s) // 2):
        for c in (mid + radius, mid - radius):
            if s < c < e and text[c - 1].isspace() and not text[c].isspace():
                return c
    i = int(np.searchsorted(tok_start, mid))
    for c in (tok_start[i] if i < len(tok_start) else -1, tok_start[i - 1] if i > 0 else -1):
        if s < c < e:
            return int(c)
    c = mid
    # never split a "\r\n" pair
    if text[c - 1] == "\r" and text[c] == "\n" and c + 1 < e:
        c += 1
    return c
