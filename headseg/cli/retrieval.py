"""``headseg retrieval``: score chunkers by what their chunks retrieve (IoU, recall, precision).

Data in the form of Smith & Troynikov's chunking benchmark: a folder with
``corpora/*.md`` (or ``*.txt``) and ``questions.jsonl`` (format and metric in
:mod:`headseg.segmenter.evaluation.retrieval`, which does the work).  Every
chunk of every corpus goes into one index; each question retrieves its top
``--k`` chunks by the cosine of mean-pooled embeddings of ``--embedder`` (the
embedded all-MiniLM-L6-v2 by default).  The chunkers:

* ``headseg``: this segmenter with the segmentation flags (``--max-tokens``,
  ``--target-tokens``, ``--overlap``...), exactly as ``headseg segment`` takes them;
* ``tree``: parent-child retrieval on headseg's segment tree (``--level tree`` with the
  same flags, ``--depth`` too): the leaves (at most ``--max-tokens``) are retrieved and
  their parent nodes' spans scored, each parent once;
* ``recursive``: LangChain's ``RecursiveCharacterTextSplitter`` at ``--max-tokens``
  (the ``langchain`` extra);
* ``fixed``: consecutive windows of ``--max-tokens`` tokens.

Sizes are in the tokens of ``--model`` (the segmenter's).  Bad data is one line
and exit 2, before any model is loaded.
"""

from __future__ import annotations

import argparse
import json

from headseg.analysis.errors import InputError
from headseg.config import SegmenterConfig
from headseg.segmenter.options import SegmentOptions, add_option_flags

from . import options

#: the chunkers ``--chunker`` takes, in table order
CHUNKERS = ("headseg", "tree", "recursive", "fixed")


def check_args(args: argparse.Namespace) -> SegmentOptions:
    """The segmentation options of the headseg chunker, after every argument check (exit 2)."""
    opts = SegmentOptions.from_args(args)
    names = chunker_names(args.chunker)
    options.check_positive(args, "k")
    if opts.max_tokens is None and set(names) & {"recursive", "fixed"}:
        raise InputError("--chunker recursive and fixed need --max-tokens (their budget)")
    if "recursive" in names:
        options.require("langchain_text_splitters")
    options.require(*options.TORCH_MODULES)  # the embedder runs on torch
    segmenting = bool(set(names) & {"headseg", "tree"})
    if segmenting:
        SegmenterConfig.from_args(args)  # a bad segmenter setting is one line now, before any model
    options.check_model_and_profile(None, args.profile if segmenting else None)
    return opts


def chunker_names(spec: str) -> list[str]:
    """The chunkers of ``--chunker`` (comma-separated, or ``all``), in table order."""
    names = list(CHUNKERS) if spec.strip() == "all" else [n.strip() for n in spec.split(",") if n.strip()]
    bad = [n for n in names if n not in CHUNKERS]
    if bad or not names:
        raise InputError(f"--chunker: unknown chunker '{bad[0] if bad else spec}' (from: {', '.join(CHUNKERS)}, all)")
    return sorted(set(names), key=CHUNKERS.index)


def run(args: argparse.Namespace) -> int:
    """Chunk the corpora with each chunker, score the retrieval, print the table; returns the exit code."""
    from headseg.analysis.model import resolve_model_path
    from headseg.analysis.tokenizer import Tokenizer
    from headseg.segmenter.evaluation.embeddings import MeanPooledEmbedder
    from headseg.segmenter.evaluation.retrieval import (chunk_all, chunk_all_with_parents, evaluate_chunks,
                                                        fixed_token_chunker, format_table, headseg_chunker,
                                                        headseg_tree_chunker, load_retrieval, recursive_chunker)

    opts = check_args(args)
    names = chunker_names(args.chunker)
    rs = load_retrieval(args.data, None if args.corpora is None else [c for c in args.corpora.split(",") if c])
    if not rs.questions:
        raise InputError(f"{args.data}: no questions about the corpora asked for")
    tok = Tokenizer.from_dir(resolve_model_path(args.model)[0])

    def count(text: str) -> int:
        return len(tok.encode(text)[0])

    embedder = MeanPooledEmbedder(args.embedder)
    question_vectors = embedder.embed([q.text for q in rs.questions])
    rows, seg = [], None
    for name in names:
        if name in ("headseg", "tree") and seg is None:
            from headseg.api import Segmenter

            seg = Segmenter(config=SegmenterConfig.from_args(args, quiet=args.quiet))
        parents = None
        if name == "tree":
            chunks, parents = chunk_all_with_parents(rs, headseg_tree_chunker(seg, opts))
        elif name == "headseg":
            chunks = chunk_all(rs, headseg_chunker(seg, opts))
        elif name == "recursive":
            chunks = chunk_all(rs, recursive_chunker(opts.max_tokens, count))
        else:
            chunks = chunk_all(rs, fixed_token_chunker(opts.max_tokens, lambda t: tok.encode(t)[1]))
        scores = evaluate_chunks(rs, chunks, embedder.embed, k=args.k, count_tokens=count,
                                 question_vectors=question_vectors, parents=parents)
        rows.append((name, scores))
    if args.json:
        print(json.dumps({"k": args.k, "questions": len(rs.questions),
                          "chunkers": {n: sc.to_dict() for n, sc in rows}}, indent=2))
    else:
        print(f"top {args.k}, {len(rs.questions)} questions, {len(rs.corpora)} corpora; "
              f"IoU / recall / precision ×100\n")
        print(format_table(rows, list(rs.corpora)))
    return 0


def register(sub) -> None:
    """Add the ``retrieval`` command to the subparsers ``sub``."""
    p = sub.add_parser(
        "retrieval", help="score chunkers by retrieval (IoU, recall, precision of the top-k chunks)",
        description="Chunk the corpora of a retrieval set (corpora/ + questions.jsonl, the form of Smith & "
                    "Troynikov's chunking benchmark), retrieve each question's top-k chunks by embedding "
                    "cosine, and print character IoU, recall and precision overall and per corpus.")
    p.add_argument("data", metavar="DATA", help="folder with corpora/*.md|*.txt and questions.jsonl")
    p.add_argument("--chunker", default="headseg", metavar="C[,C...]",
                   help=f"chunkers to score, comma-separated, or 'all' (from: {', '.join(CHUNKERS)}; "
                        "recursive and fixed at --max-tokens)")
    p.add_argument("--k", type=int, default=5, help="chunks retrieved per question (default 5)")
    p.add_argument("--embedder", default=None, metavar="PATH",
                   help="model whose mean-pooled embeddings retrieve (default: embedded all-MiniLM-L6-v2)")
    p.add_argument("--corpora", default=None, metavar="NAME[,NAME...]", help="only these corpora (file stems)")
    p.add_argument("--json", action="store_true", help="print the scores as JSON (fractions)")
    options.add_model(p)
    options.add_profile(p, "head profile for the headseg chunker")
    options.add_engine(p, "for the headseg chunker")
    options.add_quiet(p)
    add_option_flags(p)  # the headseg chunker's options, as `headseg segment` takes them
    p.set_defaults(func=run)
