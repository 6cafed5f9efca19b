"""How far a penalty rule, and other unit vectors, could take the short-document family (issue 33).

The texts whose paragraphs are joined by spaces carry nothing but their sentences, so what
the search finds there is bounded by the unit vectors.  Three measurements of that bound:

* **Penalty ceiling** (cached vectors, ``benchmarks/short_sweep.py``'s cache, a minute): the
  share of texts with exactly the reference boundaries under today's defaults, told the number
  of segments, under the best single scale of the whole penalty (``TopicParams.scale``, priors
  included, over ``--scales``), and under the best scale *per document* (an oracle: the text
  counts when any scale of the grid makes it exact).  No rule that sets the penalty from the
  document, however clever, does better than that oracle on the same vectors.
* **Other unit vectors** (``--vectors``: the texts joined by spaces encoded again with the
  torch backend, every head captured, two minutes): the unit vector made of other layers'
  heads, another share of the model's own embedding, each unit encoded with its neighbours
  (``--context``), or with the corpus' strongest directions removed ("all-but-the-top", Mu &
  Viswanath 2018; the directions fitted on the paragraph family's units: Wiki-50 dev and
  Clinical, which some short texts are drawn from too, so if anything it is favoured), each scored automatic and told k.
* **Text encodings** (``--texts``: the texts joined by spaces, the model's own sentence embedding,
  :class:`~headseg.segmenter.evaluation.embeddings.MeanPooledEmbedder`, a few minutes), each told
  the number of segments, so each row is the ceiling of a rule built on it: each unit embedded
  alone under the exact-k scatter search, alone and beside today's vectors; a block of ``w``
  units either side of each gap embedded as one text and the ``k − 1`` least similar gaps cut (at
  least two units apart); every candidate segment embedded as one text, a segment costing
  ``Σ (1 − cos(unit, segment))`` under the exact-k search; the rows voting on each gap.  By source
  (everyday paragraphs, consecutive dev-set segments), and the texts that *any* row gets right:
  what a perfect choice among them would reach.
* **Beyond chance** (``--chance``: cached vectors, seconds): does the best single cut of a text
  save more scatter than the best cut of the same units shuffled (a permutation test, 300
  draws)?  Per group of the short family and of the short guard (``short_sections_dev``: one or
  two segments, each written as several paragraphs), the share of texts where it does at p < 0.01,
  0.05 and 0.1, and the median ratio of the text's best saving to the shuffled ones' median.  A
  rule that tells a text of several topics from a text of one, whatever its paragraphs, needs the
  groups apart here.

    python -m benchmarks.short_ceiling
    python -m benchmarks.short_ceiling --vectors
    python -m benchmarks.short_ceiling --texts
    python -m benchmarks.short_ceiling --chance

Prints Markdown tables (docs/segmenter.md, "Short documents", quotes them).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from benchmarks import short_sweep
from benchmarks.common import REPO, offline_settings

JOINS = ("blank", "line", "space")


def rate(res: dict, pick=lambda i: True) -> float:
    v = [r[1] for i, r in res.items() if pick(i)]
    return 100.0 * float(np.mean(v)) if v else float("nan")


def penalty_ceiling(docs: list[dict], scales: list[float]) -> None:
    from headseg.segmenter.topics import TopicParams

    base = TopicParams()
    rows = {"defaults": short_sweep.score(docs, base), "told k": short_sweep.score(docs, base, given=True)}
    by_scale = {s: short_sweep.score(docs, replace(base, scale=s)) for s in scales}
    best = max(scales, key=lambda s: rate(by_scale[s]))
    rows[f"best single scale ({best:g})"] = by_scale[best]
    for j in JOINS:  # the best single scale chosen for each join kind alone
        bj = max(scales, key=lambda s, j=j: rate(by_scale[s], lambda i, j=j: i.endswith(j)))
        rows.setdefault("best scale per join kind", {}).update(
            {i: r for i, r in by_scale[bj].items() if i.endswith(j)})
    rows["best scale per document (oracle)"] = {
        i: (0.0, any(by_scale[s][i][1] for s in scales), 0, 0) for i in rows["defaults"]}
    print(f"Penalty ceiling: {len(docs)} texts, scales {', '.join(f'{s:g}' for s in scales)}; "
          "share with exactly the reference boundaries\n")
    print("| rule | all | joined by blank lines | by line breaks | by spaces |")
    print("|---|---:|---:|---:|---:|")
    for name, res in rows.items():
        cells = [rate(res)] + [rate(res, lambda i, j=j: i.endswith(j)) for j in JOINS]
        print(f"| {name} | " + " | ".join(f"{c:.0f} %" for c in cells) + " |")


def encode(docs: list[dict], context: int):
    """Per document ``(Z [U, L·H, d], hidden [U, D])``: every head's context vectors pooled over each
    unit and normalised per head, and the normalised pooled last hidden state.  ``context`` 0: each
    unit alone, the segmenter's own vectors (``Segmenter.unit_vectors`` with every head at one weight,
    as ``topic_cache.py --all-heads``), split back into heads and embedding; else each unit encoded
    with ``context`` units each side and pooled over its own tokens (the embedding too)."""
    import dataclasses

    from headseg.analysis.capture import iter_batches
    from headseg.analysis.text import make_window
    from headseg.api import Segmenter
    from headseg.analysis.pooling import unit_means as _unit_means
    from headseg.segmenter.options import SegmentOptions

    seg = Segmenter(quiet=True, backend="torch")
    enc = seg.encoder
    info = seg.loaded.info
    heads = tuple((layer, h) for layer in range(info.num_layers) for h in range(info.num_heads))
    profile = np.zeros(len(heads))
    for (layer, h), w in zip(enc.topic_heads, enc.topic_weights):
        profile[layer * info.num_heads + h] = w
    meta = (info.num_layers, info.num_heads), profile, enc.output_weight
    out = []
    if context == 0:
        share = 0.5  # any share in (0, 1): it is divided out again
        every = seg.with_encoder(dataclasses.replace(
            enc, topic_heads=heads, topic_weights=np.full(len(heads), 1.0 / len(heads)), output_weight=share))
        for d in docs:
            p = every.document(d["text"], SegmentOptions())
            x = every.unit_vectors(p.tokens, p.units)
            cut = x.shape[1] - info.hidden_size
            z = x[:, :cut].reshape(len(x), len(heads), -1) / np.sqrt((1.0 - share) / len(heads))
            out.append((z, x[:, cut:] / np.sqrt(share)))
        return (out, *meta)
    for d in docs:
        p = seg.document(d["text"], SegmentOptions())
        r = p.token_ranges
        n = len(r)
        items = []
        for u in range(n):
            a, b = int(r[max(0, u - context), 0]), int(r[min(n - 1, u + context), 1])
            if b - a > 500:  # a window the model cannot take: the unit alone
                a, b = int(r[u, 0]), int(r[u, 1])
            w = make_window(p.tokens, a, b, enc.tokenizer, index=u, with_tokens=False)
            lead = int(np.argmax(~w.special))  # the special tokens before the content
            own = np.zeros(len(w), dtype=bool)
            own[lead + int(r[u, 0]) - a: lead + int(r[u, 1]) - a] = True
            items.append((w, own))
        z, hid = [], []
        for batch in iter_batches(items, 64):
            acts = enc.capture([w for w, _ in batch], heads=heads, hidden=True)
            for b, (w, own) in enumerate(batch):
                m = np.zeros(acts.z.shape[2], dtype=bool)
                m[:len(own)] = own
                z.append(acts.z[b][:, m].mean(axis=1))
                hid.append(acts.hidden[b][m].mean(axis=0))
        out.append((_unit_means(np.stack(z), np.ones(n)), _unit_means(np.stack(hid), np.ones(n))))
    return (out, *meta)


def head_weights(num_layers: int, num_heads: int, layers: dict[int, float]) -> np.ndarray:
    """``[L·H]``: every head of each layer in ``layers`` (layer -> weight) at its layer's weight."""
    w = np.zeros(num_layers * num_heads)
    for layer, v in layers.items():
        w[layer * num_heads:(layer + 1) * num_heads] = v
    return w


