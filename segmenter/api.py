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

from .search import SegmentCost, boundary_strength, partition_k, partition_penalised, penalty_path
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
    noise: str = "mean"
    log_n: str = "n"
    log_cap: int = 64
    length_penalty: str = "none"
    offset: float = 1.0
    slope: float = 0.0
    fit_rounds: int = 3
    rule: str = "fixed"
    base: float = 1.0
    max_lag: int = 100
    baseline: bool = True
    window: int = 50
    drop_pcs: int = 0
    smooth: float = 0.0
    log_len: float = 0.0
    tail: bool = False
    floor: float = 0.0
    by_length: bool = False
    tail_lag: int = 200
    weight_tokens: float = 0.0
    whiten: float = 0.0
    jump_lo: float = 0.3
    jump_hi: float = 6.0
    jump_steps: int = 30


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
        cost = _make_cost(x, sizes, limit, lower, self.params.max_units,
                          max_tokens if max_chars is not None else None)
        cuts = search_cuts(cost, x, self.params, segments=segments, penalty=penalty)
        return cuts, boundary_strength(cost, cuts)


def prepare_vectors(x: np.ndarray, params: TopicParams) -> np.ndarray:
    """The unit vectors the topic search compares: centred on the document mean and renormalised."""
    if params.center:
        x = x - x.mean(axis=0, keepdims=True)
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        x = np.where(norms > 0, x / np.maximum(norms, 1e-12), 0.0)
    if params.smooth:
        y = x.copy()
        y[1:] += params.smooth * x[:-1]
        y[:-1] += params.smooth * x[1:]
        norms = np.linalg.norm(y, axis=1, keepdims=True)
        x = np.where(norms > 0, y / np.maximum(norms, 1e-12), 0.0)
    if params.drop_pcs or params.whiten:
        u, sv, vt = np.linalg.svd(x, full_matrices=False)
        scale = np.ones_like(sv)
        if params.whiten:
            scale = (sv.mean() / np.maximum(sv, 1e-9)) ** params.whiten
        scale[: params.drop_pcs] = 0.0
        x = (u * (sv * scale)) @ vt
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        x = np.where(norms > 0, x / np.maximum(norms, 1e-12), 0.0)
    return x


