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
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import regex

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

    #: penalty per new segment is ``penalty · σ² · ln(n)`` (a BIC-style criterion):
    #: ``σ²`` is the document's own local noise, half the mean squared distance
    #: between adjacent unit vectors, and ``n`` the number of units.  Scaling by
    #: the document's noise keeps one setting valid for short noisy dialogue
    #: turns and long lecture sentences alike (docs/segmenter.md has the sweep).
    penalty: float = 0.55
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
                 unit_params: UnitParams | None = None, unit_mode: str = "auto"):
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
    def units(self, text: str, doc: TokenizedText | None = None, mode: str | None = None) -> list[tuple[int, int]]:
        """Sentence-like unit spans tiling ``text`` (see :func:`segmenter.units.find_units`)."""
        return find_units(text, self, doc=doc, params=self.unit_params, mode=mode or self.unit_mode)

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
                penalty: float | None = None, progress=None) -> Segmentation:
        """Segment ``text``.

        ``level="unit"``: sentence-like units.  ``level="topic"`` (default): coherent
        groups of units; their number is chosen automatically unless ``segments``
        is given.  ``max_chars`` / ``max_tokens`` are hard limits never exceeded
        (a unit larger than the limit is itself split); ``min_chars`` is honoured
        whenever the limits allow it.  The invariant
        ``"".join(s.text for s in result) == text`` always holds.
        """
        return self.segment_many([text], level=level, segments=segments, min_chars=min_chars,
                                 max_chars=max_chars, max_tokens=max_tokens, penalty=penalty,
                                 progress=progress)[0]

    def segment_many(self, texts: Sequence[str], level: str = "topic", segments: int | None = None,
                     min_chars: int | None = None, max_chars: int | None = None, max_tokens: int | None = None,
                     penalty: float | None = None, progress=None) -> list[Segmentation]:
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
            units = _split_oversized(text, doc, self.units(text, doc=doc), max_chars, max_tokens)
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
        if segments is not None and level == "topic":
            # A segment is at least one unit: more segments than units cannot be had.
            # Said on stderr (the "headseg" logger) and in meta, never silently.
            for i, r in enumerate(results):
                r.meta["segments_requested"] = int(segments)
                r.meta["segments_capped"] = len(r) < segments
                if len(r) < segments:
                    name = f"document {i + 1}: " if len(results) > 1 else ""
                    logging.getLogger("headseg").warning(
                        "headseg: warning: %s%d segments requested, but the text has only %d unit(s): "
                        "returning %d segment(s)", name, segments, r.meta.get("units", len(r)), len(r))
        return results

    def _topic_cuts(self, x, text, doc, units, segments, min_chars, max_chars, max_tokens, penalty):
        n = len(units)
        if n == 1:
            return [], []
        p = self.params
        if p.center:
            x = x - x.mean(axis=0, keepdims=True)
            norms = np.linalg.norm(x, axis=1, keepdims=True)
            x = np.where(norms > 0, x / np.maximum(norms, 1e-12), 0.0)
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
        cost = _make_cost(x, sizes, limit, lower, p.max_units, max_tokens if max_chars is not None else None)
        if segments is not None:
            k = min(segments, n)
            cuts = partition_k(cost, k)
        else:
            beta = (p.penalty if penalty is None else penalty) * local_noise(x) * np.log(n)
            cuts = partition_penalised(cost, beta)
        return cuts, boundary_strength(cost, cuts)


def local_noise(x: np.ndarray) -> float:
    """Half the mean squared distance between adjacent unit vectors ``x [n, D]``."""
    if len(x) < 2:
        return 1.0
    d = x[1:] - x[:-1]
    return max(float(np.einsum("ij,ij->i", d, d).mean()) / 2.0, 1e-9)


class _TwoLimitCost(SegmentCost):
    """Character limit via the base class, plus a token limit on the side."""

    def __init__(self, x, chars, toks, max_chars, max_toks, min_chars, max_units):
        super().__init__(x, chars, max_chars, min_chars, max_units)
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


def _make_cost(x, sizes, limit, lower, max_units, token_limit):
    if sizes is not None and sizes.ndim == 2:
        return _TwoLimitCost(x, sizes[:, 0], sizes[:, 1], limit, float(token_limit), lower, max_units)
    return SegmentCost(x, sizes, limit, lower, max_units)


def _split_oversized(text, doc, units, max_chars, max_tokens):
    """Split any unit over a hard limit at whitespace (else anywhere) so every limit is satisfiable.

    Cuts fall on grapheme cluster boundaries (never inside an emoji sequence or
    between a letter and its combining mark), unless one cluster is itself over
    the limit: the limit is hard.
    """
    if max_chars is None and max_tokens is None:
        return units
    tok_start = doc.offsets[:, 0] if len(doc) else np.zeros(0, np.int64)
    tok_end = doc.offsets[:, 1] if len(doc) else np.zeros(0, np.int64)
    out = []
    for a, b in units:
        stack = [(a, b)]
        clusters = None
        while stack:
            s, e = stack.pop()
            n_tok = int(np.searchsorted(tok_start, e, "left") - np.searchsorted(tok_start, s, "left"))
            too_long = (max_chars is not None and e - s > max_chars) or (max_tokens is not None and n_tok > max_tokens)
            if not too_long or e - s <= 1:
                out.append((s, e))
                continue
            if clusters is None:
                clusters = grapheme_starts(text, a, b)  # once per unit, only for units that need a cut
            cut = _best_cut(text, s, e, tok_start, tok_end, clusters)
            stack.append((cut, e))
            stack.append((s, cut))
    return out


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
