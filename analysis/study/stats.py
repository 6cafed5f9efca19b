"""Streaming statistics of the context similarity study (the numbers behind ``headseg study``).

Everything here works on fixed-size accumulators: histograms over token
distance ``0..seq_len-1`` and per-head sums, never per-sample matrices, so
memory is the same for 500 or 500,000 samples.  Definitions (see docs/study.md):

* Pairs are unordered pairs ``i < j`` of *content* tokens of one window
  (special tokens such as [CLS]/[SEP] are left out, since their positions are
  fixed and they belong to no sentence).  ``P = C(C-1)/2`` pairs for ``C``
  content tokens; the diagonal of ``S`` is never a pair.
* High-similarity element, "quantile" variant: one of the ``k = ceil(f·P)``
  pairs with the largest ``S_ij`` of that matrix (``f = top_fraction``), i.e.
  ``S_ij`` at or above the matrix's ``1 - f`` quantile (ties broken by
  position, so exactly ``k`` elements).
* "attention" variant (the paper's restriction): a quantile element that also
  lies in the high-attention region of the normalised attention map: its
  symmetrised attention ``a_ij = (α_ij + α_ji) / 2`` (rows of ``α`` are the
  softmax-normalised attention over the window's ``T`` tokens), normalised by
  the uniform level ``1/T``, is at least ``attention_threshold`` (default 1:
  the pair gets at least uniform attention).
* Chance baselines condition on distance: ``p_same(d)`` is the share of *all*
  pairs at distance ``d`` in the same sentence (pooled over the corpus); a
  head's chance within-sentence share is ``Σ_d n_high(d) p_same(d) / Σ_d n_high(d)``,
  i.e. what its distance distribution alone would give.  Identical-token
  chance is built the same way from ``p_ident(d)``.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import HeadsegError
from ..norms import strip_marker, token_categories

VARIANTS = ("quantile", "attention")
#: token categories for the attention analysis; every token is in exactly one.
CATEGORIES = ("cls", "sep", "sentence_punct", "clause_punct", "other_punct", "frequent", "other")
#: the categories that count as separators.  [SEP] ends the window; sentence
#: punctuation ends sentences and clause punctuation delimits clauses — the
#: units a segmenter cuts at.  [CLS] is reported but not counted: it opens the
#: window and is the classic "no-op" attention sink (Clark et al. 2019).
SEPARATOR_CATEGORIES = ("sep", "sentence_punct", "clause_punct")
SENTENCE_PUNCT = frozenset({".", "!", "?", "…", "...", "。", "！", "？"})
CLAUSE_PUNCT = frozenset({",", ";", ":", "—", "–", "，", "；", "："})


def token_category_index(tokens: list[str], special: np.ndarray) -> np.ndarray:
    """Category index into :data:`CATEGORIES` for each token: ``[T]`` int64."""
    base = token_categories(tokens, special)
    out = np.full(len(tokens), CATEGORIES.index("other"), dtype=np.int64)
    out[base["frequent"]] = CATEGORIES.index("frequent")
    for i in np.flatnonzero(base["punct"]):
        t = strip_marker(tokens[i])
        if t in SENTENCE_PUNCT:
            out[i] = CATEGORIES.index("sentence_punct")
        elif t in CLAUSE_PUNCT:
            out[i] = CATEGORIES.index("clause_punct")
        else:
            out[i] = CATEGORIES.index("other_punct")
    out[base["sep"]] = CATEGORIES.index("sep")
    out[base["cls"]] = CATEGORIES.index("cls")
    return out


def top_k_count(p: int, fraction: float) -> int:
    """Number of high elements among ``p`` pairs: ``ceil(fraction·p)``, at least 1."""
    return max(1, int(math.ceil(fraction * p - 1e-9)))


def distinct_count(values: np.ndarray, axis: int) -> np.ndarray:
    """Number of distinct values along ``axis``."""
    v = np.sort(values, axis=axis)
    return 1 + (np.diff(v, axis=axis) != 0).sum(axis=axis)


def focus_tokens(deg: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Most common token id among high elements, per head: ``deg [..., C]``, ``ids [C]`` → ``[...]``.

    ``deg[..., t]`` counts the high elements that involve position ``t``; a token
    id's count is the sum over its positions.  Ties go to the smaller token id.
    """
    uniq, inv = np.unique(ids, return_inverse=True)
    lead = deg.shape[:-1]
    rows = int(np.prod(lead, dtype=np.int64))
    v = uniq.shape[0]
    key = (np.arange(rows)[:, None] * v + inv[None, :]).reshape(-1)
    per_token = np.bincount(key, weights=deg.reshape(rows, -1).reshape(-1).astype(np.float64), minlength=rows * v)
    return uniq[np.argmax(per_token.reshape(rows, v), axis=-1)].reshape(lead)


