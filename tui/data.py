"""The TUI's data layer: documents, windows and per-window head matrices.

Nothing here imports Textual, so tests can compare what the app shows with an
independent call of the analysis API, and the widgets only ever receive plain
numpy arrays.

A *source* turns windows into per-head activations.  Two exist:
:class:`ModelSource` runs the encoder (``TorchBackend.capture``) and
:class:`~headseg.tui.precomputed.PrecomputedSource` replays arrays saved in an
``.npz`` file (used by the snapshot tests, so their output never depends on
floating-point details of a torch build).  :class:`DocumentModel` puts a source behind a small thread-safe
LRU cache: matrices are computed the first time a window is shown.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from headseg.analysis.errors import HeadsegError, InputError
from headseg.analysis.reading import decode_text, file_size, read_head, read_text
from headseg.analysis.norms import norm_weighted_attention, strip_marker
from headseg.analysis.similarity import context_similarity
from headseg.analysis.text import WINDOW_TOKENS, Window, make_windows, tokenize

#: Matrix kinds the matrix pane cycles through with ``a``.
KINDS = ("similarity", "attention", "norm", "sentences")
KIND_LABELS = {
    "similarity": "context similarity S = Z·Zᵀ",
    "attention": "attention α",
    "norm": "norm-weighted attention ‖α f(x)‖",
    "sentences": "S with sentence-block overlay",
}

#: Files above this size are only read from the start (the rest is never shown).
DEFAULT_HEAD_BYTES = 1_000_000
DEFAULT_MAX_WINDOWS = 200


@dataclass
class WindowMatrices:
    """Every head of one window.

    ``z [L, H, T, d]`` context vectors, ``attn [L, H, T, T]`` attention
    probabilities, ``fnorm [L, H, T]`` value norms ``‖f_h(x_j)‖``.  ``s`` and
    ``norm_attn`` (both ``[L, H, T, T]``) are derived on first use.
    """

    z: np.ndarray
    attn: np.ndarray
    fnorm: np.ndarray
    _s: np.ndarray | None = field(default=None, repr=False)
    _norm: np.ndarray | None = field(default=None, repr=False)

    @property
    def s(self) -> np.ndarray:
        """Context similarity ``S = Z·Zᵀ`` of every head, ``[L, H, T, T]`` (computed once)."""
        if self._s is None:
            self._s = context_similarity(self.z)
        return self._s

    @property
    def norm_attn(self) -> np.ndarray:
        """Norm-weighted attention ``‖α f(x)‖`` of every head, ``[L, H, T, T]`` (computed once)."""
        if self._norm is None:
            self._norm = norm_weighted_attention(self.attn, self.fnorm)
        return self._norm

    def matrix(self, layer: int, head: int, kind: str) -> np.ndarray:
        """The ``[T, T]`` matrix of one head; ``sentences`` shows S (the overlay is drawn on top)."""
        if kind in ("similarity", "sentences"):
            return self.s[layer, head]
        if kind == "attention":
            return self.attn[layer, head]
        if kind == "norm":
            return self.norm_attn[layer, head]
        raise HeadsegError(f"unknown matrix kind '{kind}' (one of {', '.join(KINDS)})")


class ModelSource:
    """Computes :class:`WindowMatrices` with the encoder (all heads, attention and norms)."""

    def __init__(self, loaded, device: str | None = "cpu"):
        self.loaded = loaded
        self.device = device
        self._backend = None
        # One forward pass at a time: the hooks store per-call state on the model.
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The model's name."""
        return self.loaded.info.name

    @property
    def num_layers(self) -> int:
        """Layers of the model."""
        return self.loaded.info.num_layers

    @property
    def num_heads(self) -> int:
        """Heads per layer."""
        return self.loaded.info.num_heads

    @property
    def fingerprint(self) -> str:
        """The model's fingerprint (matched against head profiles)."""
        return self.loaded.info.fingerprint

    @property
    def tokenizer(self):
        """The model's tokenizer, which cuts the document into windows."""
        return self.loaded.tokenizer

    def compute(self, window: Window) -> WindowMatrices:
        """Every head's ``z``, attention and value norms for ``window`` (one forward pass at a time)."""
        from headseg.analysis.capture import TorchBackend

        with self._lock:
            if self._backend is None:
                self._backend = TorchBackend(self.loaded, device=self.device)
            acts = self._backend.capture([window], heads=None, attention=True, norms=True)
        L, H, t = self.num_layers, self.num_heads, len(window)
        return WindowMatrices(
            z=acts.z[0].reshape(L, H, t, -1),
            attn=acts.attn[0].reshape(L, H, t, t),
            fnorm=acts.fnorm[0].reshape(L, H, t),
        )