def compose(feats, w: np.ndarray, share: float) -> list[np.ndarray]:
    """Unit vectors from ``encode``'s features: the heads weighted by ``w [L·H]``, so a dot product is
    the heads' cosines averaged by weight, and the model's embedding at ``share`` (encode.pool_units)."""
    out = []
    for z, hid in feats:
        x = (z * np.sqrt(w / w.sum())[None, :, None]).reshape(len(z), -1)
        out.append(np.hstack([x * np.sqrt(1.0 - share), hid * np.sqrt(share)]))
    return out


def vector_variants(docs: list[dict], para: list[dict], context: int) -> None:
    from headseg.segmenter.topics import TopicParams

    texts = [d for d in docs if d["id"].endswith("space")]
    alone, (num_layers, num_heads), default, share = encode(texts, 0)
    rows = [(f"today's (the profile's heads, embedding {share:g})", alone, default, share),
            ("today's heads, embedding 0.7", alone, default, 0.7), ("today's heads, embedding 0.9", alone, default, 0.9)]
    last = num_layers - 1
    for layers, s in (({last: 1.0}, 0.0), ({last: 1.0}, share), ({last - 1: 1.0}, 0.0), ({last: 1.0, last - 1: 1.0}, share),
                      ({last: 1.0, last - 1: 1.0, last - 2: 1.0}, share), ({0: 1.0}, 0.0)):
        rows.append((f"every head of layer(s) {', '.join(str(k) for k in sorted(layers))}, embedding {s:g}",
                     alone, head_weights(num_layers, num_heads, layers), s))
    ctx, *_ = encode(texts, context)
    rows.append((f"today's, each unit with {context} neighbour(s) each side", ctx, default, share))
    params = TopicParams()

    def scored(xs):
        ds = [dict(d, x=x) for d, x in zip(texts, xs)]
        return rate(short_sweep.score(ds, params)), rate(short_sweep.score(ds, params, given=True))

    print(f"\nOther unit vectors: the {len(texts)} texts joined by spaces (torch backend, every head captured); "
          "share with exactly the reference boundaries\n")
    print("| unit vectors | automatic | told k |")
    print("|---|---:|---:|")
    for name, feats, w, s in rows:
        a, k = scored(compose(feats, w, s))
        print(f"| {name} | {a:.0f} % | {k:.0f} % |", flush=True)
    # all-but-the-top, on the cached vectors (today's heads, the default engine): the strongest
    # directions of the paragraph family's centred units removed from every unit
    fit = np.vstack([d["x"] - d["x"].mean(axis=0) for d in para])
    _, sv, vt = np.linalg.svd(fit - fit.mean(axis=0), full_matrices=False)
    for r in (1, 4, 16):
        v = vt[:r]
        xs = [(x := d["x"] - d["x"].mean(axis=0)) - (x @ v.T) @ v for d in texts]
        a, k = scored(xs)
        print(f"| today's (cached), the {r} strongest direction(s) of {len(fit)} other units removed "
              f"({100 * float((sv[:r] ** 2).sum() / (sv ** 2).sum()):.1f} % of their variance) | {a:.0f} % | {k:.0f} % |",
              flush=True)


