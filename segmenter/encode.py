"""Unit vectors: each unit encoded on its own, its topic heads' context vectors pooled.

Every unit gets its own model window (several for a unit longer than the
window), so no context leaks across a candidate boundary: inside a shared
window the heads blend neighbouring sentences, which blurs exactly the contrast
a boundary needs.  Windows of many documents share the capture batches (less
padding, fewer calls).  Per unit, each head's context vectors ``z_h`` are
mean-pooled over the unit's content tokens, normalised per head, weighted by
``sqrt(w_h)`` and concatenated, so a dot product of two unit vectors is the
weighted mean of the heads' cosines.  With an output share ``s > 0`` (the
profile's ``topic_output_weight``) the model's last hidden states, pooled
over every token of the unit's windows (as the model's own sentence embedding
is pooled), are appended at ``sqrt(s)``, the heads scaled by ``sqrt(1 − s)``:
the dot product is then ``(1 − s)·(heads' weighted mean cosine) + s·(cosine of
the model's own embeddings of the two units)``.

Cost: one forward pass over every token once (the capture backend's), plus
O(U · N · d) for the pooling.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np

from headseg.analysis.capture import CaptureBackend, HeadActivations, iter_batches
from headseg.analysis.errors import HeadsegError, ProfileError, is_integer
from headseg.analysis.profile import HeadProfile
from headseg.analysis.progress import progress_bar
from headseg.analysis.text import WINDOW_TOKENS, TokenizedText, Window, make_window, window_width

from .document import unit_token_ranges

Head = tuple[int, int]


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


def _unit_means(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per-unit means ``sums [U, ..., D] / counts [U]``, L2-normalised along the last axis (zero stays zero)."""
    means = sums / np.maximum(counts, 1).reshape((-1,) + (1,) * (sums.ndim - 1))
    norms = np.linalg.norm(means, axis=-1, keepdims=True)
    return np.where(norms > 0, means / np.maximum(norms, 1e-12), 0.0)


def pool_units(acts_iter, n_units: int, weights: np.ndarray, output_weight: float = 0.0) -> np.ndarray:
    """Mean-pool each head's context vectors over a unit's tokens, normalise per head, weight, concatenate.

    ``acts_iter`` yields ``(HeadActivations, owners [B], content_masks [B, T])``.
    Returns ``[n_units, N·d]``, or ``[n_units, N·d + hidden]`` with ``output_weight > 0``:
    the last hidden states (``acts.hidden``) mean-pooled over every token of the
    unit's windows (special tokens too, as the model's own sentence embedding
    pools them) and normalised, at ``sqrt(output_weight)``, the heads at ``sqrt(1 − output_weight)``.  A
    unit without tokens gets a zero vector.
    """
    sums = hidden = None
    counts, hidden_counts = np.zeros(n_units), np.zeros(n_units)
    for acts, owners, content in acts_iter:
        z = acts.z  # [B, N, T, d]
        if sums is None:
            sums = np.zeros((n_units, z.shape[1], z.shape[3]), dtype=np.float64)
        np.add.at(sums, owners, np.einsum("bntd,bt->bnd", z.astype(np.float64), content.astype(np.float64)))
        np.add.at(counts, owners, content.sum(axis=1))
        if output_weight > 0:
            if acts.hidden is None:
                raise ProfileError("the profile reads the model's last hidden states; the backend gave none")
            if hidden is None:
                hidden = np.zeros((n_units, acts.hidden.shape[2]), dtype=np.float64)
            # every token of the window, [CLS] and [SEP] too: the output was trained to be
            # pooled so (sentence-transformers' mean pooling; without them dialseg711 0.2604 -> 0.2631)
            every = acts.attention_mask.astype(np.float64)
            np.add.at(hidden, owners, np.einsum("btd,bt->bd", acts.hidden.astype(np.float64), every))
            np.add.at(hidden_counts, owners, every.sum(axis=1))
    if sums is None:
        return np.zeros((n_units, 0))
    unit = _unit_means(sums, counts) * np.sqrt(weights)[None, :, None]
    unit = unit.reshape(n_units, -1)
    if output_weight <= 0:
        return unit
    return np.hstack([unit * np.sqrt(1.0 - output_weight),
                      _unit_means(hidden, hidden_counts) * np.sqrt(output_weight)])


