"""Sweep how tokens are pooled into unit vectors, on cached per-token context vectors.

``segmenter/encode.py::pool_units`` mean-pools each topic head's context vectors
over a unit's content tokens, normalises per head, weights heads by
``sqrt(w_h)`` and concatenates.  This benchmark keeps every token's vectors
instead (``--dump``: the shipped engine, the same units, windows and batches as
``benchmarks/topic_cache.py``; float16, ``runs/token_cache/<data set>.npz``,
git-ignored), then pools each variant of :data:`VARIANTS` in numpy and scores
the shipped topic search exactly as ``benchmarks/topic_sweep.py`` does (Pk and
segments per reference segment, mean over the documents).

    python -m benchmarks.pool_sweep --dump --datasets dialseg711 --threads 1
    python -m benchmarks.pool_sweep --datasets dialseg711 --variants mean,nopunct,withspecial
    python -m benchmarks.pool_sweep --datasets dialseg711 --oracle     # with the true number of segments

``mean`` reproduces the shipped pooling (``runs/topic_cache_int8``'s vectors to
float16 precision).  A dump holds every real token's ``[N, d]`` (the special
tokens flagged), about 2 KiB per token for 24 heads: dialseg711 is 570 MB.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.common import (REPO, dataset_path, default_model, offline_settings, segmentation_root,
                               select_datasets, slug)
from benchmarks.topic_sweep import document_scores

#: function words for the stop-word variants (English; the dev sets are English)
STOP = set("""a an the and or but if of to in on at by for with from as is are was were be been being am do does did
i you he she it we they me him her us them my your his its our their this that these those there here what which who whom
so not no yes ok okay please thank thanks can could would will shall should may might must have has had
just also very too then than about up out into over again any some all""".split())


def dump(seg, name: str, rel: str, out: Path, limit: int | None, batch_docs: int = 8) -> int:
    """Every real token's topic-head vectors of the data set's units, in ``batch_docs`` documents per batch
    set as ``topic_cache.py`` encodes them (the int8 engine's quantisation depends on the batch)."""
    from headseg.analysis.capture import iter_batches
    from headseg.analysis.writing import atomic_save_npz
    from headseg.analysis.text import tokenize
    from headseg.segmenter.encode import unit_token_ranges, unit_windows
    from headseg.segmenter.evaluation.loaders import iter_documents
    from headseg.segmenter.speakers import content_spans

    docs = list(iter_documents(segmentation_root() / rel, limit=limit))
    meta, parts, ids, n_units = {}, {k: [] for k in ("z", "tok", "own", "pos", "special")}, [], 0
    for s in range(0, len(docs), batch_docs):
        windows, owners = [], []
        for d in docs[s:s + batch_docs]:
            tok = tokenize(d.text, seg.loaded.tokenizer)
            units = seg.units(d.text, doc=tok)
            i = len(ids)
            ids.append(d.id)
            r = unit_token_ranges(tok, units)
            meta.update({f"u{i}": np.asarray([a for a, _ in units], np.int64), f"r{i}": np.asarray(d.starts, np.int64),
                         f"b{i}": np.asarray(d.boundaries, np.int64), f"len{i}": np.asarray([len(d.text)], np.int64),
                         f"t{i}": (r[:, 1] - r[:, 0]).astype(np.int64), f"off{i}": np.asarray([n_units], np.int64)})
            w, o = unit_windows(tok, content_spans(d.text, units), seg.loaded.tokenizer, seg.window_tokens)
            windows.extend(w)
            owners.append(o + n_units)
            n_units += len(units)
        owner = np.concatenate(owners)
        index = {id(w): i for i, w in enumerate(windows)}
        for batch in iter_batches(windows, seg.batch_size):
            acts = seg.capture(batch, heads=seg.topic_heads)
            for b, w in enumerate(batch):
                parts["z"].append(np.moveaxis(acts.z[b, :, : len(w)], 1, 0).astype(np.float16))
                parts["tok"].append(w.input_ids.astype(np.int32))
                parts["own"].append(np.full(len(w), owner[index[id(w)]], np.int32))
                parts["pos"].append(np.arange(len(w), dtype=np.int16))
                parts["special"].append(w.special.copy())
        print(f"  {name}: {len(ids)}/{len(docs)}", file=sys.stderr, flush=True)
    atomic_save_npz(out, ids=np.asarray(ids), n_units=np.asarray([n_units]), heads=np.asarray(seg.topic_heads),
                    weights=np.asarray(seg.topic_weights), **{k: np.concatenate(v) for k, v in parts.items()}, **meta)
    return len(ids)


def load(path: Path, name: str, limit: int | None) -> tuple[dict, list[dict]]:
    """The dump's tokens (content tokens in ``z``, ``tok``, ``own``, ``pos``; the special ones in ``spec_*``)
    and its documents in ``topic_sweep.load_cache``'s form, with their texts."""
    from headseg.segmenter.evaluation.loaders import iter_documents

    f = np.load(path, allow_pickle=False)
    spec = f["special"]
    D = {k: f[k][~spec] for k in ("z", "tok", "own", "pos")}
    D.update(spec_z=f["z"][spec], spec_own=f["own"][spec], spec_pos=f["pos"][spec], heads=f["heads"],
             weights=f["weights"], n_units=int(f["n_units"][0]))
    n = len(f["ids"]) if not limit else min(limit, len(f["ids"]))
    D["offs"] = [int(f[f"off{i}"][0]) for i in range(len(f["ids"]))] + [D["n_units"]]
    docs = [{"id": str(f["ids"][i]), "units": f[f"u{i}"], "ref": f[f"r{i}"], "bounds": f[f"b{i}"],
             "len": int(f[f"len{i}"][0]), "tokens": f[f"t{i}"], "off": D["offs"][i], "end": D["offs"][i + 1]}
            for i in range(n)]
    for doc, d in zip(docs, iter_documents(dataset_path(name), limit=n)):
        if d.id != doc["id"] or len(d.text) != doc["len"]:
            raise SystemExit(f"{path}: document {doc['id']} does not match the data; dump it again")
        doc["text"] = d.text
    D["doc_of"] = np.searchsorted(np.asarray(D["offs"]), D["own"], side="right") - 1
    return D, docs


# ---- token weights ------------------------------------------------------------------------------------------

def token_classes(D) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per content token: punctuation only, a stop word, a WordPiece continuation (``##``)."""
    tk = default_model(weights=False).tokenizer
    u = np.unique(D["tok"])
    strs = dict(zip(u.tolist(), tk.convert_ids_to_tokens([int(i) for i in u])))
    punct = {i for i, t in strs.items() if t.lstrip("#") and not any(ch.isalnum() for ch in t.lstrip("#"))}
    stop = {i for i, t in strs.items() if t.lower() in STOP}
    cont = {i for i, t in strs.items() if t.startswith("##")}
    return tuple(np.isin(D["tok"], list(s)) for s in (punct, stop, cont))


def keep(D, mask: np.ndarray) -> np.ndarray:
    """Weights 1 on ``mask``, 0 elsewhere; a unit left without tokens keeps all its tokens."""
    tot = np.bincount(D["own"], mask.astype(float), minlength=D["n_units"])
    return np.where(tot[D["own"]] == 0, 1.0, mask.astype(float))


def first_layer_only(D, w: np.ndarray) -> np.ndarray:
    """``w`` for the first layer's heads, 1 for the others: ``[n, N]``."""
    out = np.ones((len(w), len(D["heads"])))
    out[:, D["heads"][:, 0] == 0] = w[:, None]
    return out


def word_weights(D, cont: np.ndarray) -> np.ndarray:
    """1 / (pieces of the token's word): each word counts once, however WordPiece splits it."""
    start = ~cont | (D["pos"] == 1)  # a window's first content token starts a word
    word = np.cumsum(start) - 1
    return 1.0 / np.bincount(word)[word]


def doc_idf(D) -> np.ndarray:
    """In-document IDF ``log((U + 1) / (df + 0.5))`` (df: units of the document holding the token), ≥ 0.05."""
    w = np.ones(len(D["own"]))
    for k in range(len(D["offs"]) - 1):
        m = np.flatnonzero(D["doc_of"] == k)
        if len(m):
            pairs = np.unique(np.stack([D["tok"][m], D["own"][m]], 1), axis=0)
            ids, df = np.unique(pairs[:, 0], return_counts=True)
            w[m] = np.log((D["offs"][k + 1] - D["offs"][k] + 1) / (df[np.searchsorted(ids, D["tok"][m])] + 0.5))
    return np.maximum(w, 0.05)


def doc_cosine_weights(D, distinctive: bool) -> np.ndarray:
    """Per head ``1 ∓ cos(z_t, the document's mean token z)`` (≥ 0.05): distinctive or typical tokens weigh more."""
    w = np.ones((len(D["own"]), len(D["heads"])))
    for k in range(len(D["offs"]) - 1):
        idx = np.flatnonzero(D["doc_of"] == k)
        if len(idx):
            z = D["z"][idx].astype(np.float64)
            mu = z.mean(0)
            c = np.einsum("tnd,nd->tn", z, mu) / np.maximum(
                np.linalg.norm(z, axis=-1) * np.linalg.norm(mu, axis=-1)[None], 1e-12)
            w[idx] = np.maximum(0.05, 1 - c if distinctive else 1 + c)
    return w


# ---- pooling ------------------------------------------------------------------------------------------------

def _sum(z, own, w, U, N, d, op="add"):
    sums, cnt = np.zeros((U, N, d)) if op == "add" else np.full((U, N, d), -np.inf), np.zeros((U, N))
    w = np.repeat(w[:, None], N, axis=1) if w.ndim == 1 else w
    for s in range(0, len(own), 100_000):
        zz, ww, oo = z[s:s + 100_000].astype(np.float64), w[s:s + 100_000], own[s:s + 100_000]
        if op == "add":
            np.add.at(sums, oo, zz * ww[:, :, None])
        else:
            np.maximum.at(sums, oo, zz)
        np.add.at(cnt, oo, ww)
    return sums, cnt


def _unit(v):
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return np.where(n > 0, v / np.maximum(n, 1e-12), 0.0)


def pool(D, w: np.ndarray, norm: str = "head", spec_w: np.ndarray | None = None) -> np.ndarray:
    """Unit vectors ``[U, N·d]``: each head's ``w``-weighted token mean (plus the special tokens at ``spec_w``),
    then ``norm``: ``head`` (shipped: unit length per head), ``none``, ``concat`` (the concatenation),
    ``layer`` (each layer's concatenation), ``hcenter`` (each head's document mean removed, then per head),
    ``shrinkC`` (length ``n / (n + C · the document's median n)`` per head, rescaled to RMS 1 over the
    document), ``js`` (James–Stein reliability ``max(0, 1 − s² / (k |m|²))``, s² the document's pooled
    within-unit variance, rescaled likewise), ``max`` (coordinate max), ``meanmax`` ([mean | max], both per head)."""
    U, N, d = D["n_units"], D["z"].shape[1], D["z"].shape[2]
    sums, cnt = _sum(D["z"], D["own"], w, U, N, d)
    if spec_w is not None:
        s2, c2 = _sum(D["spec_z"], D["spec_own"], spec_w, U, N, d)
        sums, cnt = sums + s2, cnt + c2
    m = sums / np.maximum(cnt, 1e-12)[:, :, None]
    wh = np.sqrt(D["weights"])[None, :, None]
    docs = list(zip(D["offs"], D["offs"][1:]))
    if norm in ("max", "meanmax"):
        mx = _sum(D["z"], D["own"], w, U, N, d, op="max")[0]
        mx = np.where(np.isfinite(mx), mx, 0.0)
        x = _unit(mx) if norm == "max" else np.concatenate([_unit(m), _unit(mx)], -1) / np.sqrt(2)
    elif norm == "head":
        x = _unit(m)
    elif norm == "none":
        x = m
    elif norm == "concat":
        x = _unit((m * wh).reshape(U, -1)).reshape(U, N, -1) / wh
    elif norm == "layer":
        x, layers = m.copy(), D["heads"][:, 0]
        for l in np.unique(layers):
            sel = layers == l
            x[:, sel] = _unit(m[:, sel].reshape(U, -1)).reshape(U, sel.sum(), d) * np.sqrt(sel.sum())
    elif norm == "hcenter":
        x = m.copy()
        for a, b in docs:
            x[a:b] -= x[a:b].mean(0, keepdims=True)
        x = _unit(x)
    elif norm.startswith("shrink") or norm == "js":
        x, n = np.zeros_like(m), np.linalg.norm(m, axis=-1)
        if norm == "js":
            sq = _sum(D["z"].astype(np.float32) ** 2, D["own"], np.ones(len(D["own"])), U, N, d)[0].sum(-1)
            within = sq - cnt * n ** 2
        for a, b in docs:
            if b <= a:
                continue
            if norm == "js":
                s2 = within[a:b].sum(0) / np.maximum(np.maximum(cnt[a:b] - 1, 0).sum(0), 1)
                r = np.maximum(0.0, 1 - s2[None] / np.maximum(cnt[a:b] * n[a:b] ** 2, 1e-12))
            else:
                r = n[a:b] / (n[a:b] + float(norm[6:]) * np.median(n[a:b], axis=0, keepdims=True))
            y = _unit(m[a:b]) * r[..., None]
            x[a:b] = y / np.maximum(np.sqrt(np.mean(np.square(y).sum(-1), axis=0)), 1e-12)[None, :, None]
    else:
        raise SystemExit(f"unknown norm {norm}")
    return (x * wh).reshape(U, -1)


def variants(D) -> dict:
    """name → (token weights, norm, special-token weights or None)."""
    n, s = len(D["own"]), len(D["spec_own"])
    one = np.ones(n)
    punct, stop, cont = token_classes(D)
    zn = np.linalg.norm(D["z"].astype(np.float32), axis=-1)  # [n, N]
    last = np.ones((s, len(D["heads"]))) * (D["heads"][:, 0] > 0)[None]
    return {
        "mean": lambda: (one, "head", None),
        "nopunct": lambda: (keep(D, ~punct), "head", None),
        "nostop": lambda: (keep(D, ~stop), "head", None),
        "nopunct_nostop": lambda: (keep(D, ~punct & ~stop), "head", None),
        "l0nopunct": lambda: (first_layer_only(D, keep(D, ~punct)), "head", None),
        "l0nostop": lambda: (first_layer_only(D, keep(D, ~punct & ~stop)), "head", None),
        "znorm": lambda: (zn, "head", None),
        "znorm2": lambda: (zn ** 2, "head", None),
        "znorm_meanhead": lambda: (np.repeat(zn.mean(1, keepdims=True), zn.shape[1], 1), "head", None),
        "unitdir": lambda: (1.0 / np.maximum(zn, 1e-6), "head", None),
        "docidf": lambda: (doc_idf(D), "head", None),
        "wordmean": lambda: (word_weights(D, cont), "head", None),
        "distinct": lambda: (doc_cosine_weights(D, True), "head", None),
        "typical": lambda: (doc_cosine_weights(D, False), "head", None),
        "withspecial": lambda: (one, "head", np.ones(s)),
        "withspecial_l5": lambda: (one, "head", last),
        "cls": lambda: (np.zeros(n), "head", (D["spec_pos"] == 0).astype(float)),
        "sep": lambda: (np.zeros(n), "head", (D["spec_pos"] > 0).astype(float)),
        "wordmean_withspecial": lambda: (word_weights(D, cont), "head", np.ones(s)),
        "noheadnorm": lambda: (one, "none", None),
        "concatnorm": lambda: (one, "concat", None),
        "layernorm": lambda: (one, "layer", None),
        "hcenter": lambda: (one, "hcenter", None),
        **{f"shrink{c}": (lambda c=c: (one, f"shrink{c}", None)) for c in ("0.5", "1", "2", "4")},
        "js": lambda: (one, "js", None),
        "max": lambda: (one, "max", None),
        "meanmax": lambda: (one, "meanmax", None),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(REPO / "runs" / "token_cache"))
    ap.add_argument("--datasets", default="dialseg711", help="names or prefixes, as benchmarks/segmentation.py")
    ap.add_argument("--limit", type=int, default=0, help="documents per data set (0 = all)")
    ap.add_argument("--dump", action="store_true", help="write the per-token dumps (the slow part)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--variants", default=None, help="comma-separated (default: every one)")
    ap.add_argument("--oracle", action="store_true", help="score with the reference number of segments")
    args = ap.parse_args(argv)
    offline_settings()
    cache = Path(args.cache)
    if args.dump:
        from headseg.api import Segmenter

        seg = Segmenter(threads=args.threads, quiet=True)
        cache.mkdir(parents=True, exist_ok=True)
        for name, rel in select_datasets(args.datasets):
            t0 = time.perf_counter()
            n = dump(seg, name, rel, cache / f"{slug(name)}.npz", args.limit or None)
            print(f"{name}: {n} documents in {time.perf_counter() - t0:.0f} s (load {os.getloadavg()[0]:.1f})",
                  file=sys.stderr)
        return 0
    from headseg.segmenter.topics import TopicParams

    print("| data set | variant | Pk | segments hyp/ref | documents | load |")
    print("|---|---|---:|---:|---:|---:|")
    for name, _ in select_datasets(args.datasets):
        D, docs = load(cache / f"{slug(name)}.npz", name, args.limit or None)
        table = variants(D)
        for v in args.variants.split(",") if args.variants else table:
            if v not in table:
                raise SystemExit(f"unknown variant {v}; one of {', '.join(table)}")
            x = pool(D, *table[v]())
            for doc in docs:
                doc["x"] = x[doc["off"]:doc["end"]]
            pks, ratio = document_scores(docs, TopicParams(), segments_oracle=args.oracle)
            print(f"| {name}{' (k oracle)' if args.oracle else ''} | {v} | {np.mean(pks):.4f} | "
                  f"{np.mean(ratio):.2f} | {len(docs)} | {os.getloadavg()[0]:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