def search_cuts(cost: SegmentCost, x: np.ndarray, params: TopicParams, segments: int | None = None,
                penalty: float | None = None) -> list[int]:
    """Unit indices that open segments 2..m: exactly ``segments`` of them, or the penalised optimum."""
    n = cost.n
    if segments is not None:
        return partition_k(cost, min(segments, n))
    c = params.penalty if penalty is None else penalty
    if params.log_n == "n":
        scale = np.log(n)
    elif params.log_n == "cap":
        scale = np.log(min(n, params.log_cap))
    else:
        scale = 1.0
    if params.rule == "local":
        lp = None
        if params.log_len:
            lp = params.log_len * local_noise(x) * np.log(np.maximum(np.arange(n + 1), 1))
        beta = local_penalty(x, params, c)
        if params.floor:
            beta = np.maximum(beta, params.floor * local_noise(x))
        if params.tail:
            beta = beta + c * 2.0 * long_range_tail(x, params.tail_lag)
        return partition_penalised(cost, beta, lp)
    if params.rule == "tail":
        s2 = local_noise(x, "mean")
        acf = autocorrelation(x, params.max_lag)
        half = max(len(acf) // 2, 1)
        floor = float(acf[half:].mean()) if len(acf) > half else 0.0
        S = float((acf[:half] - floor).sum())
        return partition_penalised(cost, params.base * s2 + c * 2.0 * max(S, 0.0))
    if params.rule == "gain":
        s2 = local_noise(x, "mean")
        acf = autocorrelation(x, params.max_lag)
        if params.baseline:
            # relative to the average pair: centring on a short document's mean pushes every
            # cosine down by about 1/(n - 1), which a long document does not feel
            tot = x.sum(axis=0)
            acf = acf - (float(tot @ tot) - float(np.einsum("ij,ij->", x, x))) / (n * (n - 1))
        stop = np.flatnonzero(acf <= 0)
        S = float(acf[: stop[0] if stop.size else len(acf)].sum())
        return partition_penalised(cost, params.base * s2 + c * 2.0 * S)
    if params.rule == "jump":
        s2 = local_noise(x, "mean")
        grid = np.geomspace(params.jump_lo, params.jump_hi, params.jump_steps)
        path = penalty_path(cost, grid * s2)
        ks = np.asarray([len(p) + 1 for p in path])
        drops = ks[:-1] - ks[1:]
        j = int(np.argmax(drops))
        beta_min = np.sqrt(grid[j] * grid[j + 1])
        return partition_penalised(cost, c * beta_min * s2)
    if params.noise == "fit":
        # Noise from the fitted segmentation's own residual (boundaries do not inflate it):
        # start from the adjacent-difference estimate, then re-estimate from the residual.
        s2 = local_noise(x, "mean")
        cuts = partition_penalised(cost, c * s2 * scale)
        for _ in range(params.fit_rounds):
            edges = [0, *cuts, n]
            resid = sum(cost.cost(a, b) for a, b in zip(edges, edges[1:]))
            s2 = resid / max(n - len(edges) + 1, 1)
            new = partition_penalised(cost, c * s2 * scale)
            if new == cuts:
                break
            cuts = new
        return cuts
    beta = c * local_noise(x, params.noise) * scale
    return partition_penalised(cost, beta)


def autocorrelation(x: np.ndarray, max_lag: int, max_rows: int = 4096) -> np.ndarray:
    """Mean cosine ``[L]`` between unit vectors ``l = 1..L`` apart (rows of ``x`` are unit or zero vectors)."""
    n = len(x)
    lags = min(max_lag, n - 1)
    out = np.zeros(max(lags, 0))
    for l in range(1, lags + 1):
        a, b = x[:-l], x[l:]
        if len(a) > max_rows:
            idx = np.linspace(0, len(a) - 1, max_rows).astype(np.int64)
            a, b = a[idx], b[idx]
        out[l - 1] = float(np.einsum("ij,ij->i", a, b).mean())
    return out


def local_penalty(x: np.ndarray, params: TopicParams, c: float) -> np.ndarray:
    """Penalty of a segment by its start ``[n + 1]``, from the unit vectors within ``params.window`` of it."""
    n, w = len(x), params.window
    lags = min(params.max_lag, n - 1)
    lo = np.clip(np.arange(n + 1) - w, 0, n)
    hi = np.clip(np.arange(n + 1) + w, 0, n)
    # adjacent squared distances -> local noise
    d = x[1:] - x[:-1]
    sq = np.concatenate([[0.0], np.cumsum(np.einsum("ij,ij->i", d, d))])
    cnt = np.maximum(np.minimum(hi, n - 1) - lo, 1)
    s2 = (sq[np.minimum(hi, n - 1)] - sq[np.minimum(lo, n - 1)]) / cnt / 2.0
    # cosines l apart, pairs starting in the window
    prods = np.zeros((n, lags))
    for l in range(1, lags + 1):
        prods[: n - l, l - 1] = np.einsum("ij,ij->i", x[:-l], x[l:])
    cp = np.vstack([np.zeros((1, lags)), np.cumsum(prods, axis=0)])
    npairs = np.maximum(np.minimum(hi[:, None], n - np.arange(1, lags + 1)[None, :]) - lo[:, None], 0)
    acf = (cp[np.minimum(hi[:, None], n - np.arange(1, lags + 1)[None, :]).clip(0), np.arange(lags)[None, :]]
           - cp[lo[:, None], np.arange(lags)[None, :]]) / np.maximum(npairs, 1)
    acf = np.where(npairs > 0, acf, 0.0)
    if params.baseline:
        cx = np.vstack([np.zeros((1, x.shape[1])), np.cumsum(x, axis=0)])
        tot = cx[hi] - cx[lo]
        m = (hi - lo).astype(np.float64)
        sumsq = np.concatenate([[0.0], np.cumsum(np.einsum("ij,ij->i", x, x))])
        self_ = sumsq[hi] - sumsq[lo]
        base = (np.einsum("ij,ij->i", tot, tot) - self_) / np.maximum(m * (m - 1), 1)
        acf = acf - base[:, None]
    keep = np.cumprod(acf > 0, axis=1)
    S = (acf * keep).sum(axis=1)
    if params.by_length:
        R = np.where(acf[:, 0] > 0, S / np.maximum(acf[:, 0], 1e-9), 0.0)
        return s2 * (params.base + c * R)
    return s2 * params.base + c * 2.0 * S


def long_range_tail(x: np.ndarray, max_lag: int) -> float:
    """Correlation that outlasts the short-range decay: Σ over lags past the first non-positive one
    of (cosine − the level at the longest lags), up to half the longest lag."""
    acf = autocorrelation(x, max_lag)
    if len(acf) < 8:
        return 0.0
    half = len(acf) // 2
    floor = float(acf[half:].mean())
    rel = acf[:half] - floor
    stop = np.flatnonzero(rel <= 0)
    start = int(stop[0]) if stop.size else half
    # past the short-range decay, the tail: keep only what stays above the floor on average
    return max(float(rel[start:].sum()), 0.0)


def topic_cuts(x: np.ndarray, params: TopicParams | None = None, segments: int | None = None,
               penalty: float | None = None, unit_tokens: np.ndarray | None = None) -> list[int]:
    """Topic boundaries (unit indices) of raw unit vectors ``x [n, D]`` without size limits."""
    params = params or TopicParams()
    if len(x) < 2:
        return []
    x = prepare_vectors(np.asarray(x, dtype=np.float64), params)
    w = None
    if params.weight_tokens and unit_tokens is not None:
        w = np.minimum(1.0, np.asarray(unit_tokens, np.float64) / params.weight_tokens)
        w = w / w.mean()
    cost = SegmentCost(x, max_units=params.max_units, weights=w)
    return search_cuts(cost, x, params, segments=segments, penalty=penalty)


def _check_splitter(splitter):
    if splitter is not None and not callable(splitter):
        raise HeadsegError("sentence_splitter must be a callable text -> [(start, end), ...]")
    return splitter


def local_noise(x: np.ndarray, how: str = "mean") -> float:
    """Half the mean squared distance between adjacent unit vectors ``x [n, D]``."""
    if len(x) < 2:
        return 1.0
    d = x[1:] - x[:-1]
    sq = np.einsum("ij,ij->i", d, d)
    v = float(np.median(sq)) if how == "median" else float(sq.mean())
    return max(v / 2.0, 1e-9)


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
