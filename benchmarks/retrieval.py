"""Retrieval with each chunker's chunks: IoU, recall and precision at equal token budgets (issue 24).

The chunking benchmark of ``../shared/data/retrieval`` (format and metric in
its SOURCE.txt and :mod:`headseg.segmenter.evaluation.retrieval`): all chunks
of all corpora in one index, top ``k`` by cosine of the embedded model's
mean-pooled embeddings.  Chunkers at each ``--max-tokens`` budget N (the
embedded model's tokens, no special tokens):

* ``headseg``: ``Segmenter().segment(text, max_tokens=N)`` (the default engine;
  its size target is then 0.6·N, ``SegmentOptions.size_target``, and cuts at line breaks and
  before headings are cheaper, ``lines.cut_discounts``);
* ``headseg-notarget``: the same with ``target_tokens=N`` (a target at the limit: sizes close to
  the search's before the target; the discounts still apply);
* ``headseg-overlap``: ``max_tokens=N, overlap=1`` (one sentence repeated; chunks overlap);
* ``recursive``: LangChain's ``RecursiveCharacterTextSplitter`` (no overlap);
* ``fixed``: consecutive windows of N tokens;
* ``chonkie``: chonkie's ``SemanticChunker(chunk_size=N)`` on the embedded model;
* ``lc-semantic``: LangChain's ``SemanticChunker`` (langchain-experimental, its
  defaults: percentile breakpoints; it has no size limit) on the embedded model;
* ``cluster``: Smith & Troynikov's ClusterSemanticChunker re-implemented: 50-token
  pieces (the recursive splitter), grouped by a dynamic programme maximising the
  within-chunk embedding similarity, at most N tokens (N // 50 pieces).

The semantic chunkers need the ``bench`` extra (chonkie, langchain-experimental).

    python -m benchmarks.retrieval                   # budgets 128 and 256, k = 5
    python -m benchmarks.retrieval --max-tokens 256 --methods headseg,recursive --corpora chatlogs

Prints one Markdown table per budget: overall and per-corpus IoU / recall /
precision (×100) and the mean chunk size in tokens.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.common import data_root, default_model_dir, default_tokenizer

METHODS = "headseg,headseg-notarget,headseg-overlap,recursive,fixed,chonkie,lc-semantic,cluster"


def cluster_chunker(budget: int, count, embed, piece: int = 50):
    """Smith & Troynikov's ClusterSemanticChunker on ``embed``: ``piece``-token pieces, then the partition
    into runs of at most ``budget // piece`` pieces maximising the summed pairwise similarity inside runs
    (similarities centred on their mean off the diagonal, as in their implementation)."""
    from headseg.segmenter.evaluation.retrieval import recursive_chunker

    pieces_of = recursive_chunker(piece, count)
    width = max(budget // piece, 1)

    def chunk(text: str):
        spans = pieces_of(text)
        if len(spans) < 2:
            return spans
        e = embed([text[s:t] for s, t in spans])
        sim = e @ e.T
        n = len(spans)
        sim = sim - sim[~np.eye(n, dtype=bool)].mean()
        np.fill_diagonal(sim, 0.0)
        best = np.full(n + 1, -np.inf)
        best[0] = 0.0
        back = np.zeros(n + 1, dtype=int)
        for b in range(1, n + 1):
            for a in range(max(0, b - width), b):
                v = best[a] + sim[a:b, a:b].sum()
                if v > best[b]:
                    best[b], back[b] = v, a
        cuts, b = [], n
        while b > 0:
            cuts.append(b)
            b = back[b]
        edges = [0] + sorted(cuts)
        # the pieces leave whitespace out: a chunk runs from its first piece to the next chunk's
        starts = [spans[i][0] if i else 0 for i in edges[:-1]] + [len(text)]
        return [(s, t) for s, t in zip(starts[:-1], starts[1:]) if t > s]

    return chunk


def chonkie_chunker(budget: int, embedder, tokenizer_path: Path):
    """chonkie's SemanticChunker at ``chunk_size=budget`` on ``embedder`` (its defaults otherwise)."""
    from chonkie import SemanticChunker
    from chonkie.embeddings import BaseEmbeddings
    from tokenizers import Tokenizer

    class Embedded(BaseEmbeddings):
        def __init__(self):
            super().__init__()
            self._tok = Tokenizer.from_file(str(tokenizer_path / "tokenizer.json"))

        def embed(self, text):
            return embedder.embed([text])[0].astype(np.float32)

        def embed_batch(self, texts):
            return list(embedder.embed(list(texts)).astype(np.float32))

        @property
        def dimension(self):
            return 384

        def get_tokenizer(self):
            return self._tok

    chunker = SemanticChunker(embedding_model=Embedded(), chunk_size=budget)

    def chunk(text: str):
        return [(c.start_index, c.end_index) for c in chunker.chunk(text)]

    return chunk


