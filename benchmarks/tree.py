"""The segment tree (``level="tree"``) against two-level references: coarse level vs the coarse reference,
leaves vs all boundaries, beside flat headseg and the embedding baseline.

Data: ``wiki50_dev`` (sections ``========,2,`` vs every header) and ``meetings_ami_dev_tree`` (topics
``========,2,`` vs topics and subtopics); the coarse reference is the file read with ``wiki_level=2``.
The unit vectors are computed once into ``--cache`` (default ``runs/tree_cache``, git-ignored), then
every variant is a search per document (``segmenter.tree.tree_levels``, the call ``segment`` makes).

    python -m benchmarks.tree                       # the table of docs/results.md
    python -m benchmarks.tree --scale 3 --fanout 8  # a variant of the tree's constants
    python -m benchmarks.tree --free-scale 1.25,1.5 --evidence 2,3 --no-embedding   # a grid of them

The trees here have no size limits, so their levels come from ``TREE_FREE_SCALE`` and
``TREE_EVIDENCE`` (``--free-scale``, ``--evidence``; comma-separated values make a grid, one table
each); ``--scale`` and ``--fanout`` are the constants of trees under size limits.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from benchmarks.common import REPO, offline_settings, segmentation_root

SETS = (("wiki50_dev", 2), ("meetings_ami_dev_tree", 2))


def load(name: str, coarse_level: int):
    from headseg.segmenter.evaluation.loaders import iter_documents

    fine = list(iter_documents(segmentation_root() / name))
    coarse = list(iter_documents(segmentation_root() / name, wiki_level=coarse_level))
    for f, c in zip(fine, coarse):
        if f.text != c.text or f.id != c.id:
            raise SystemExit(f"{name}: the two levels of {f.id} do not share one text")
    return fine, coarse


def cache(seg, name: str, docs, folder: Path) -> list[dict]:
    """Per document: its unit spans, unit tokens and unit vectors (``topic_cache.py``'s cache, computed once)."""
    from benchmarks.topic_cache import cache_dataset

    path = folder / f"{name}.npz"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        cache_dataset(seg, segmentation_root() / name, path, None)
    z = np.load(path)
    out = []
    for i, d in enumerate(docs):
        starts = [int(a) for a in z[f"u{i}"]]
        out.append({"x": z[f"x{i}"].astype(np.float64), "units": list(zip(starts, starts[1:] + [len(d.text)])),
                    "tokens": z[f"t{i}"]})
    return out


def scores(doc, chars) -> tuple[float, float, int]:
    from headseg.segmenter.evaluation.loaders import snap_offsets
    from headseg.segmenter.evaluation.metrics import score_document

    hyp = snap_offsets(chars, doc.starts, len(doc.text))
    s = score_document(doc.boundaries, hyp, doc.n)
    return s.pk, s.windowdiff, len(hyp) + 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", type=Path, default=REPO / "runs" / "tree_cache")
    ap.add_argument("--scale", type=float, default=None, help="the penalty scale per level under size limits")
    ap.add_argument("--fanout", type=int, default=None, help="the automatic depth's fan-out under size limits")
    ap.add_argument("--free-scale", default=None, help="the penalty scale per level without size limits "
                    "(TREE_FREE_SCALE; comma-separated: a grid)")
    ap.add_argument("--evidence", default=None, help="the evidence a level k needs, EVIDENCE ** k "
                    "(TREE_EVIDENCE; comma-separated: a grid)")
    ap.add_argument("--depth", type=int, default=None, help="a fixed depth (default: automatic)")
    ap.add_argument("--no-embedding", action="store_true", help="leave the embedding baseline out")
    args = ap.parse_args(argv)
    offline_settings()

    from headseg import Segmenter
    from headseg.analysis.text import tokenize
    from headseg.segmenter import tree as tree_mod
    from headseg.segmenter.document import Document
    from headseg.segmenter.options import SegmentOptions
    from headseg.segmenter.topics import document_boundaries

    if args.scale is not None:
        tree_mod.TREE_SCALE = args.scale
    if args.fanout is not None:
        tree_mod.TREE_FANOUT = args.fanout
    try:
        scales = [float(v) for v in args.free_scale.split(",")] if args.free_scale else [tree_mod.TREE_FREE_SCALE]
        evidence = [float(v) for v in args.evidence.split(",")] if args.evidence else [tree_mod.TREE_EVIDENCE]
    except ValueError:
        ap.error("--free-scale and --evidence take comma-separated numbers")
    if min(scales) <= 1 or min(evidence) <= 0:
        ap.error("--free-scale must be above 1 and --evidence above 0")
    seg = Segmenter(quiet=True)
    request = SegmentOptions().request()
    embed = None
    if not args.no_embedding:
        from headseg.segmenter.evaluation.baselines import EmbeddingCosineMethod

        embed = EmbeddingCosineMethod()

    def table() -> None:
        rows = []
        for name, level in SETS:
            fine, coarse = load(name, level)
            cached = cache(seg, name, fine, args.cache)
            acc = {k: [] for k in ("flat_c", "flat_a", "tree_c", "tree_a", "emb_c", "emb_a", "depth")}
            for f, c, v in zip(fine, coarse, cached):
                # the cached units over the text's tokens, as plain text (no Markdown structure), as before
                doc = Document.build(f.text, tokenize(f.text, seg.loaded.tokenizer), v["units"])
                starts = [a for a, _ in v["units"]]
                flat = document_boundaries(doc, v["x"], request, seg.params).cuts
                flat_chars = [starts[i] for i in flat]
                levels = tree_mod.tree_levels(doc, v["x"], request, seg.params, depth=args.depth)
                top = [starts[i] for i in levels[0].cuts]
                leaves = [starts[i] for i in levels[-1].cuts]
                acc["flat_c"].append(scores(c, flat_chars))
                acc["flat_a"].append(scores(f, flat_chars))
                acc["tree_c"].append(scores(c, top))
                acc["tree_a"].append(scores(f, leaves))
                acc["depth"].append(len(levels))
                acc.setdefault("ref_depth", []).append(2 if c.num_segments < f.num_segments else 1)
                if embed is not None:
                    units = embed.predict(f).unit_boundaries(f)
                    chars = [f.starts[u] for u in units]
                    acc["emb_c"].append(scores(c, chars))
                    acc["emb_a"].append(scores(f, chars))
            ref_c = np.mean([c.num_segments for c in coarse])
            ref_a = np.mean([f.num_segments for f in fine])
            rows.append((name, acc, ref_c, ref_a))
        print("| data set | reference | method | Pk | WindowDiff | segments (ref) |")
        print("|---|---|---|---:|---:|---:|")
        for name, acc, ref_c, ref_a in rows:
            for ref, tag, ref_n in (("coarse", "c", ref_c), ("all", "a", ref_a)):
                for label, key in (("headseg flat", "flat"), ("headseg tree (" + ("top level" if tag == "c" else "leaves")
                                                              + ")", "tree"), ("embedding baseline", "emb")):
                    vals = acc[f"{key}_{tag}"]
                    if not vals:
                        continue
                    pk, wd, m = np.mean(vals, axis=0)
                    print(f"| {name} | {ref} | {label} | {pk:.3f} | {wd:.3f} | {m:.1f} ({ref_n:.1f}) |")
            print(f"| {name} | | tree depth (mean) | {np.mean(acc['depth']):.2f} | | |")
            # the reference's own depth: two levels where its sections have subsections, else one
            two = np.asarray(acc["ref_depth"]) == 2
            depth = np.asarray(acc["depth"])
            print(f"| {name} | | reference depth (mean) | {np.mean(acc['ref_depth']):.2f} | | |")
            print(f"| {name} | | tree depth where the reference has two levels ({two.sum()} of {len(two)}) | "
                  f"{depth[two].mean() if two.any() else float('nan'):.2f} | | |")
            print(f"| {name} | | tree depth where it has one ({(~two).sum()}) | "
                  f"{depth[~two].mean() if (~two).any() else float('nan'):.2f} | | |")

    for free_scale in scales:
        for ev in evidence:
            tree_mod.TREE_FREE_SCALE, tree_mod.TREE_EVIDENCE = free_scale, ev
            if len(scales) > 1 or len(evidence) > 1:
                print(f"\nTREE_FREE_SCALE {free_scale}, TREE_EVIDENCE {ev}\n")
            table()
    return 0


if __name__ == "__main__":
    sys.exit(main())
