"""Retrieval with each chunker's chunks: IoU, recall and precision at equal token budgets (issue 24).

The chunking benchmark of ``../shared/data/retrieval`` (format and metric in
its SOURCE.txt and :mod:`headseg.segmenter.evaluation.retrieval`): all chunks
of all corpora in one index, top ``k`` by cosine of the embedded model's
mean-pooled embeddings.  Chunkers at each ``--max-tokens`` budget (the
embedded model's tokens, no special tokens):

* ``headseg``: ``Segmenter().segment(text, max_tokens=N)`` (the default engine);
* ``recursive``: LangChain's ``RecursiveCharacterTextSplitter`` (no overlap);
* ``fixed``: consecutive windows of N tokens.

    python benchmarks/retrieval.py                   # budgets 128 and 256, k = 5
    python benchmarks/retrieval.py --max-tokens 256 --k 5 --corpora chatlogs

Prints one Markdown table per budget: overall and per-corpus IoU / recall /
precision (×100) and the mean chunk size in tokens.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "retrieval"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--max-tokens", default="128,256")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--corpora", default=None, help="comma-separated corpus names (default all)")
    ap.add_argument("--methods", default="headseg,recursive,fixed")
    args = ap.parse_args()

    from headseg.analysis.model import embedded_model_path
    from headseg.analysis.tokenizer import Tokenizer
    from headseg.segmenter.api import Segmenter
    from headseg.segmenter.evaluation.embeddings import MeanPooledEmbedder
    from headseg.segmenter.evaluation.retrieval import (chunk_all, evaluate_chunks, fixed_token_chunker,
                                                        headseg_chunker, load_retrieval, recursive_chunker)

    rs = load_retrieval(args.data, None if args.corpora is None else args.corpora.split(","))
    tok = Tokenizer.from_dir(embedded_model_path())

    def count(t: str) -> int:
        return len(tok.encode(t)[0])

    embedder = MeanPooledEmbedder()
    qv = embedder.embed([q.text for q in rs.questions])
    seg = Segmenter() if "headseg" in args.methods else None
    load0 = os.getloadavg()[0]
    for budget in (int(x) for x in args.max_tokens.split(",")):
        makers = {"headseg": lambda: headseg_chunker(seg, max_tokens=budget),
                  "recursive": lambda: recursive_chunker(budget, count),
                  "fixed": lambda: fixed_token_chunker(budget, lambda t: tok.encode(t)[1])}
        rows = []
        for name in args.methods.split(","):
            t0 = time.perf_counter()
            chunks = chunk_all(rs, makers[name]())
            secs = time.perf_counter() - t0
            sc = evaluate_chunks(rs, chunks, embedder.embed, k=args.k, count_tokens=count, question_vectors=qv)
            rows.append((name, sc, secs))
        corpora = list(rs.corpora)
        print(f"\nmax_tokens={budget}, top {args.k}, {len(rs.questions)} questions, {len(corpora)} corpora; "
              f"IoU / recall / precision ×100 (load average {load0:.1f} → {os.getloadavg()[0]:.1f})\n")
        head = " | ".join(f"{c} IoU / R" for c in corpora)
        print(f"| chunker | chunks | mean tokens | IoU | recall | precision | {head} | chunking s |")
        print("|---|---:|---:|---:|---:|---:|" + "---:|" * len(corpora) + "---:|")
        for name, sc, secs in rows:
            per = " | ".join(f"{100 * sc.per_corpus[c]['iou']:.2f} / {100 * sc.per_corpus[c]['recall']:.1f}"
                             for c in corpora)
            o = sc.overall
            print(f"| {name} | {sc.chunks} | {sc.mean_chunk_tokens:.0f} | {100 * o['iou']:.2f} | "
                  f"{100 * o['recall']:.1f} | {100 * o['precision']:.2f} | {per} | {secs:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
