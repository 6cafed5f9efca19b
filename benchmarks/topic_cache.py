"""Cache the segmenter's unit vectors of every dev document, for fast sweeps of the topic search.

Encoding every unit is the slow part of segmentation; the search is cheap.  This
script runs the real pipeline up to the vectors (``Segmenter.units`` then
``Segmenter.unit_vectors``, the same calls ``segment`` makes) and stores, per data
set, one ``.npz`` under ``--out`` (default ``runs/topic_cache``, git-ignored) with
each document's vectors, its unit starts, the reference unit starts and
boundaries, the topic heads and the profile's output share (the model's own
embedding's columns follow the heads' when it is above 0).  ``benchmarks/topic_sweep.py`` reads them.

    python -m benchmarks.topic_cache --threads 1            # every dev document
    python -m benchmarks.topic_cache --datasets choi/3 --limit 20

Resumable: a data set whose file exists is skipped (``--redo`` recomputes).

``--all-heads`` caches every head of the model instead of the profile's topic
heads, each normalised and unweighted, in float16 (default ``runs/topic_cache_all``,
with the head list): ``topic_sweep.py --layers 5:1,0:0.25`` mixes layers from it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.common import REPO, offline_settings, segmentation_root, select_datasets, slug
from headseg.analysis.writing import atomic_save_npz


def cache_dataset(seg, path: Path, out: Path, limit: int | None, batch_docs: int = 8,
                  dtype=np.float32) -> int:
    from headseg.analysis.text import tokenize
    from headseg.segmenter.encode import unit_token_ranges
    from headseg.segmenter.evaluation.loaders import iter_documents

    docs = list(iter_documents(path, limit=limit))
    arrays: dict[str, np.ndarray] = {}
    ids = []
    for s in range(0, len(docs), batch_docs):
        chunk = docs[s:s + batch_docs]
        items = []
        for d in chunk:
            tok = tokenize(d.text, seg.loaded.tokenizer)
            items.append((tok, seg.units(d.text, doc=tok)))
        vectors = seg.unit_vectors_many(items)
        for d, (tok, units), x in zip(chunk, items, vectors):
            i = len(ids)
            ids.append(d.id)
            arrays[f"x{i}"] = x.astype(dtype)
            arrays[f"u{i}"] = np.asarray([a for a, _ in units], np.int64)
            arrays[f"r{i}"] = np.asarray(d.starts, np.int64)
            arrays[f"b{i}"] = np.asarray(d.boundaries, np.int64)
            arrays[f"len{i}"] = np.asarray([len(d.text)], np.int64)
            r = unit_token_ranges(tok, units)
            arrays[f"t{i}"] = (r[:, 1] - r[:, 0]).astype(np.int64)
        print(f"  {path.name}: {len(ids)}/{len(docs)}", file=sys.stderr, flush=True)
    arrays["ids"] = np.asarray(ids)
    arrays["heads"] = np.asarray(seg.topic_heads, np.int64)
    # the share of the model's own embedding, appended after the heads' columns (0: none)
    arrays["output_weight"] = np.asarray([seg.profile.topic_output_weight])
    arrays["head_dim"] = np.asarray([seg.loaded.info.head_dim])
    atomic_save_npz(out, **arrays)
    return len(ids)


def add_tokens(tokenizer, path: Path, target: Path) -> None:
    """Add the unit token counts ``t{i}`` to a cache written before they were stored."""
    from headseg.analysis.text import tokenize
    from headseg.segmenter.encode import unit_token_ranges
    from headseg.segmenter.evaluation.loaders import iter_documents

    z = dict(np.load(target, allow_pickle=False))
    ids = list(z["ids"])
    for i, d in enumerate(iter_documents(path, limit=len(ids))):
        if d.id != ids[i]:
            raise SystemExit(f"{target}: document {i} is {ids[i]}, the data has {d.id}; rebuild the cache")
        starts = z[f"u{i}"]
        units = list(zip(starts, np.append(starts[1:], len(d.text))))
        r = unit_token_ranges(tokenize(d.text, tokenizer), units)
        z[f"t{i}"] = (r[:, 1] - r[:, 0]).astype(np.int64)
    atomic_save_npz(target, **z)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", default=str(segmentation_root()))
    ap.add_argument("--datasets", default=None, help="names or prefixes, as benchmarks/segmentation.py")
    ap.add_argument("--limit", type=int, default=0, help="documents per data set (0 = all)")
    ap.add_argument("--out", default=None, help="default runs/topic_cache (runs/topic_cache_all with --all-heads)")
    ap.add_argument("--all-heads", action="store_true", help="every head, unweighted, float16")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--backend", default="torch",
                    help="the engine that computes the vectors: torch (fp32 reference) or auto (the shipped "
                         "default, int8 ONNX on CPU: what an end-to-end run computes)")
    ap.add_argument("--redo", action="store_true")
    ap.add_argument("--add-tokens", action="store_true", help="only add unit token counts to existing caches")
    args = ap.parse_args(argv)
    offline_settings()
    import torch

    torch.set_num_threads(args.threads)
    from headseg.api import Segmenter

    seg = Segmenter(backend=args.backend, threads=args.threads if args.backend != "torch" else None, quiet=True)
    if args.all_heads:
        info = seg.loaded.info
        every = tuple((l, h) for l in range(info.num_layers) for h in range(info.num_heads))
        seg = seg.with_encoder(dataclasses.replace(seg.encoder, topic_heads=every,
                                                   topic_weights=np.ones(len(every))))
    out_dir = Path(args.out or REPO / "runs" / ("topic_cache_all" if args.all_heads else "topic_cache"))
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, rel in select_datasets(args.datasets):
        target = out_dir / f"{slug(name)}.npz"
        if args.add_tokens:
            if target.exists():
                add_tokens(seg.loaded.tokenizer, Path(args.data_root) / rel, target)
                print(f"{name}: token counts added", file=sys.stderr)
            continue
        if target.exists() and not args.redo:
            print(f"{name}: cached", file=sys.stderr)
            continue
        t0 = time.perf_counter()
        n = cache_dataset(seg, Path(args.data_root) / rel, target, args.limit or None,
                          dtype=np.float16 if args.all_heads else np.float32)
        print(f"{name}: {n} documents in {time.perf_counter() - t0:.0f} s (load {os.getloadavg()[0]:.1f})",
              file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
