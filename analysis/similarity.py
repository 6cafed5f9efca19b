"""Context similarity matrices ``S_h = Z_h Z_hᵀ`` (Halevi et al.).

The paper's definition is the plain dot product with the diagonal set to zero;
cosine similarity is available but never the default, because the norms of the
context vectors are part of what the heads encode.
"""

from __future__ import annotations

import numpy as np

from .errors import HeadsegError


def context_similarity(z: np.ndarray, mask: np.ndarray | None = None, cosine: bool = False) -> np.ndarray:
    """Similarity matrices of context vectors.

    ``z [..., T, d]`` → ``S [..., T, T]`` with ``S[i, j] = z_i · z_j`` (or the cosine),
    ``S[i, i] = 0``.  With ``mask [..., T]`` (True = real token) rows and columns of
    padding are zero, so a padded matrix equals the unpadded one embedded in zeros.
    """
    z = np.asarray(z, dtype=np.float32)
    if z.ndim < 2:
        raise HeadsegError(f"context vectors need shape [..., T, d], got {z.shape}")
    if cosine:
        n = np.linalg.norm(z, axis=-1, keepdims=True)
        z = z / np.maximum(n, 1e-12)
    s = z @ np.swapaxes(z, -1, -2)
    t = s.shape[-1]
    idx = np.arange(t)
    s[..., idx, idx] = 0.0
    if mask is not None:
        m = np.asarray(mask, dtype=bool)
        if m.shape[-1] != t:
            raise HeadsegError(f"mask length {m.shape[-1]} does not match {t} tokens")
        s = s * (m[..., :, None] & m[..., None, :])
    return s


def head_similarities(acts, b: int, cosine: bool = False) -> np.ndarray:
    """``S [N, T_b, T_b]`` for every captured head of window ``b`` (unpadded)."""
    t = int(acts.lengths[b])
    return context_similarity(acts.z[b, :, :t], cosine=cosine)