class StudyAccumulator:
    """All the running sums of the study; ``state()``/``load_state()`` round-trip exactly.

    Shapes: ``N`` heads (all heads, layer-major), ``D = seq_len`` distances,
    ``V = 2`` variants, ``K`` token categories, ``L`` layers.
    """

    def __init__(
        self,
        num_layers: int,
        num_heads: int,
        seq_len: int,
        vocab_size: int,
        top_fraction: float = 0.05,
        attention_threshold: float = 1.0,
        null_permutations: int = 4,
        seed: int = 0,
    ):
        if not 0.0 < top_fraction < 1.0:
            raise HeadsegError(f"--top-fraction must be between 0 and 1 (got {top_fraction})")
        if not attention_threshold >= 0.0:
            raise HeadsegError(f"--attention-threshold must be at least 0 (got {attention_threshold})")
        if null_permutations < 1:
            raise HeadsegError("--null-permutations must be at least 1")
        self.num_layers, self.num_heads = num_layers, num_heads
        self.seq_len = seq_len
        self.vocab_size = vocab_size
        self.top_fraction = top_fraction
        self.attention_threshold = attention_threshold
        self.null_permutations = null_permutations
        self.seed = seed
        n, d, v, k = num_layers * num_heads, seq_len, len(VARIANTS), len(CATEGORIES)
        self.arrays = {
            # [D] all pairs by distance; same sentence; identical token ids
            "pairs_all": np.zeros(d, np.int64),
            "pairs_same": np.zeros(d, np.int64),
            "pairs_ident": np.zeros(d, np.int64),
            # [V, N, D] high elements by distance, and those in one sentence / identical
            "high_all": np.zeros((v, n, d), np.int64),
            "high_same": np.zeros((v, n, d), np.int64),
            "high_ident": np.zeros((v, n, d), np.int64),
            # [N, vocab] how often each token was a head's focus token in a window
            "focus_counts": np.zeros((n, vocab_size), np.int32),
            # [L] per-layer uniqueness of focus tokens: observed and permutation null, summed
            "unique_obs": np.zeros(num_layers, np.float64),
            "unique_null": np.zeros(num_layers, np.float64),
            "unique_null_ge": np.zeros(num_layers, np.int64),
            # [N, K] attention share per category summed over query tokens (weight, norm)
            "share_weight": np.zeros((n, k), np.float64),
            "share_norm": np.zeros((n, k), np.float64),
            # [N, K] sum of ‖f(x)‖ per category and [K] token counts
            "fnorm_sum": np.zeros((n, k), np.float64),
            "fnorm_count": np.zeros(k, np.int64),
            # scalars
            "queries": np.zeros((), np.int64),
            "windows": np.zeros((), np.int64),
            "batches": np.zeros((), np.int64),
        }

    def settings(self) -> dict:
        """The constructor arguments: an accumulator made with them adds up the same way."""
        return {"num_layers": self.num_layers, "num_heads": self.num_heads, "seq_len": self.seq_len,
                "vocab_size": self.vocab_size, "top_fraction": self.top_fraction,
                "attention_threshold": self.attention_threshold, "null_permutations": self.null_permutations,
                "seed": self.seed}

    def merge(self, other: "StudyAccumulator") -> "StudyAccumulator":
        """Add ``other``'s sums into this one (the shards of a distributed study); returns ``self``.

        Every array is a sum or a count over windows, so merging the
        accumulators of disjoint shards gives the accumulator of their union
        (exactly for the counts, up to float summation order for the sums).
        """
        if other.settings() != self.settings():
            mine, theirs = self.settings(), other.settings()
            k = next(k for k in mine if mine[k] != theirs[k])
            raise HeadsegError(f"cannot merge study accumulators with different {k} ({mine[k]} vs {theirs[k]})")
        for k, v in self.arrays.items():
            v += other.arrays[k]
        return self

    # -- persistence -------------------------------------------------------
    def state(self) -> dict[str, np.ndarray]:
        """A copy of every array (for a checkpoint or a Ray shard's result)."""
        return {k: v.copy() for k, v in self.arrays.items()}

    def load_state(self, state) -> None:
        """Replace the arrays by a :meth:`state`; :class:`HeadsegError` when one is missing or misshapen."""
        for k, v in self.arrays.items():
            if k not in state:
                raise HeadsegError(f"checkpoint lacks '{k}'")
            got = np.asarray(state[k])
            if got.shape != v.shape:
                raise HeadsegError(f"checkpoint '{k}' has shape {got.shape}, expected {v.shape}")
            self.arrays[k] = got.astype(v.dtype, copy=True)

    def __getitem__(self, key: str) -> np.ndarray:
        return self.arrays[key]

    # -- adding data -------------------------------------------------------
    def add_pairs(self, z, attn, ids: np.ndarray, sent: np.ndarray, sample_index: np.ndarray, window_len: int) -> None:
        """Add ``G`` windows of equal content length ``C`` and total length ``window_len``.

        ``z [G, N, C, d]`` context vectors and ``attn [G, N, C, C]`` attention,
        both restricted to content tokens (numpy or torch), ``ids [G, C]`` token
        ids, ``sent [G, C]`` sentence ids, ``sample_index [G]`` the samples'
        global indices (they seed the permutation null).  ``window_len`` (tokens
        including specials) sets the uniform attention level ``1 / window_len``.
        """
        import torch

        zt = torch.as_tensor(z, dtype=torch.float32)
        g, n, c, _ = zt.shape
        if n != self.num_layers * self.num_heads:
            raise HeadsegError(f"expected {self.num_layers * self.num_heads} heads, got {n}")
        if c < 2:
            self.arrays["windows"] += g
            return
        iu, ju = np.triu_indices(c, k=1)
        flat = iu * c + ju
        dist = ju - iu
        p = iu.shape[0]
        k = top_k_count(p, self.top_fraction)
        # All in torch (batched, multi-threaded) up to the k high elements of
        # each matrix; numpy only ever touches those.  The attention is read at
        # the high elements alone, straight from the (possibly strided) input.
        s = (zt @ zt.transpose(-1, -2)).reshape(g * n, c * c)
        s_pairs = s.index_select(1, torch.from_numpy(flat))  # [G*N, P]
        iq = torch.topk(s_pairs, k, dim=1, sorted=False).indices.numpy().reshape(g, n, k)  # pair indices
        del s, s_pairs
        at = attn.numpy() if isinstance(attn, torch.Tensor) else np.asarray(attn)
        gi3 = np.arange(g)[:, None, None]
        ni3 = np.arange(n)[None, :, None]
        qi, qj = iu[iq], ju[iq]
        a_sym = 0.5 * (at[gi3, ni3, qi, qj].astype(np.float32) + at[gi3, ni3, qj, qi].astype(np.float32))
        in_att = a_sym * window_len >= self.attention_threshold
        iq2 = iq.reshape(g * n, k)
        ids = np.asarray(ids)
        sent = np.asarray(sent)
        same = sent[:, iu] == sent[:, ju]  # [G, P]
        ident = ids[:, iu] == ids[:, ju]
        same_q = same[gi3, iq]  # [G, N, k]
        ident_q = ident[gi3, iq]
        d = self.seq_len
        key = np.arange(n)[None, :, None] * d + dist[iq]  # head * D + distance

        def hist(sel) -> np.ndarray:  # sel [G, N, k] bool -> [N, D] counts
            return np.bincount(key[sel], minlength=n * d).reshape(n, d)

        a = self.arrays
        a["pairs_all"] += np.bincount(dist, minlength=d) * g
        a["pairs_same"] += np.bincount(dist, weights=same.sum(0), minlength=d).astype(np.int64)
        a["pairs_ident"] += np.bincount(dist, weights=ident.sum(0), minlength=d).astype(np.int64)
        ones = np.ones((g, n, k), dtype=bool)
        for v, sel in enumerate((ones, in_att)):
            a["high_all"][v] += hist(sel)
            a["high_same"][v] += hist(sel & same_q)
            a["high_ident"][v] += hist(sel & ident_q)
        rows = (np.arange(g * n)[:, None] * c)
        deg = np.bincount((rows + iu[iq2]).reshape(-1), minlength=g * n * c)
        deg += np.bincount((rows + ju[iq2]).reshape(-1), minlength=g * n * c)
        self._add_focus(deg.reshape(g, n, c), ids, np.asarray(sample_index))
        a["windows"] += g

    def _add_focus(self, deg: np.ndarray, ids: np.ndarray, sample_index: np.ndarray) -> None:
        """``deg [G, N, C]`` high elements per position, ``ids [G, C]``."""
        g, n, c = deg.shape
        L, H, R = self.num_layers, self.num_heads, self.null_permutations
        a = self.arrays
        base = np.broadcast_to(np.arange(c), (n, R, c))
        for b in range(g):
            top = focus_tokens(deg[b], ids[b])  # [N]
            np.add.at(a["focus_counts"], (np.arange(n), top), 1)
            obs = distinct_count(top.reshape(L, H), axis=1) / H  # [L]
            # Null: each head's degree vector permuted over positions on its own,
            # so heads keep their own concentration but lose any shared focus.
            rng = np.random.default_rng([self.seed, int(sample_index[b])])
            perms = rng.permuted(base, axis=-1)
            deg_null = np.take_along_axis(np.broadcast_to(deg[b][:, None, :], (n, R, c)), perms, axis=-1)
            top_null = focus_tokens(deg_null, ids[b])  # [N, R]
            null = distinct_count(top_null.reshape(L, H, R), axis=1).mean(axis=-1) / H  # [L]
            a["unique_obs"] += obs
            a["unique_null"] += null
            a["unique_null_ge"] += (null >= obs).astype(np.int64)

    def add_attention(self, attn: np.ndarray, fnorm: np.ndarray, cats: np.ndarray, mask: np.ndarray) -> None:
        """Add a padded batch: ``attn [B, N, T, T]``, ``fnorm [B, N, T]``, ``cats [B, T]`` (category index), ``mask [B, T]``.

        Per query token, the share of its attention paid to each category, by
        weight ``Σ_j∈cat α_ij`` and by norm ``Σ_j∈cat α_ij‖f(x_j)‖ / Σ_j α_ij‖f(x_j)‖``.
        """
        import torch

        k = len(CATEGORIES)
        mask_t = torch.as_tensor(mask, dtype=torch.bool)
        onehot = torch.zeros(cats.shape + (k,), dtype=torch.float32)
        cats_t = torch.as_tensor(cats).clamp(min=0)
        onehot.scatter_(-1, cats_t[..., None], 1.0)
        onehot *= mask_t[..., None]
        at = torch.as_tensor(attn, dtype=torch.float32)
        fn = torch.as_tensor(fnorm, dtype=torch.float32)
        b, n = fn.shape[:2]
        # weight and norm shares from one batched matmul over [onehot | fnorm·onehot]
        rhs = torch.cat([onehot[:, None].expand(b, n, -1, -1), fn[..., None] * onehot[:, None]], dim=-1)
        both = at @ rhs  # [B, N, T, 2K]
        w, num = both[..., :k], both[..., k:]
        nrm = num / num.sum(-1, keepdim=True).clamp(min=1e-12)
        q = mask_t[:, None, :, None].to(torch.float64)
        a = self.arrays
        a["share_weight"] += (w.double() * q).sum((0, 2)).numpy()
        a["share_norm"] += (nrm.double() * q).sum((0, 2)).numpy()
        a["fnorm_sum"] += torch.einsum("bnt,btk->nk", fn.double(), onehot.double()).numpy()
        a["fnorm_count"] += onehot.sum((0, 1)).to(torch.int64).numpy()
        a["queries"] += int(mask_t.sum())


