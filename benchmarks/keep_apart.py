"""Ways a size target keeps apart what the evidence separates, on the retrieval set (issue 48).

Under ``max_tokens`` alone the search runs with a size target (0.6 · N) and once without it; the
boundaries of the search without a target whose evidence reaches ``KEEP_APART`` (3 standard
deviations) or whose confidence reaches ``KEEP_APART_CONFIDENCE`` (0.85) must survive the target.  How they survive is :func:`headseg.segmenter.apart.keep_apart`
(read by the topic search as ``topics.keep_apart``); this script swaps it for the alternatives and
prints chunks / IoU / recall (×100) per budget:

* ``move``: the target's nearest cut moves onto it when it lies within half a target (in tokens) and
  the limits allow; otherwise it is added (the product: kept apart are the boundaries of evidence
  ``KEEP_APART`` or confidence ``KEEP_APART_CONFIDENCE``);
* ``move-z``: the same with evidence alone deciding which are kept apart;
* ``add``: each such boundary is added to the target's cuts;
* ``off``: none kept apart (the rule before issue 48);
* ``skip``: it is left out where the target already cuts within half a target of it.

With ``off`` among the variants a second table pairs each other variant with it question by
question: how many questions' recall rose and fell, the mean change with a seeded 95 % bootstrap
interval over questions, and the two-sided sign test's p on the questions that moved.  Top-k
retrieval is all or nothing per question, so one question moves the mean by 100/Q points (0.36 on
the dev set's 276): a difference under that is a question's rank, not a chunking.

    python -m benchmarks.keep_apart                       # budgets 128, 256, 512
    python -m benchmarks.keep_apart --max-tokens 512 --variants move,add
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np

from benchmarks.common import data_root

VARIANTS = ("move", "move-z", "add", "off", "skip")


def sign_test(up: int, down: int) -> float:
    """Two-sided exact sign test: the chance of a split at least this uneven among ``up + down`` fair coins."""
    n, m = up + down, min(up, down)
    if not n:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(m + 1)) / 2 ** n)


def paired(a: np.ndarray, b: np.ndarray, draws: int = 10_000, seed: int = 0) -> tuple[int, int, float, float, float, float]:
    """Questions whose score rose and fell from ``b`` to ``a`` (per-question scores ``[Q]``), the mean
    change ×100 with its seeded bootstrap 95 % interval, and the sign test's p."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    up, down = int((d > 1e-12).sum()), int((d < -1e-12).sum())
    boot = d[np.random.default_rng(seed).integers(0, len(d), size=(draws, len(d)))].mean(axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return up, down, 100 * float(d.mean()), 100 * float(lo), 100 * float(hi), sign_test(up, down)


def _near_cut(at: np.ndarray, cuts, c: int, slack: float):
    """The cut of ``cuts`` nearest to unit ``c`` in tokens (``at``: token offsets) if within ``slack``."""
    near = [f for f in cuts if abs(at[c] - at[f]) <= slack]
    return min(near, key=lambda f: abs(at[c] - at[f])) if near else None


def variant(name: str):
    """A replacement for ``topics.keep_apart`` (None: the product's own); each returns the cuts."""
    from headseg.segmenter import apart
    from headseg.segmenter.topics import TopicParams

    def sure(x, weights, free, conf, request, params):
        return apart.kept_apart(x, weights, free, conf, request, params, TopicParams().min_evidence)

    def move_z(*args, **kwargs):
        keep, apart.KEEP_APART_CONFIDENCE = apart.KEEP_APART_CONFIDENCE, float("inf")
        try:
            return apart.keep_apart(*args, **kwargs)
        finally:
            apart.KEEP_APART_CONFIDENCE = keep

    def add(x, weights, tokens, found, free, conf, request, params=None, spans=None, min_evidence=0.0):
        return sorted(set(found) | set(sure(x, weights, free, conf, request, params)))

    def off(x, weights, tokens, found, free, conf, request, params=None, spans=None, min_evidence=0.0):
        return list(found)

    def skip(x, weights, tokens, found, free, conf, request, params=None, spans=None, min_evidence=0.0):
        at = np.concatenate([[0], np.cumsum(np.asarray(tokens, dtype=np.float64))])
        return sorted(set(found) | {c for c in sure(x, weights, free, conf, request, params)
                                    if c in found or _near_cut(at, found, c, 0.5 * request.target_tokens) is None})

    return {"move": None, "move-z": move_z, "add": add, "off": off, "skip": skip}[name]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(data_root() / "retrieval"))
    ap.add_argument("--max-tokens", default="128,256,512")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--k", type=int, default=5)
    args = ap.parse_args()
    names = args.variants.split(",")
    if unknown := [n for n in names if n not in VARIANTS]:
        ap.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")

    from benchmarks.retrieval import setup
    from headseg.api import Segmenter
    from headseg.segmenter import topics
    from headseg.segmenter.evaluation.retrieval import chunk_all, evaluate_chunks, headseg_chunker

    rs, tok, count, embedder, qv = setup(args.data, None)
    seg, product, budgets = Segmenter(), topics.keep_apart, [int(b) for b in args.max_tokens.split(",")]
    load0 = os.getloadavg()[0]
    rows, recall = [], {}
    try:
        for name in names:
            topics.keep_apart = variant(name) or product
            cells = []
            for b in budgets:
                sc = evaluate_chunks(rs, chunk_all(rs, headseg_chunker(seg, max_tokens=b)), embedder.embed,
                                     k=args.k, count_tokens=count, question_vectors=qv)
                recall[name, b] = np.array([q["recall"] for q in sc.per_question])
                cells.append(f"{sc.chunks} / {100 * sc.overall['iou']:.2f} / {100 * sc.overall['recall']:.1f}")
            rows.append(f"| {name} | " + " | ".join(cells) + " |")
            print(f"<!-- {rows[-1]} -->", flush=True)
    finally:
        topics.keep_apart = product
    print(f"\ntop {args.k}, {len(rs.questions)} questions; chunks / IoU / recall ×100 "
          f"(load average {load0:.1f} → {os.getloadavg()[0]:.1f})\n")
    print("| variant | " + " | ".join(f"max_tokens {b}" for b in budgets) + " |")
    print("|---|" + "---:|" * len(budgets))
    print("\n".join(rows))
    others = [n for n in names if n != "off"]
    if "off" in names and others:
        print(f"\nrecall against `off`, question by question (one question is {100 / len(rs.questions):.2f} points): "
              "rose / fell, mean change ×100 [bootstrap 95 %], sign test p\n")
        print("| variant | " + " | ".join(f"max_tokens {b}" for b in budgets) + " |")
        print("|---|" + "---:|" * len(budgets))
        for name in others:
            cells = []
            for b in budgets:
                up, down, mean, lo, hi, p = paired(recall[name, b], recall["off", b])
                cells.append(f"{up} / {down}, {mean:+.2f} [{lo:+.2f}, {hi:+.2f}], p {p:.2f}")
            print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
