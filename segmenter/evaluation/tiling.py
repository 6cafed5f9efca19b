"""TextTiling's scoring on unit embeddings: block similarity at each gap, depth scores, boundary picking.

Hearst (1997): compare the blocks of units on either side of every gap
(:func:`block_similarity`), score each gap by how far similarity climbs on
both sides before it falls again (:func:`depth_scores`), and cut at the
deepest gaps (:func:`pick_boundaries`).  For ``N`` units and a block of ``w``
units: block similarity is O(N · d) with prefix sums over ``emb [N, d]``;
a gap's depth climbs at most N gaps (a long monotone run), so depth scores
are O(N²) at worst.
The embedding-cosine baseline (:mod:`.baselines`) is built on these.
"""

from __future__ import annotations

import numpy as np


def depth_scores(sim: np.ndarray) -> np.ndarray:
    """TextTiling depth of each gap ``[G]`` from its similarity ``sim [G]``.

    Depth = (highest similarity reached climbing left while it rises - sim) +
    (same to the right), as in Hearst (1997).
    """
    g = len(sim)
    depth = np.zeros(g)
    for i in range(g):
        left = sim[i]
        j = i
        while j > 0 and sim[j - 1] >= left:
            left = sim[j - 1]
            j -= 1
        right = sim[i]
        j = i
        while j < g - 1 and sim[j + 1] >= right:
            right = sim[j + 1]
            j += 1
        depth[i] = (left - sim[i]) + (right - sim[i])
    return depth


def pick_boundaries(sim: np.ndarray, k: int | None) -> list[int]:
    """Unit indices opening segments from the gap similarities ``sim [n-1]``.

    With k: the ``k - 1`` deepest gaps (ties: the lower similarity, then the
    earlier gap).  Without: the valleys (local minima of similarity with a
    positive depth) deeper than mean - std/2 of the valley depths, Hearst's
    liberal cutoff taken over the candidate boundaries.
    """
    if len(sim) == 0:
        return []
    depth = depth_scores(sim)
    if k is not None:
        order = sorted(range(len(sim)), key=lambda i: (-depth[i], sim[i], i))
        return sorted(i + 1 for i in order[: max(k - 1, 0)])
    last = len(sim) - 1
    valleys = [
        i for i in range(len(sim))
        if depth[i] > 0 and (i == 0 or sim[i] <= sim[i - 1]) and (i == last or sim[i] <= sim[i + 1])
    ]
    if not valleys:
        return []
    vd = depth[valleys]
    cutoff = vd.mean() - vd.std() / 2
    return [i + 1 for i in valleys if depth[i] > cutoff]


def block_similarity(emb: np.ndarray, window: int) -> np.ndarray:
    """Cosine between the mean embedding of the ``window`` units before each gap and of those after ``[N-1]``.

    ``emb [N, d]``; near the edges the blocks are shorter.  ``window=1``
    compares adjacent units only.
    """
    n = emb.shape[0]
    csum = np.vstack([np.zeros((1, emb.shape[1])), np.cumsum(emb, axis=0)])
    out = np.zeros(max(n - 1, 0))
    for g in range(n - 1):
        a, b = max(0, g + 1 - window), min(n, g + 1 + window)
        left = csum[g + 1] - csum[a]
        right = csum[b] - csum[g + 1]
        den = np.linalg.norm(left) * np.linalg.norm(right)
        out[g] = float(left @ right / den) if den > 0 else 0.0
    return out