# -- summaries ---------------------------------------------------------------


def _safe_div(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return np.divide(a, b, out=np.zeros(np.broadcast(a, b).shape), where=b > 0)


def distance_summary(hist: np.ndarray, short_range: int) -> dict[str, np.ndarray]:
    """``hist [..., D]`` counts by distance → mean distance and share with ``1 <= d <= short_range``."""
    hist = np.asarray(hist, dtype=np.float64)
    d = np.arange(hist.shape[-1])
    total = hist.sum(-1)
    return {
        "count": total,
        "mean_distance": _safe_div((hist * d).sum(-1), total),
        "short_share": _safe_div(hist[..., 1 : short_range + 1].sum(-1), total),
    }


def conditional_chance(high_hist: np.ndarray, cond_all: np.ndarray, pairs_all: np.ndarray) -> np.ndarray:
    """Chance share given the distance distribution: ``Σ_d n(d) p(d) / Σ_d n(d)``, ``p(d) = cond_all(d)/pairs_all(d)``."""
    p = _safe_div(cond_all, pairs_all)
    high_hist = np.asarray(high_hist, dtype=np.float64)
    return _safe_div((high_hist * p).sum(-1), high_hist.sum(-1))


def summarise(acc: StudyAccumulator, short_range: int) -> dict:
    """Per-head and per-layer numbers from the accumulator (plain floats and lists)."""
    a = acc.arrays
    L, H = acc.num_layers, acc.num_heads
    base = distance_summary(a["pairs_all"], short_range)
    total_pairs = float(a["pairs_all"].sum())
    out = {
        "baseline": {
            "pairs": int(total_pairs),
            "mean_distance": float(base["mean_distance"]),
            "short_share": float(base["short_share"]),
            "same_sentence_share": float(_safe_div(a["pairs_same"].sum(), total_pairs)),
            "identical_share": float(_safe_div(a["pairs_ident"].sum(), total_pairs)),
        },
        "variants": {},
    }
    for v, name in enumerate(VARIANTS):
        hist = a["high_all"][v]
        ds = distance_summary(hist, short_range)
        within = _safe_div(a["high_same"][v].sum(-1), hist.sum(-1))
        within_chance = conditional_chance(hist, a["pairs_same"], a["pairs_all"])
        ident = _safe_div(a["high_ident"][v].sum(-1), hist.sum(-1))
        ident_chance = conditional_chance(hist, a["pairs_ident"], a["pairs_all"])
        ident_ds = distance_summary(a["high_ident"][v], short_range)
        layer_hist = hist.reshape(L, H, -1).sum(1)
        lds = distance_summary(layer_hist, short_range)
        lsame = a["high_same"][v].reshape(L, H, -1).sum((1, 2))
        lchance = conditional_chance(layer_hist, a["pairs_same"], a["pairs_all"])
        out["variants"][name] = {
            "count": ds["count"].tolist(),
            "mean_distance": ds["mean_distance"].tolist(),
            "short_share": ds["short_share"].tolist(),
            "within_sentence": within.tolist(),
            "within_chance": within_chance.tolist(),
            "within_lift": _safe_div(within, within_chance).tolist(),
            "identical": ident.tolist(),
            "identical_chance": ident_chance.tolist(),
            "identical_lift": _safe_div(ident, ident_chance).tolist(),
            "identical_mean_distance": ident_ds["mean_distance"].tolist(),
            "layers": {
                "mean_distance": lds["mean_distance"].tolist(),
                "short_share": lds["short_share"].tolist(),
                "within_sentence": _safe_div(lsame, layer_hist.sum(-1)).tolist(),
                "within_chance": lchance.tolist(),
            },
        }
    q = out["variants"]["quantile"]["count"]
    out["variants"]["attention"]["overlap"] = _safe_div(out["variants"]["attention"]["count"], q).tolist()
    queries = float(a["queries"])
    sw = _safe_div(a["share_weight"], queries)
    sn = _safe_div(a["share_norm"], queries)
    sep_idx = [CATEGORIES.index(c) for c in SEPARATOR_CATEGORIES]
    out["attention"] = {
        "categories": list(CATEGORIES),
        "share_weight": sw.tolist(),
        "share_norm": sn.tolist(),
        "separator_weight": sw[:, sep_idx].sum(-1).tolist(),
        "separator_norm": sn[:, sep_idx].sum(-1).tolist(),
        "fnorm_mean": _safe_div(a["fnorm_sum"], a["fnorm_count"][None, :]).tolist(),
        "token_counts": a["fnorm_count"].tolist(),
    }
    w = float(a["windows"])
    fc = a["focus_counts"]
    top_ids = fc.argmax(-1)
    out["focus"] = {
        "top_token_id": top_ids.tolist(),
        "top_token_share": _safe_div(fc.max(-1), fc.sum(-1)).tolist(),
        "unique_observed": _safe_div(a["unique_obs"], w).tolist(),
        "unique_null": _safe_div(a["unique_null"], w).tolist(),
        # share of windows where the null was at least as unique: a one-sided
        # per-window p-value averaged over windows
        "null_at_least_observed": _safe_div(a["unique_null_ge"], w).tolist(),
    }
    return out
