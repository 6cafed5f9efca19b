"""One window's per-head matrices: Z, S = Z·Zᵀ, attention and value norms for every head."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .capture import TorchBackend
from .errors import InputError
from .model import load_model
from .similarity import context_similarity
from .text import WINDOW_TOKENS, windows_from_text


@dataclass
class Inspection:
    """Everything ``inspect`` computes for one window, all heads.

    ``z [L, H, T, d]``, ``s [L, H, T, T]``, ``attn [L, H, T, T]``, ``fnorm [L, H, T]``.
    """

    window: object
    z: np.ndarray
    s: np.ndarray
    attn: np.ndarray
    fnorm: np.ndarray
    fingerprint: str
    n_windows: int


def inspect_text(text: str, model=None, window: int = 0, max_tokens: int = WINDOW_TOKENS, cosine: bool = False,
                 loaded=None, device: str | None = "cpu") -> Inspection:
    """Every head's matrices on window ``window`` of ``text`` (torch backend: hooks on every head).

    ``max_tokens`` (window size, special tokens included) must fit the model's
    position table; it and ``window`` are checked before any weight is used.
    """
    loaded = loaded or load_model(model, weights=False)
    limit = loaded.info.max_positions
    if not 3 <= max_tokens <= limit:
        raise InputError(f"max_tokens {max_tokens} is outside 3..{limit}, the window sizes of model "
                         f"{loaded.info.name}")
    windows = windows_from_text(text, loaded.tokenizer, max_tokens=max_tokens)
    if not windows:
        raise InputError("the text has no tokens")
    if not 0 <= window < len(windows):
        raise InputError(f"--window {window} is out of range: the text has {len(windows)} window(s)")
    w = windows[window]
    acts = TorchBackend(loaded, device=device).capture([w], heads=None, attention=True, norms=True)
    L, H = loaded.info.num_layers, loaded.info.num_heads
    t = len(w)
    z = acts.z[0].reshape(L, H, t, -1)
    return Inspection(
        window=w,
        z=z,
        s=context_similarity(z, cosine=cosine),
        attn=acts.attn[0].reshape(L, H, t, t),
        fnorm=acts.fnorm[0].reshape(L, H, t),
        fingerprint=loaded.info.fingerprint,
        n_windows=len(windows),
    )


def top_pairs(s: np.ndarray, k: int) -> list[tuple[int, int, float]]:
    """The ``k`` largest off-diagonal entries of a symmetric matrix, each pair once (i < j)."""
    iu, ju = np.triu_indices(s.shape[0], k=1)
    vals = s[iu, ju]
    order = np.argsort(-vals, kind="stable")[:k]
    return [(int(iu[o]), int(ju[o]), float(vals[o])) for o in order]


def summarise(s: np.ndarray, window, k: int) -> dict:
    """Summary of one head's ``s [T, T]`` on ``window``: off-diagonal min/max/mean/std, the ``k`` top pairs
    (``top_pairs``), their mean distance and share within one sentence, and the mean distance of all pairs.
    """
    t = s.shape[0]
    iu, ju = np.triu_indices(t, k=1)
    vals = s[iu, ju]
    pairs = top_pairs(s, k)
    sent = window.sentence_ids
    same = [sent[i] == sent[j] and sent[i] >= 0 for i, j, _ in pairs]
    return {
        "tokens": t,
        "min": float(vals.min()) if vals.size else 0.0,
        "max": float(vals.max()) if vals.size else 0.0,
        "mean": float(vals.mean()) if vals.size else 0.0,
        "std": float(vals.std()) if vals.size else 0.0,
        "mean_distance_top": float(np.mean([j - i for i, j, _ in pairs])) if pairs else 0.0,
        "mean_distance_all": float(np.mean(ju - iu)) if vals.size else 0.0,
        "same_sentence_top": float(np.mean(same)) if pairs else 0.0,
        "top_pairs": pairs,
    }