def encode_units(items: Sequence[tuple[TokenizedText, Sequence[tuple[int, int]]]], tokenizer,
                 capture: Callable[..., HeadActivations], heads: Sequence[Head], weights: np.ndarray,
                 batch_size: int, max_tokens: int, progress=None, output_weight: float = 0.0) -> list[np.ndarray]:
    """Unit vectors ``[U_i, N·d]`` of each document ``(doc, units)`` in ``items``, encoded in shared batches.

    ``capture(windows, heads=..., hidden=...)`` runs the model (a :class:`Segmenter`'s);
    ``heads`` and their ``weights [N]`` (aligned, in capture order) are the
    topic heads; ``max_tokens`` is the window width; ``output_weight`` the
    share of the model's own embedding (:func:`pool_units`; ``[U_i, N·d + hidden]`` then).  ``progress=True`` shows
    a bar of its own, or pass an open one to update.
    """
    windows, owners, bounds = [], [], [0]
    for doc, units in items:
        w, o = unit_windows(doc, units, tokenizer, max_tokens)
        windows.extend(w)
        owners.append(o + bounds[-1])
        bounds.append(bounds[-1] + len(units))
    owner = np.concatenate(owners) if owners else np.zeros(0, np.int64)
    index = {id(w): i for i, w in enumerate(windows)}
    own_bar = progress is True
    bar = progress_bar(total=len(windows), desc="encoding units", unit="unit") if own_bar else progress or None

    def batches():
        for batch in iter_batches(windows, batch_size):
            acts = capture(batch, heads=heads, hidden=True) if output_weight > 0 else capture(batch, heads=heads)
            batch_owner = owner[[index[id(w)] for w in batch]]
            content = acts.attention_mask.copy()
            for b, w in enumerate(batch):
                content[b, : len(w)] &= ~w.special
            if bar is not None:
                bar.update(len(batch))
            yield acts, batch_owner, content

    try:
        x = pool_units(batches(), bounds[-1], weights, output_weight)
    finally:
        if own_bar:
            bar.close()
    return [x[bounds[i]: bounds[i + 1]] for i in range(len(items))]


def sorted_selection(heads, weights) -> tuple[list[tuple[int, int]], np.ndarray]:
    """Heads sorted by (layer, head) as capture() returns them, with normalised weights aligned."""
    w = np.asarray(weights, dtype=np.float64)
    if w.size != len(heads) or np.any(w < 0) or w.sum() <= 0:
        raise ProfileError("head weights must be non-negative, one per head, and not all zero")
    order = sorted(range(len(heads)), key=lambda i: tuple(heads[i]))
    return [tuple(heads[i]) for i in order], (w / w.sum())[order]


@dataclass(frozen=True, eq=False)
class UnitEncoder:
    """What segmentation needs of an engine, and nothing more: small, frozen, built once.

    ``tokenizer`` (the model's), ``backend`` (any
    :class:`~headseg.analysis.capture.CaptureBackend`), the heads it reads —
    ``detect_heads`` with ``detect_weights [N]`` (the separator-focused heads of
    the unit detector) and ``topic_heads`` with ``topic_weights [M]`` (the unit
    vectors), both in capture order with normalised weights — ``output_weight``
    (the share of the model's own embedding in a unit vector), ``batch_size``
    (windows per capture call) and ``window_tokens`` (the model window, special
    tokens included).  The unit detector and the unit vectors take this, never
    the segmenter; another backend is :meth:`with_backend`.
    """

    tokenizer: Any
    backend: CaptureBackend
    detect_heads: tuple
    detect_weights: np.ndarray
    topic_heads: tuple
    topic_weights: np.ndarray
    output_weight: float = 0.0
    batch_size: int = 64
    window_tokens: int = WINDOW_TOKENS

    def __post_init__(self) -> None:
        if not is_integer(self.batch_size) or self.batch_size < 1:
            raise HeadsegError("batch_size must be a positive integer")
        if not is_integer(self.window_tokens):
            raise HeadsegError(f"window_tokens must be an integer (got {self.window_tokens!r})")
        object.__setattr__(self, "detect_heads", tuple(tuple(h) for h in self.detect_heads))
        object.__setattr__(self, "topic_heads", tuple(tuple(h) for h in self.topic_heads))

    @classmethod
    def of(cls, tokenizer: Any, backend: CaptureBackend, profile: HeadProfile, num_layers: int, num_heads: int,
           batch_size: int = 64, window_tokens: int = WINDOW_TOKENS) -> "UnitEncoder":
        """The encoder of ``profile`` on a ``num_layers × num_heads`` model: the unit detector reads the
        profile's separator-focused heads, the unit vectors its topic heads (default: the whole last
        layer, which compares sentences best, and the first at a quarter of the weight, which keeps
        their words: docs/segmenter.md)."""
        heads, weights = sorted_selection(profile.heads, profile.weights)
        topic, topic_weights = sorted_selection(*profile.topic_selection(num_layers, num_heads))
        return cls(tokenizer, backend, tuple(heads), weights, tuple(topic), topic_weights,
                   float(profile.topic_output_weight), int(batch_size), int(window_tokens))

    def with_backend(self, backend: CaptureBackend) -> "UnitEncoder":
        """The same encoder capturing through ``backend`` (a batcher's, say)."""
        return replace(self, backend=backend)

    def capture(self, windows: Sequence[Window], heads=None, hidden: bool = False) -> HeadActivations:
        """Context vectors of ``heads`` (default: the unit-detection heads) for a batch of windows;
        ``hidden=True`` adds the model's last hidden states."""
        heads = self.detect_heads if heads is None else heads
        if hidden:
            return self.backend.capture(windows, heads=heads, attention=False, norms=False, hidden=True)
        return self.backend.capture(windows, heads=heads, attention=False, norms=False)

    def unit_vectors(self, items: Sequence[tuple[TokenizedText, Sequence[tuple[int, int]]]],
                     progress=None) -> list[np.ndarray]:
        """:func:`encode_units` of ``items`` (``(doc, units)`` each) with this encoder's heads and sizes."""
        return encode_units(items, self.tokenizer, self.capture, self.topic_heads, self.topic_weights,
                            self.batch_size, self.window_tokens, progress=progress,
                            output_weight=self.output_weight)
