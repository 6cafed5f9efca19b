"""Unit vectors: each unit encoded on its own, its topic heads' context vectors pooled.

Every unit gets its own model window (several for a unit longer than the
window), so no context leaks across a candidate boundary: inside a shared
window the heads blend neighbouring sentences, which blurs exactly the contrast
a boundary needs.  Windows of many documents share the backend's calls (less
padding, fewer calls), a unit's windows always within one call.  The backend
pools (``CaptureBackend.unit_vectors``, one implementation in
:mod:`headseg.analysis.pooling`: each topic head mean-pooled over the unit's
content tokens, normalised, weighted, concatenated; the model's own embedding
appended at its share), so only ``[U, D]`` rows come back from it.

Cost: one forward pass over every token of each distinct unit once (the capture
backend's; a unit whose token ids an earlier unit has takes its vector,
:func:`distinct_units`), plus O(U · N · d) for the pooling.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Sequence

import numpy as np

from headseg.analysis.capture import CaptureBackend, HeadActivations
from headseg.analysis.errors import HeadsegError, ProfileError, is_integer, shown
from headseg.analysis.pooling import unit_groups
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


class UnitCall(NamedTuple):
    """One ``unit_vectors`` call: ``windows`` (indices into the windows), the ``units`` it pools (in call
    order) and ``owners``, each window's place in ``units``."""

    windows: np.ndarray
    units: np.ndarray
    owners: np.ndarray


def unit_calls(windows: Sequence[Window], owner: np.ndarray, batch_size: int) -> list[UnitCall]:
    """The ``unit_vectors`` calls over ``windows`` (``owner [W]``: each window's unit): units sorted by
    their longest window (less padding), whole (a unit is pooled within one call), about ``batch_size``
    windows a call (a unit with more windows than that is a call of its own)."""
    units, groups = unit_groups(owner)
    longest = [max(len(windows[i]) for i in g) for g in groups]
    calls: list[list[int]] = []
    size = 0
    for k in sorted(range(len(units)), key=lambda k: (longest[k], int(units[k]))):
        if not calls or size + len(groups[k]) > batch_size:
            calls.append([])
            size = 0
        calls[-1].append(k)
        size += len(groups[k])
    # the grouping is known here: each call's units and its windows' owners come with it
    return [UnitCall(np.concatenate([groups[k] for k in ks]), units[ks],
                     np.repeat(np.arange(len(ks)), [len(groups[k]) for k in ks]))
            for ks in calls]


def encode_units(items: Sequence[tuple[TokenizedText, Sequence[tuple[int, int]]]], tokenizer,
                 backend: CaptureBackend, heads: Sequence[Head], weights: np.ndarray,
                 batch_size: int, max_tokens: int, progress=None, output_weight: float = 0.0) -> list[np.ndarray]:
    """Unit vectors ``[U_i, N·d]`` of each document ``(doc, units)`` in ``items``, encoded in shared calls.

    ``backend.unit_vectors`` (:class:`~headseg.analysis.capture.CaptureBackend`)
    runs the model and pools (:mod:`headseg.analysis.pooling`); ``heads`` and
    their ``weights [N]`` (aligned, in capture order) are the topic heads;
    ``max_tokens`` is the window width; ``batch_size`` about the windows of one
    call; ``output_weight`` the share of the model's own embedding (``[U_i,
    N·d + hidden]`` then).  A unit without tokens gets a zero vector.
    ``progress=True`` shows a bar of its own, or pass an open one to update.
    """
    windows, owners, bounds = [], [], [0]
    for doc, units in items:
        w, o = unit_windows(doc, units, tokenizer, max_tokens)
        windows.extend(w)
        owners.append(o + bounds[-1])
        bounds.append(bounds[-1] + len(units))
    owner = np.concatenate(owners) if owners else np.zeros(0, np.int64)
    windows, owner, first = distinct_units(windows, owner, bounds[-1])
    # rows for the distinct units only, spread over their repeats once at the end (one [U, D] array at most)
    kept = np.unique(first)
    row = np.zeros(bounds[-1], dtype=np.int64)
    row[kept] = np.arange(len(kept))
    x = np.zeros((len(kept), 0))
    own_bar = progress is True
    bar = progress_bar(total=len(windows), desc="encoding units", unit="unit") if own_bar else progress or None
    try:
        for call in unit_calls(windows, owner, batch_size) if len(windows) else ():
            rows = backend.unit_vectors([windows[i] for i in call.windows], call.owners, heads, weights,
                                        output_weight=output_weight)
            if not x.shape[1]:
                x = np.zeros((len(kept), rows.shape[1]))
            x[row[call.units]] = rows
            if bar is not None:
                bar.update(len(call.windows))
    finally:
        if own_bar:
            bar.close()
    if len(kept) < bounds[-1]:
        x = x[row[first]]  # each repeated unit takes the vector of its first occurrence
    return [x[bounds[i]: bounds[i + 1]] for i in range(len(items))]


def distinct_units(windows: Sequence[Window], owner: np.ndarray, count: int
                   ) -> tuple[list[Window], np.ndarray, np.ndarray]:
    """The windows of each unit whose token ids no earlier unit has, and ``first [count]``: for each of
    ``count`` units the first unit with its windows' ids (itself where it is the first; a unit without
    windows is its own).

    A unit's vector is a function of its windows' ids alone (each unit is encoded on its own and pooled
    over its content tokens), so a repeated unit is encoded once: ``'*' * N``, cut into pieces of the same
    ids, is a few model calls, not one a piece, and a meeting's hundreds of "Yeah." one each.  Cost: O(tokens) to key the
    units, against the model's forward pass over them.
    """
    first = np.arange(count)
    if not len(windows):
        return list(windows), owner, first
    units, groups = unit_groups(owner)
    seen: dict[tuple[bytes, ...], int] = {}
    keep = np.zeros(len(windows), dtype=bool)
    for u, g in zip(units.tolist(), groups):
        key = tuple(windows[i].input_ids.tobytes() for i in g)
        was = seen.setdefault(key, u)
        first[u] = was
        if was == u:
            keep[g] = True
    if keep.all():
        return list(windows), owner, first
    return [w for w, k in zip(windows, keep) if k], owner[keep], first


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
            raise HeadsegError(f"window_tokens must be an integer (got {shown(self.window_tokens)})")
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
        return encode_units(items, self.tokenizer, self.backend, self.topic_heads, self.topic_weights,
                            self.batch_size, self.window_tokens, progress=progress,
                            output_weight=self.output_weight)
