"""Sweep the retrieval chunks' settings against the recursive splitter: the worst-cell rule (issue 24).

For each setting (size-target fraction of ``max_tokens``, line-break and heading
discounts of :func:`headseg.segmenter.lines.cut_discounts`), headseg chunks the
dev retrieval corpora at each budget and every one of the 16 acceptance cells
(2 budgets × (3 corpora + overall) × {IoU, recall}) is scored as the ratio
headseg / LangChain's recursive splitter at the same budget.  The rule that
chose the shipped setting (docs/segmenter.md, "Chunks for retrieval"): the
largest worst cell, ties within 0.002 broken by the cells won (ratio > 1).

The unit vectors of each corpus are computed once per budget; each setting only
reruns the search (``Segmenter.topic_boundaries``, what ``segment`` runs) and
embeds the chunks.

    python -m benchmarks.retrieval_sweep                                  # the shipped setting
    python -m benchmarks.retrieval_sweep --target 0.5,0.6 --line 0,0.25 --heading 0,0.25
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys

from benchmarks.common import data_root, default_tokenizer


def floats(s: str) -> list[float]:
    return [float(v) for v in s.split(",")]


def main() -> int:
    from headseg.segmenter import lines
    from headseg.segmenter.request import TARGET_FRACTION

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(data_root() / "retrieval"))
    ap.add_argument("--max-tokens", default="128,256")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--target", default=str(TARGET_FRACTION), help="target fractions of max_tokens")
    ap.add_argument("--line", default=str(lines.LINE_BREAK_DISCOUNT), help="line-break discounts")
    ap.add_argument("--heading", default=str(lines.HEADING_DISCOUNT), help="heading discounts")
    args = ap.parse_args()

    from headseg.api import Segmenter
    from headseg.segmenter.evaluation.embeddings import MeanPooledEmbedder
    from headseg.segmenter.evaluation.retrieval import chunk_all, evaluate_chunks, load_retrieval, recursive_chunker
    from headseg.segmenter.options import SegmentOptions

    rs = load_retrieval(args.data)
    tok = default_tokenizer()

    def count(t: str) -> int:
        return len(tok.encode(t)[0])

    embedder = MeanPooledEmbedder()
    qv = embedder.embed([q.text for q in rs.questions])
    seg = Segmenter()
    load0 = os.getloadavg()[0]
    budgets = [int(b) for b in args.max_tokens.split(",")]
    prepared, refs = {}, {}
    for b in budgets:
        opts = SegmentOptions(max_tokens=b)
        prepared[b] = {}
        for name, text in rs.corpora.items():
            d = seg.document(text, opts)
            prepared[b][name] = (d, seg.unit_vectors(d.tokens, d.units))
        refs[b] = evaluate_chunks(rs, chunk_all(rs, recursive_chunker(b, count)), embedder.embed, k=args.k,
                                  count_tokens=count, question_vectors=qv)

    def cells(sc, ref) -> list[float]:
        out = [sc.overall[m] / ref.overall[m] for m in ("iou", "recall")]
        for c in rs.corpora:
            out += [sc.per_corpus[c][m] / ref.per_corpus[c][m] for m in ("iou", "recall")]
        return out

    print("| target | line-break discount | heading discount | " +
          " | ".join(f"{b}: IoU / recall" for b in budgets) + " | worst cell | cells won |")
    print("|---:|---:|---:|" + "---:|" * len(budgets) + "---:|---:|")
    line0, heading0 = lines.LINE_BREAK_DISCOUNT, lines.HEADING_DISCOUNT
    try:
        for f, d, h in itertools.product(floats(args.target), floats(args.line), floats(args.heading)):
            lines.LINE_BREAK_DISCOUNT, lines.HEADING_DISCOUNT = d, h
            ratios, shown = [], []
            for b in budgets:
                # the shipped fraction exactly as `segment(max_tokens=b)` applies it (0.6·b, not rounded)
                opts = (SegmentOptions(max_tokens=b) if f == TARGET_FRACTION
                        else SegmentOptions(max_tokens=b, target_tokens=max(1, round(f * b))))
                chunks = {}
                for name, (doc, x) in prepared[b].items():
                    cuts, _ = seg.topic_boundaries(x, doc, opts)
                    edges = [0] + [doc.units[c][0] for c in cuts] + [len(doc.text)]
                    chunks[name] = list(zip(edges[:-1], edges[1:]))
                sc = evaluate_chunks(rs, chunks, embedder.embed, k=args.k, count_tokens=count, question_vectors=qv)
                ratios += cells(sc, refs[b])
                shown.append(f"{100 * sc.overall['iou']:.2f} / {100 * sc.overall['recall']:.1f}")
            print(f"| {f:g} | {d:g} | {h:g} | " + " | ".join(shown) +
                  f" | {min(ratios):.3f} | {sum(r > 1 for r in ratios)}/{len(ratios)} |", flush=True)
    finally:
        lines.LINE_BREAK_DISCOUNT, lines.HEADING_DISCOUNT = line0, heading0
    print(f"\nload average {load0:.1f} → {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
