"""Per-head statistics for the layer × head grid: ``{stat name: [L, H] array}``.

Two origins: a study report (``headseg study``'s ``report.json``, whose schema is
read loosely, see :func:`load_report_stats`), or the current document itself
(:func:`document_statistics`), so the grid is never empty.
"""

from __future__ import annotations

import os

import numpy as np

from headseg.analysis.errors import InputError
from headseg.analysis.reading import read_json
from headseg.analysis.norms import strip_marker

#: Display names of the statistics computed from the document, in grid order.
DOC_STATS = ("separator focus", "within-sentence share", "repetition", "mean distance")


def top_pairs_per_head(s: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices ``(i, j)`` (each ``[N, k]``, ``i < j``) of the ``k`` largest entries above the diagonal.

    ``s [N, n, n]``.  Ties are broken by position (a stable sort), the same
    order as :func:`headseg.analysis.inspect.top_pairs`.
    """
    n = s.shape[-1]
    iu, ju = np.triu_indices(n, k=1)
    vals = s[:, iu, ju]
    order = np.argsort(-vals, axis=-1, kind="stable")[:, :k]
    return iu[order], ju[order]


def window_statistics(window, m, k: int = 10) -> dict[str, np.ndarray]:
    """Statistics of one window, each ``[L, H]``.

    * separator focus: attention paid by content tokens to special tokens
      ([CLS]/[SEP]), averaged over content query tokens;
    * within-sentence share, repetition, mean distance: over the ``k`` most
      similar pairs of content tokens (context similarity S), the share in the
      same sentence, the share of identical tokens, and the mean distance in
      tokens.
    """
    L, H = m.attn.shape[:2]
    content = window.content
    special = np.asarray(window.special, bool)
    attn = m.attn.reshape(L * H, *m.attn.shape[2:])
    sep = attn[:, content][:, :, special].sum(axis=-1).mean(axis=-1) if content.size else np.zeros(L * H)
    out = {"separator focus": sep.reshape(L, H)}
    n = content.size
    if n < 2:
        for name in DOC_STATS[1:]:
            out[name] = np.zeros((L, H))
        return out
    s = m.s.reshape(L * H, *m.s.shape[2:])[:, content][:, :, content]
    i, j = top_pairs_per_head(s, min(k, n * (n - 1) // 2))
    sent = np.asarray(window.sentence_ids)[content]
    toks = np.asarray([strip_marker(window.tokens[c]).lower() for c in content])
    out["within-sentence share"] = (sent[i] == sent[j]).mean(axis=-1).reshape(L, H)
    out["repetition"] = (toks[i] == toks[j]).mean(axis=-1).reshape(L, H)
    out["mean distance"] = (j - i).mean(axis=-1).reshape(L, H).astype(np.float64)
    return out


def document_statistics(doc, max_windows: int = 4, k: int = 10, windows=None) -> dict[str, np.ndarray]:
    """Mean of :func:`window_statistics` over the first ``max_windows`` windows of ``doc``."""
    idx = list(windows) if windows is not None else list(range(min(max_windows, len(doc))))
    acc: dict[str, np.ndarray] = {}
    for i in idx:
        for name, v in window_statistics(doc.window(i), doc.matrices(i), k=k).items():
            acc[name] = acc.get(name, 0.0) + np.asarray(v, np.float64)
    return {name: acc[name] / max(len(idx), 1) for name in DOC_STATS if name in acc}


def _as_grid(value, num_layers: int, num_heads: int) -> np.ndarray | None:
    """``value`` as a float ``[L, H]`` array, or None when it is not one."""
    if not isinstance(value, list) or len(value) != num_layers:
        return None
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if arr.shape != (num_layers, num_heads):
        return None
    return arr


def _pretty(key: str) -> str:
    return key.replace("_", " ").strip()


#: Per-head lists of ``headseg study``'s report.json (schema 1: flat, layer-major,
#: index ``layer * num_heads + head``) shown first, under these names.
STUDY_STATS = (
    ("separator focus (norm)", ("attention", "separator_norm")),
    ("separator focus (weight)", ("attention", "separator_weight")),
    ("within-sentence share", ("variants", "quantile", "within_sentence")),
    ("within-sentence lift", ("variants", "quantile", "within_lift")),
    ("repetition", ("variants", "quantile", "identical")),
    ("repetition lift", ("variants", "quantile", "identical_lift")),
    ("mean distance", ("variants", "quantile", "mean_distance")),
    ("selection score", ("selection", "score")),
    ("focus token share", ("focus", "top_token_share")),
)
#: Sections of the study report whose other flat per-head lists are offered too.
STUDY_SECTIONS = ("variants", "attention", "selection", "focus")


def _flat_grid(value, num_layers: int, num_heads: int) -> np.ndarray | None:
    """A flat layer-major list of ``L * H`` numbers as ``[L, H]``, else None."""
    if not isinstance(value, list) or len(value) != num_layers * num_heads:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return None
    return np.asarray(value, dtype=np.float64).reshape(num_layers, num_heads)


def extract_per_head(report, num_layers: int, num_heads: int) -> dict[str, np.ndarray]:
    """Per-head statistics found in a study report (any JSON value), each ``[L, H]``.

    Recognised, in this order:

    * the flat layer-major lists of ``headseg study``'s report (see
      :data:`STUDY_STATS`), then its other flat per-head lists of length
      ``L * H`` under ``variants`` / ``attention`` / ``selection`` / ``focus``;
    * ``"per_head": {stat: [[...] * H] * L}`` anywhere;
    * ``"per_head"`` or ``"heads"``: ``[{"layer": l, "head": h, stat: value, ...}]``,
      numeric fields becoming statistics (NaN for heads not listed).

    Arrays of another shape are skipped (they belong to another model).  A name
    seen twice gets a ``(2)`` suffix.
    """
    found: dict[str, np.ndarray] = {}

    def add(name: str, arr: np.ndarray) -> None:
        key = _pretty(name)
        base, n = key, 2
        while key in found:
            key = f"{base} ({n})"
            n += 1
        found[key] = arr

    if isinstance(report, dict):
        used = set()
        for name, path in STUDY_STATS:
            node = report
            for part in path:
                node = node.get(part) if isinstance(node, dict) else None
            grid = _flat_grid(node, num_layers, num_heads)
            if grid is not None:
                add(name, grid)
                used.add(path)

        def walk_flat(node, path: tuple) -> None:
            if isinstance(node, dict):
                for key, v in node.items():
                    walk_flat(v, path + (key,))
            elif path not in used:
                grid = _flat_grid(node, num_layers, num_heads)
                if grid is not None:
                    add("/".join(path), grid)

        for section in STUDY_SECTIONS:
            if isinstance(report.get(section), dict):
                walk_flat(report[section], (section,))

    def from_records(records: list, prefix: str) -> None:
        grids: dict[str, np.ndarray] = {}
        for r in records:
            if not isinstance(r, dict) or "layer" not in r or "head" not in r:
                return
            try:
                l, h = int(r["layer"]), int(r["head"])
            except (TypeError, ValueError):
                return
            if not (0 <= l < num_layers and 0 <= h < num_heads):
                return
            for key, v in r.items():
                if key in ("layer", "head") or isinstance(v, bool) or not isinstance(v, (int, float)):
                    continue
                g = grids.setdefault(key, np.full((num_layers, num_heads), np.nan))
                g[l, h] = float(v)
        for key, g in grids.items():
            add(f"{prefix}{key}", g)

    def walk(node, prefix: str = "") -> None:
        if isinstance(node, dict):
            for key, v in node.items():
                if key == "per_head" and isinstance(v, dict):
                    for stat, arr in v.items():
                        grid = _as_grid(arr, num_layers, num_heads)
                        if grid is not None:
                            add(f"{prefix}{stat}", grid)
                        elif isinstance(arr, dict):
                            walk({"per_head": arr}, f"{prefix}{stat}/")
                elif key in ("per_head", "heads") and isinstance(v, list) and v:
                    from_records(v, prefix)
                else:
                    walk(v, prefix)
        elif isinstance(node, list):
            for v in node:
                if isinstance(v, (dict, list)):
                    walk(v, prefix)

    walk(report)
    return found


def load_report_stats(path: str | os.PathLike, num_layers: int, num_heads: int) -> dict[str, np.ndarray]:
    """Read ``report.json`` and return its per-head statistics (see :func:`extract_per_head`)."""
    # Any JSON value: extract_per_head reads the schema loosely, and says when nothing is found.
    report = read_json(
        path, InputError,
        missing="--report {path}: no such file",
        unreadable="--report {path}: cannot read the study report ({exc})",
    )
    stats = extract_per_head(report, num_layers, num_heads)
    if not stats:
        raise InputError(
            f"--report {path}: no per-head statistics for a {num_layers}x{num_heads} model "
            "(expected \"per_head\": {stat: [[...]]})"
        )
    return stats