class DocumentModel:
    """A document cut into windows, with per-window matrices computed lazily and cached.

    ``windows`` may be only the first windows of the document (``total_windows``
    counts them all); ``note`` says so in words.
    """

    def __init__(
        self,
        text: str,
        windows: list[Window],
        source,
        total_windows: int | None = None,
        note: str = "",
        cache_size: int = 8,
    ):
        if not windows:
            raise InputError("the text has no tokens to show")
        self.text = text
        self.windows = list(windows)
        self.source = source
        self.total_windows = int(total_windows if total_windows is not None else len(windows))
        self.note = note
        self.cache_size = max(1, int(cache_size))
        self._cache: OrderedDict[int, WindowMatrices] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def from_text(
        cls,
        text: str,
        source,
        max_tokens: int = WINDOW_TOKENS,
        max_windows: int = DEFAULT_MAX_WINDOWS,
        note: str = "",
        cache_size: int = 8,
    ) -> "DocumentModel":
        """Tokenize ``text`` with the source's tokenizer and keep the first ``max_windows`` windows."""
        if not text.strip():
            raise InputError("empty text (nothing but whitespace)")
        if max_windows < 1:
            raise InputError(f"max_windows must be at least 1 (got {max_windows})")
        windows = make_windows(tokenize(text, source.tokenizer), source.tokenizer, max_tokens=max_tokens)
        total = len(windows)
        notes = [note] if note else []
        if total > max_windows:
            windows = windows[:max_windows]
            notes.append(f"showing the first {max_windows} of {total} windows")
        return cls(text, windows, source, total_windows=total, note="; ".join(notes), cache_size=cache_size)

    @property
    def num_layers(self) -> int:
        """Layers of the source's model."""
        return self.source.num_layers

    @property
    def num_heads(self) -> int:
        """Heads per layer of the source's model."""
        return self.source.num_heads

    def __len__(self) -> int:
        return len(self.windows)

    def window(self, i: int) -> Window:
        """Window ``i``; :class:`InputError` when out of range."""
        if not 0 <= i < len(self.windows):
            raise InputError(f"window {i} is out of range (0..{len(self.windows) - 1})")
        return self.windows[i]

    def is_cached(self, i: int) -> bool:
        """Whether window ``i``'s matrices are computed and cached (showing it is then cheap)."""
        with self._lock:
            return i in self._cache

    def matrices(self, i: int) -> WindowMatrices:
        """All heads of window ``i``, computed on first use (thread-safe)."""
        with self._lock:
            if i in self._cache:
                self._cache.move_to_end(i)
                return self._cache[i]
        m = self.source.compute(self.window(i))
        with self._lock:
            self._cache[i] = m
            self._cache.move_to_end(i)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return m

    def matrix(self, i: int, layer: int, head: int, kind: str) -> np.ndarray:
        """``[T, T]`` matrix of window ``i``, one head, one kind."""
        if not (0 <= layer < self.num_layers and 0 <= head < self.num_heads):
            raise InputError(f"head L{layer}H{head} does not exist ({self.num_layers}x{self.num_heads} model)")
        return self.matrices(i).matrix(layer, head, kind)

    def find_token(self, query: str, window_index: int, start_row: int) -> tuple[int, int] | None:
        """``(window, row)`` of the next token matching ``query``, or None.

        The search starts at row ``start_row`` of window ``window_index``, goes on
        through the later windows and wraps round to the rows before the start.
        Tokens are compared without their word-piece marker and case; in each
        window an exact match beats a token containing ``query``; special tokens
        never match.
        """
        q = strip_marker(query.strip()).lower()
        n = len(self)
        for step in range(n + 1):
            wi = (window_index + step) % n
            w = self.window(wi)
            keys = [strip_marker(t).lower() if not sp else None for t, sp in zip(w.tokens, w.special)]
            first = start_row if step == 0 else 0
            last = len(keys) if step < n else start_row
            hits = [i for i in range(first, last) if keys[i] == q] or [
                i for i in range(first, last) if keys[i] is not None and q in keys[i]
            ]
            if hits:
                return wi, hits[0]
        return None


def spans_to_token_ids(window: Window, spans: list[tuple[int, int]]) -> np.ndarray:
    """Index of the span holding each token of ``window`` (``[T]``, -1 for special tokens).

    Used for the sentence-block overlay, so blocks follow the units the document
    pane shows (segmenter units, or sentences when there is no segmenter).
    """
    if not spans:
        return np.where(window.special, -1, 0).astype(np.int64)
    starts = np.asarray([s for s, _ in spans], dtype=np.int64)
    ids = np.searchsorted(starts, window.offsets[:, 0], side="right") - 1
    return np.where(window.special, -1, ids).astype(np.int64)


def read_document(path: str | os.PathLike, head_bytes: int = DEFAULT_HEAD_BYTES, encoding: str = "utf-8") -> tuple[str, str]:
    """Read a text file for display: ``(text, note)``.

    Files larger than ``head_bytes`` are read only from the start (cut at a line
    break when there is one, and never inside a UTF-8 sequence) and ``note``
    says so.  Empty, binary and undecodable files raise :class:`InputError`.
    """
    # The checks and messages are read_text's: a file that fits is read by it whole.
    size = file_size(path)
    if size <= head_bytes:
        return read_text(Path(path), encoding=encoding, max_bytes=max(head_bytes, 1)), ""
    data = read_head(path, head_bytes)
    cut = data.rfind(b"\n")
    if cut > len(data) // 2:
        data = data[: cut + 1]
    elif encoding.lower().replace("-", "") == "utf8":
        # Drop a multi-byte character cut in half by the byte limit.
        k = len(data)
        while k > 0 and len(data) - k < 4 and (data[k - 1] & 0xC0) == 0x80:
            k -= 1
        if k > 0 and data[k - 1] >= 0xC0:
            data = data[: k - 1]
    text = decode_text(data, str(path), encoding)
    if not text.strip():
        raise InputError(f"{path}: empty input (nothing but whitespace at the start of a {size:,}-byte file)")
    return text, f"{size:,}-byte file: showing its first {len(data):,} bytes"
