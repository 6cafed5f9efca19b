"""Norm-based attention analysis (Kobayashi et al. 2020, "Attention is Not Only a Weight").

The output of head ``h`` at token ``i`` is ``Σ_j α_ij f_h(x_j)`` with
``f_h(x) = (x W^V_h + b^V_h) W^O_h``.  Kobayashi et al. show that the weight
``α_ij`` alone misleads: tokens that get large weights ([SEP], punctuation,
frequent words) often have small ``‖f_h(x_j)‖``, so their actual contribution
``‖α_ij f_h(x_j)‖ = α_ij ‖f_h(x_j)‖`` is small.
"""

from __future__ import annotations

import unicodedata

import numpy as np

# Token categories compared in the paper.  "frequent" is the 30 most frequent
# English word types (function words); a per-corpus frequency list would tie the
# figure to the corpus, which the paper's comparison does not do.
FREQUENT_WORDS = frozenset(
    "the of and to a in is that it for was on as with he be by at his i this had not are but from "
    "or have an they which".split()
)
CATEGORIES = ("cls", "sep", "punct", "frequent", "other")


def strip_marker(tok: str) -> str:
    """A token without its sub-word marker (``##`` WordPiece, ``Ġ`` byte-BPE, ``▁`` SentencePiece)."""
    for p in ("##", "Ġ", "▁"):
        if tok.startswith(p):
            tok = tok[len(p) :]
    return tok


def is_punctuation(tok: str) -> bool:
    """Whether ``tok`` (word-piece marker stripped) is made only of punctuation and symbol characters."""
    t = strip_marker(tok)
    return bool(t) and all(unicodedata.category(c).startswith("P") or c in "`$%&*+<=>^|~" for c in t)


def token_categories(tokens: list[str], special: np.ndarray) -> dict[str, np.ndarray]:
    """Boolean masks ``[T]`` per category; every token is in exactly one category.

    ``cls`` is the first special token, ``sep`` the other special tokens.
    """
    special = np.asarray(special, dtype=bool)
    t = len(tokens)
    cls = np.zeros(t, bool)
    first_special = np.flatnonzero(special)
    if first_special.size and first_special[0] == 0:
        cls[0] = True
    sep = special & ~cls
    punct = np.array([not s and is_punctuation(tok) for tok, s in zip(tokens, special)], dtype=bool)
    freq = np.array(
        [not s and not p and strip_marker(tok).lower() in FREQUENT_WORDS for tok, s, p in zip(tokens, special, punct)],
        dtype=bool,
    )
    other = ~(cls | sep | punct | freq)
    return {"cls": cls, "sep": sep, "punct": punct, "frequent": freq, "other": other}


def norm_weighted_attention(attn: np.ndarray, fnorm: np.ndarray) -> np.ndarray:
    """``‖α_ij f_h(x_j)‖ [..., T, T]`` from ``attn [..., T, T]`` and ``fnorm [..., T]``."""
    return attn * fnorm[..., None, :]


def attention_shares(attn: np.ndarray, fnorm: np.ndarray, masks: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    """Mean share of attention each category receives, weight-based and norm-based.

    ``attn [N, T, T]`` (rows sum to 1), ``fnorm [N, T]`` → for each category
    ``{"weight": [N], "norm": [N]}``: the average over query tokens of the share
    of the row's total (weights, or norms ``α_ij‖f(x_j)‖``) paid to that category.
    """
    contrib = norm_weighted_attention(attn, fnorm)
    contrib = contrib / np.maximum(contrib.sum(axis=-1, keepdims=True), 1e-12)
    out = {}
    for name, m in masks.items():
        out[name] = {
            "weight": attn[..., m].sum(axis=-1).mean(axis=-1),
            "norm": contrib[..., m].sum(axis=-1).mean(axis=-1),
        }
    return out


def coefficient_of_variation(fnorm: np.ndarray) -> np.ndarray:
    """CV of ``‖f_h(x)‖`` over tokens: ``fnorm [N, T]`` → ``[N]``."""
    mean = fnorm.mean(axis=-1)
    return fnorm.std(axis=-1) / np.maximum(mean, 1e-12)


class NormSummary:
    """Streaming accumulator of the norm analysis over many windows.

    Per head: CV of ``‖f(x)‖`` (averaged over windows), and weight- vs norm-based
    attention shares per token category, averaged over windows.
    """

    def __init__(self, heads):
        self.heads = tuple(heads)
        n = len(self.heads)
        self.count = 0
        self.cv = np.zeros(n)
        self.shares = {c: {"weight": np.zeros(n), "norm": np.zeros(n)} for c in CATEGORIES}

    def add(self, attn: np.ndarray, fnorm: np.ndarray, tokens: list[str], special: np.ndarray) -> None:
        """Add one unpadded window: ``attn [N, T, T]``, ``fnorm [N, T]``."""
        masks = token_categories(tokens, special)
        shares = attention_shares(attn.astype(np.float64), fnorm.astype(np.float64), masks)
        self.cv += coefficient_of_variation(fnorm.astype(np.float64))
        for c in CATEGORIES:
            for k in ("weight", "norm"):
                self.shares[c][k] += shares[c][k]
        self.count += 1

    def state(self) -> dict:
        """The sums so far as JSON-ready lists (for a checkpoint); :meth:`load_state` reads it back."""
        return {
            "count": self.count,
            "cv": self.cv.tolist(),
            "shares": {c: {k: v.tolist() for k, v in d.items()} for c, d in self.shares.items()},
        }

    def load_state(self, state: dict) -> None:
        """Continue from a :meth:`state`."""
        self.count = int(state["count"])
        self.cv = np.asarray(state["cv"], dtype=np.float64)
        self.shares = {c: {k: np.asarray(v, np.float64) for k, v in d.items()} for c, d in state["shares"].items()}

    def result(self) -> dict:
        """Per-head means over the windows added: ``cv_fnorm [N]`` and the weight/norm ``shares`` per category."""
        n = max(self.count, 1)
        return {
            "windows": self.count,
            "cv_fnorm": (self.cv / n).tolist(),
            "shares": {c: {k: (v / n).tolist() for k, v in d.items()} for c, d in self.shares.items()},
        }