def least_similar_gaps(sim: np.ndarray, k: int, gap: int = 2) -> list[int]:
    """The ``k − 1`` gaps (unit indices 1..n−1; ``sim[i − 1]`` the similarity across gap ``i``) of
    least similarity, greedily, each at least ``gap`` units from the others and from both ends."""
    n = len(sim) + 1
    chosen: list[int] = []
    for i in np.argsort(sim, kind="stable"):
        pos = int(i) + 1
        if gap <= pos <= n - gap and all(abs(pos - c) >= gap for c in chosen):
            chosen.append(pos)
        if len(chosen) == k - 1:
            break
    return sorted(chosen)


def text_encodings(docs: list[dict], max_units: int = 10) -> None:
    from headseg.segmenter.evaluation.embeddings import MeanPooledEmbedder
    from headseg.segmenter.search import SegmentCost, partition_k
    from headseg.segmenter.topics import TopicParams

    texts = [d for d in docs if d["id"].endswith("space")]
    embedder = MeanPooledEmbedder()
    cache: dict[str, np.ndarray] = {}

    def embed(strings: list[str]) -> np.ndarray:
        new = list(dict.fromkeys(t for t in strings if t not in cache))
        if new:
            cache.update(zip(new, embedder.embed(new)))
        return np.stack([cache[t] for t in strings])

    picked: dict[str, dict[str, list[int]]] = {}
    rows: dict[str, dict[str, bool]] = {}

    def keep(name: str, doc: dict, cuts: list[int]) -> None:
        picked.setdefault(name, {})[doc["id"]] = cuts
        rows.setdefault(name, {})[doc["id"]] = cuts == list(doc["bounds"])

    today = short_sweep.predict(texts, TopicParams(), given=True)
    for d in texts:
        keep("today's unit vectors, exact-k search", d, today[d["id"]])
        n, k = len(d["units"]), len(d["bounds"]) + 1
        unit = [d["text"][a:b].strip() for a, b in d["units"]]
        e = embed(unit)
        keep("each unit embedded alone, exact-k search", d, partition_k(SegmentCost(e, max_units=max_units), k))
        for mix in (0.5, 1.0, 2.0):  # scatters add over dimensions: one search on the two side by side
            keep(f"today's unit vectors beside the unit embedded alone at {mix:g}× its scatter, exact-k search", d,
                 partition_k(SegmentCost(np.hstack([d["x"], np.sqrt(mix) * e]), max_units=max_units), k))
        for w in (1, 2, 3):
            left = embed([" ".join(unit[max(0, i - w):i]) for i in range(1, n)])
            right = embed([" ".join(unit[i:i + w]) for i in range(1, n)])
            keep(f"blocks of {w} unit(s) either side of each gap embedded, least similar gaps", d,
                 least_similar_gaps((left * right).sum(axis=1), k))
        spans = [(a, b) for b in range(1, n + 1) for a in range(max(0, b - max_units), b)]
        seg = dict(zip(spans, embed([" ".join(unit[a:b]) for a, b in spans])))

        def coherence(starts, end, e=e, seg=seg):
            return np.array([float((1.0 - e[a:end] @ seg[(int(a), end)]).sum()) for a in starts])

        keep("every candidate segment embedded, Σ (1 − cos(unit, segment)), exact-k search", d,
             partition_k(SegmentCost(np.zeros((n, 1)), max_units=max_units), k, extra=coherence))
    votes = {}
    for d in texts:  # each gap ranked by how many rows cut there, today's vectors breaking ties
        count = np.zeros(len(d["units"]) - 1)
        for name, cuts in picked.items():
            for c in cuts[d["id"]]:
                count[c - 1] += 1.0 + 1e-3 * (name == "today's unit vectors, exact-k search")
        votes[d["id"]] = least_similar_gaps(-count, len(d["bounds"]) + 1) == list(d["bounds"])
    rows["the rows above voting (the most cut gaps, at least two units apart)"] = votes
    rows["any row above (a perfect choice among them)"] = {d["id"]: any(r[d["id"]] for r in rows.values())
                                                          for d in texts}
    print(f"\nText encodings: the {len(texts)} texts joined by spaces, each told the number of segments "
          f"(segments of at most {max_units} units); share with exactly the reference boundaries\n")
    print("| told k | all | everyday paragraphs | dev-set segments |")
    print("|---|---:|---:|---:|")
    for name, ok in rows.items():
        cells = [ok[i] for i in ok], [ok[i] for i in ok if i.startswith("everyday")], \
            [ok[i] for i in ok if not i.startswith("everyday")]
        print(f"| {name} | " + " | ".join(f"{100 * float(np.mean(c)):.0f} % ({sum(c)}/{len(c)})" for c in cells)
              + " |", flush=True)


