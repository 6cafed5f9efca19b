"""Longer documents and recurring topics built from the Choi dev documents.

Two generators, each at N = 1, 5, 20 documents per composite, always over the
same ``--docs`` source documents (so only the length and the order change):

* ``concat``: N consecutive Choi documents joined end to end; every document
  join is a reference boundary.
* ``recurring``: the same N documents, each segment cut into two halves, the
  halves laid out as S1a S2a … Ska S1b S2b … Skb per document: every topic
  comes back once after the others, and every half is a reference segment.

Prints, per generator and N, the mean Pk and predicted segments per reference
segment (summed over the composites).  A rule for the number of segments that
holds as documents grow keeps both flat from N = 1 to N = 20.

    python -m benchmarks.recurring                   # end to end: text -> Segmenter.segment
    python -m benchmarks.recurring --cache runs/topic_cache   # same search on cached unit vectors

End to end, each composite is segmented as one text; with ``--cache`` the unit
vectors of ``benchmarks/topic_cache.py`` are concatenated instead (exactly what
the end-to-end run computes, since every unit is encoded alone).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.common import offline_settings, segmentation_root, slug

SIZES = (1, 5, 20)


def halves(bounds: list[int], n: int) -> list[tuple[int, int, int]]:
    """``(segment, start, end)`` unit ranges of each half of each reference segment (a 1-unit segment stays whole)."""
    edges = [0, *bounds, n]
    out = []
    for s, (a, b) in enumerate(zip(edges, edges[1:])):
        m = a + (b - a + 1) // 2
        out.append((s, a, m))
        if m < b:
            out.append((s, m, b))
    return out


def recurring_order(bounds: list[int], n: int) -> tuple[list[int], list[int]]:
    """Unit order of the recurring layout and its reference boundaries (positions in the new order)."""
    parts = halves(bounds, n)
    first = [p for i, p in enumerate(parts) if i == 0 or parts[i - 1][0] != p[0]]
    second = [p for i, p in enumerate(parts) if i > 0 and parts[i - 1][0] == p[0]]
    order, new_bounds = [], []
    for _, a, b in first + second:
        if order:
            new_bounds.append(len(order))
        order.extend(range(a, b))
    return order, new_bounds


def compose(docs: list, kind: str) -> tuple[list[str], list[int], list[list[int]]]:
    """Units, reference boundaries and, per source document, the order of its units in the composite."""
    units, bounds, orders = [], [], []
    for d in docs:
        if kind == "recurring":
            order, b = recurring_order(list(d["bounds"]), d["n"])
        else:
            order, b = list(range(d["n"])), list(d["bounds"])
        if units:
            bounds.append(len(units))
        bounds.extend(len(units) + x for x in b)
        units.extend(d["units"][i] for i in order)
        orders.append(order)
    return units, bounds, orders


def previous_rule_cuts(x: np.ndarray) -> list[int]:
    """The rule before issue 12, for comparison: penalty ``0.55 · σ² · ln n`` (σ² over the whole document)."""
    from headseg.segmenter.topics import TopicParams, prepare_vectors
    from headseg.segmenter.search import SegmentCost, partition_penalised

    x = prepare_vectors(np.asarray(x, dtype=np.float64), TopicParams(renormalize=True))  # as before issue 12
    d = x[1:] - x[:-1]
    s2 = max(float(np.einsum("ij,ij->i", d, d).mean()) / 2.0, 1e-9)
    return partition_penalised(SegmentCost(x, max_units=400), 0.55 * s2 * np.log(len(x)))


def load_docs(root: Path, dataset: str, limit: int) -> list[dict]:
    from headseg.segmenter.evaluation.loaders import iter_documents

    return [{"id": d.id, "units": d.units, "bounds": d.boundaries, "n": d.n}
            for d in iter_documents(root / dataset, limit=limit)]


def score(units: list[str], bounds: list[int], boundary_chars: list[int]) -> tuple[float, int]:
    from headseg.segmenter.evaluation.loaders import join_units, snap_offsets
    from headseg.segmenter.evaluation.metrics import score_document

    text, spans = join_units(units)
    hyp = snap_offsets(boundary_chars, [a for a, _ in spans], len(text))
    return score_document(bounds, hyp, len(units)).pk, len(hyp) + 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", default=str(segmentation_root()))
    ap.add_argument("--dataset", default="choi/3/3-11")
    ap.add_argument("--docs", type=int, default=100, help="source documents (a multiple of 20)")
    ap.add_argument("--cache", default=None, help="topic_cache.py folder: search on cached unit vectors")
    ap.add_argument("--kinds", default="concat,recurring")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--previous", action="store_true",
                    help="with --cache: the rule before issue 12 (0.55 · σ² · ln n), for comparison")
    ap.add_argument("--params", default="", help="TopicParams overrides, NAME=V,NAME=V (default: the shipped ones)")
    args = ap.parse_args(argv)
    offline_settings()
    from benchmarks.topic_sweep import parse_value

    from headseg.segmenter.topics import TopicParams

    params = TopicParams(**{k: parse_value(v) for k, _, v in
                            (p.partition("=") for p in args.params.split(",") if p)})
    if args.docs % max(SIZES):
        raise SystemExit(f"--docs must be a multiple of {max(SIZES)}")
    docs = load_docs(Path(args.data_root), args.dataset, args.docs)
    if len(docs) < args.docs:
        raise SystemExit(f"{args.dataset} has only {len(docs)} documents")
    seg = vectors = None
    if args.cache:
        from benchmarks.topic_sweep import load_cache, unit_tokens

        cached = load_cache(Path(args.cache) / f"{slug(args.dataset)}.npz", args.docs)
        vectors = []
        for d, c in zip(docs, cached):
            if c["id"] != d["id"] or len(c["ref"]) != d["n"]:
                raise SystemExit(f"{args.cache}: {d['id']} does not match the cache; rebuild it")
            # the segmenter's units may split a reference unit: group its rows by reference unit
            owner = np.searchsorted(c["ref"], c["units"], side="right") - 1
            toks = unit_tokens(c)
            vectors.append([(c["x"][owner == i], c["units"][owner == i] - c["ref"][i], toks[owner == i])
                            for i in range(d["n"])])
    else:
        import torch

        torch.set_num_threads(args.threads)
        from headseg.api import Segmenter

        seg = Segmenter(backend="torch", params=params)
    from headseg.segmenter.lines import heading_units
    from headseg.segmenter.topics import topic_cuts

    if args.previous and not args.cache:
        raise SystemExit("--previous needs --cache")
    print(f"{args.dataset}, the first {args.docs} documents; "
          f"{'cached unit vectors' if args.cache else 'end to end (Segmenter.segment)'}"
          f"{', previous rule (0.55 · σ² · ln n)' if args.previous else ''}\n")
    print("| layout | N docs per composite | composites | units per composite | Pk | segments hyp/ref |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind in args.kinds.split(","):
        for size in SIZES:
            t0 = time.perf_counter()
            pks, hyp_total, ref_total, n_units = [], 0, 0, []
            for g in range(0, args.docs, size):
                group = list(range(g, g + size))
                units, bounds, orders = compose([docs[i] for i in group], kind)
                text = "\n".join(units)
                if vectors is not None:
                    starts = np.cumsum([0] + [len(u) + 1 for u in units[:-1]])
                    rows, offs, toks, lines = [], [], [], []
                    pos = 0
                    for i, o in zip(group, orders):
                        for r in o:
                            xr, dr, tr = vectors[i][r]
                            rows.append(xr)
                            toks.append(tr)
                            lines.extend([pos] * len(tr))  # one reference unit per line
                            offs.extend(int(starts[pos]) + int(v) for v in dr)
                            pos += 1
                    if args.previous:
                        cuts = previous_rule_cuts(np.vstack(rows))
                    else:
                        tokens = np.concatenate(toks)
                        spans = list(zip(offs, offs[1:] + [len(text)]))
                        cuts = topic_cuts(np.vstack(rows), params, unit_tokens=tokens, lines=lines,
                                          headings=heading_units(text, spans, tokens, params.heading_tokens))
                    chars = [offs[c] for c in cuts]
                else:
                    chars = list(seg.segment(text).boundaries)
                pk, m = score(units, bounds, chars)
                pks.append(pk)
                hyp_total += m
                ref_total += len(bounds) + 1
                n_units.append(len(units))
            print(f"| {kind} | {size} | {len(pks)} | {np.mean(n_units):.0f} | {np.mean(pks):.3f} | "
                  f"{hyp_total / ref_total:.2f} |", flush=True)
            print(f"  {kind} N={size}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