def lc_semantic_chunker(embedder):
    """LangChain's SemanticChunker (defaults) on ``embedder``; its chunks are runs of its sentences
    (split by its own regex, joined with spaces), mapped back to corpus offsets by counting sentences."""
    from langchain_core.embeddings import Embeddings
    from langchain_experimental.text_splitter import SemanticChunker

    class Embedded(Embeddings):
        def embed_documents(self, texts):
            return embedder.embed(list(texts)).tolist()

        def embed_query(self, text):
            return embedder.embed([text])[0].tolist()

    splitter = SemanticChunker(Embedded())
    regex = splitter.sentence_split_regex

    def chunk(text: str):
        bounds = [0] + [m.end() for m in re.finditer(regex, text)] + [len(text)]
        sentence_starts = [b for b in bounds[:-1]]
        out, i = [], 0
        for piece in splitter.split_text(text):
            n = len(re.split(regex, piece))
            j = min(i + n, len(sentence_starts))
            out.append((sentence_starts[i], sentence_starts[j] if j < len(sentence_starts) else len(text)))
            i = j
        if out and out[-1][1] != len(text):
            out[-1] = (out[-1][0], len(text))
        return [(s, t) for s, t in out if t > s]

    return chunk


def setup(data: str, corpora: str | None):
    """What every retrieval benchmark starts from: the retrieval set (``corpora``: comma-separated names, None
    for all), the embedded model's tokenizer and token counter, the mean-pooled embedder and the questions'
    vectors."""
    from headseg.segmenter.evaluation.embeddings import MeanPooledEmbedder
    from headseg.segmenter.evaluation.retrieval import load_retrieval

    rs = load_retrieval(data, None if corpora is None else corpora.split(","))
    tok = default_tokenizer()

    def count(t: str) -> int:
        return len(tok.encode(t)[0])

    embedder = MeanPooledEmbedder()
    return rs, tok, count, embedder, embedder.embed([q.text for q in rs.questions])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(data_root() / "retrieval"))
    ap.add_argument("--max-tokens", default="128,256")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--corpora", default=None, help="comma-separated corpus names (default all)")
    ap.add_argument("--methods", default=METHODS)
    args = ap.parse_args()

    from headseg.api import Segmenter
    from headseg.segmenter.evaluation.retrieval import (chunk_all, evaluate_chunks, fixed_token_chunker,
                                                        format_row, format_table, headseg_chunker,
                                                        recursive_chunker)

    rs, tok, count, embedder, qv = setup(args.data, args.corpora)
    methods = args.methods.split(",")
    seg = Segmenter() if any(m.startswith("headseg") for m in methods) else None
    load0 = os.getloadavg()[0]
    once: dict = {}  # chunkers without a budget run once
    for budget in (int(x) for x in args.max_tokens.split(",")):
        makers = {"headseg": lambda: headseg_chunker(seg, max_tokens=budget),
                  "headseg-notarget": lambda: headseg_chunker(seg, max_tokens=budget, target_tokens=budget),
                  "headseg-overlap": lambda: headseg_chunker(seg, max_tokens=budget, overlap=1),
                  "recursive": lambda: recursive_chunker(budget, count),
                  "fixed": lambda: fixed_token_chunker(budget, lambda t: tok.encode(t)[1]),
                  "chonkie": lambda: chonkie_chunker(budget, embedder, default_model_dir()),
                  "lc-semantic": lambda: lc_semantic_chunker(embedder),
                  "cluster": lambda: cluster_chunker(budget, count, embedder.embed)}
        rows = []
        for name in methods:
            t0 = time.perf_counter()
            if name in once:
                sc, secs = once[name]
            else:
                chunks = chunk_all(rs, makers[name]())
                secs = time.perf_counter() - t0
                sc = evaluate_chunks(rs, chunks, embedder.embed, k=args.k, count_tokens=count, question_vectors=qv)
                if name == "lc-semantic":
                    once[name] = (sc, secs)
            rows.append((name, sc))
            print(f"<!-- {budget} {format_row(name, sc, list(rs.corpora))} chunking {secs:.1f} s -->", flush=True)
        print(f"\nmax_tokens={budget}, top {args.k}, {len(rs.questions)} questions, {len(rs.corpora)} corpora; "
              f"IoU / recall / precision ×100 (load average {load0:.1f} → {os.getloadavg()[0]:.1f})\n")
        print(format_table(rows, list(rs.corpora)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