def best_saving(x: np.ndarray, w: np.ndarray) -> float:
    """The most of the search's segment cost (``SegmentCost``: weighted scatter) that one cut of
    ``x [n, D]`` (weights ``w [n]``) saves."""
    from headseg.segmenter.search import SegmentCost

    cost = SegmentCost(x, weights=w)
    whole = cost.cost(0, cost.n)
    return max(whole - cost.cost(0, s) - cost.cost(s, cost.n) for s in range(1, cost.n))


def beyond_chance(docs: list[dict], sections: list[dict], draws: int = 300) -> None:
    from headseg.segmenter.topics import TopicParams, prepare_vectors, unit_weights

    params = TopicParams()
    rng = np.random.default_rng(0)
    groups: dict[str, list[tuple[float, float]]] = {}
    for family, texts in (("short", docs), ("guard", sections)):
        for d in texts:
            x = prepare_vectors(d["x"], params)
            w = unit_weights(d["tokens"], params)
            real = best_saving(x, w)
            null = np.array([best_saving(x[o], w[o]) for o in (rng.permutation(len(x)) for _ in range(draws))])
            # a shuffle that puts the same units on each side saves exactly as much: a tie counts
            # against the text, whatever the rounding of the two sums
            p = (1 + int((null >= real - 1e-9 * abs(real)).sum())) / (draws + 1)
            if family == "short":
                name = ("everyday paragraphs" if d["id"].startswith("everyday") else "dev-set segments") + \
                    f", joined by {dict(blank='blank lines', line='line breaks', space='spaces')[d['id'].rsplit('-', 1)[1]]}"
            else:
                k = d["id"].split("-")[-2]
                name = f"guard: {k} segment{'s' if k != '1' else ''} in paragraphs"
            groups.setdefault(name, []).append((p, real / float(np.median(null))))
    print(f"\nBeyond chance: the best single cut against the best cut of the units shuffled ({draws} draws)\n")
    print("| texts | n | p < 0.01 | p < 0.05 | p < 0.1 | median saving / shuffled median |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, v in groups.items():
        p = np.array([a for a, _ in v])
        print(f"| {name} | {len(v)} | " + " | ".join(f"{100 * float(np.mean(p < a)):.0f} %" for a in (0.01, 0.05, 0.1))
              + f" | {float(np.median([b for _, b in v])):.2f} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=REPO / "runs" / "short_cache")
    ap.add_argument("--scales", default="0.3,0.4,0.5,0.6,0.7,0.8,0.9,1,1.1,1.2,1.4",
                    help="scales of the whole penalty tried (comma-separated)")
    ap.add_argument("--vectors", action="store_true", help="also encode the texts joined by spaces again")
    ap.add_argument("--context", type=int, default=1, help="neighbours each side for the context variant")
    ap.add_argument("--texts", action="store_true",
                    help="also embed the texts joined by spaces with the model's own sentence embedding, told k")
    ap.add_argument("--chance", action="store_true",
                    help="also test each text's best single cut against its units shuffled (the short guard too)")
    args = ap.parse_args(argv)
    try:
        scales = [float(s) for s in args.scales.split(",")]
    except ValueError:
        ap.error(f"--scales must be numbers separated by commas (got {args.scales!r})")
    if not scales or any(not 0 < s < float("inf") for s in scales):
        ap.error("--scales must be positive numbers")
    if args.context < 1:
        ap.error("--context must be at least 1")
    offline_settings()
    docs = short_sweep.cache(args.cache, "short_dev")
    penalty_ceiling(docs, scales)
    if args.vectors:
        vector_variants(docs, short_sweep.cache(args.cache, "paragraphs_dev"), args.context)
    if args.texts:
        text_encodings(docs)
    if args.chance:
        beyond_chance(docs, short_sweep.cache(args.cache, "short_sections_dev"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
