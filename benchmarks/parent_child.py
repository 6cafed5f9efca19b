"""Parent-child retrieval on headseg's segment tree against flat chunks of the parents' size (issue 36).

The chunking benchmark of ``../shared/data/retrieval`` (format and metric in its SOURCE.txt and
:mod:`headseg.segmenter.evaluation.retrieval`; every chunk of every corpus in one index, top ``k``
by the cosine of the embedded model's mean-pooled embeddings).  Rows:

* ``tree``: ``level="tree", max_tokens=LEAF``: the leaves (at most LEAF tokens) are indexed and
  retrieved, and their parent nodes' spans are scored, each parent once (LangChain's
  ``ParentDocumentRetriever``, LlamaIndex's ``AutoMergingRetriever`` without its merge threshold);
* ``headseg @P`` / ``recursive @P`` / ``fixed @P``: flat chunks at the parents' mean size P
  (headseg with ``target_tokens=P`` under the parents' own limit ``TREE_SCALE·LEAF``; LangChain's
  recursive splitter and fixed windows at ``chunk_size=P``);
* ``headseg @cap`` / ``recursive @cap``: flat chunks at the parents' limit;
* ``headseg @LEAF`` / ``recursive @LEAF``: the leaves' budget, flat (what the tree retrieves, returned
  without its parents).

    python -m benchmarks.parent_child                 # LEAF 128, k 5: the table of docs/results.md
    python -m benchmarks.parent_child --leaf 64 --k 3

"mean tokens" is the mean size of what a question can get back: the distinct parents for ``tree``,
the chunks otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys

from benchmarks.common import data_root


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(data_root() / "retrieval"))
    ap.add_argument("--leaf", type=int, default=128, help="the leaves' max_tokens")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--corpora", default=None, help="comma-separated corpus names (default all)")
    args = ap.parse_args()

    from headseg.api import Segmenter
    from headseg.segmenter.evaluation.retrieval import (chunk_all, chunk_all_with_parents, evaluate_chunks,
                                                        fixed_token_chunker, format_row, format_table,
                                                        headseg_chunker, headseg_tree_chunker, recursive_chunker)
    from headseg.segmenter.tree import TREE_SCALE
    from benchmarks.retrieval import setup  # the retrieval benchmark's own set-up

    rs, tok, count, embedder, qv = setup(args.data, args.corpora)
    seg = Segmenter(quiet=True)
    load0 = os.getloadavg()[0]
    corpora = list(rs.corpora)
    rows = []

    def score(name, chunks, parents=None):
        sc = evaluate_chunks(rs, chunks, embedder.embed, k=args.k, count_tokens=count, question_vectors=qv,
                             parents=parents)
        rows.append((name, sc))
        print(f"<!-- {format_row(name, sc, corpora)} -->", flush=True)
        return sc

    leaves, parents = chunk_all_with_parents(rs, headseg_tree_chunker(seg, max_tokens=args.leaf))
    p = round(score(f"tree (leaves ≤{args.leaf} → parents)", leaves, parents).mean_chunk_tokens)
    cap = int(args.leaf * TREE_SCALE)
    score(f"headseg @P={p}", chunk_all(rs, headseg_chunker(seg, max_tokens=max(cap, p), target_tokens=p)))
    score(f"recursive @P={p}", chunk_all(rs, recursive_chunker(p, count)))
    score(f"fixed @P={p}", chunk_all(rs, fixed_token_chunker(p, lambda t: tok.encode(t)[1])))
    score(f"headseg @cap={cap}", chunk_all(rs, headseg_chunker(seg, max_tokens=cap)))
    score(f"recursive @cap={cap}", chunk_all(rs, recursive_chunker(cap, count)))
    score(f"headseg @{args.leaf} (the leaves, flat)", leaves)
    score(f"recursive @{args.leaf}", chunk_all(rs, recursive_chunker(args.leaf, count)))
    print(f"\nparent-child: leaves max_tokens={args.leaf}, top {args.k} leaves, {len(rs.questions)} questions, "
          f"{len(corpora)} corpora; IoU / recall / precision ×100 "
          f"(load average {load0:.1f} → {os.getloadavg()[0]:.1f})\n")
    print(format_table(rows, corpora), flush=True)


if __name__ == "__main__":
    sys.exit(main())
