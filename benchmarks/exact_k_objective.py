"""What the search for exactly k segments should minimise: the plain scatter or the penalised search's objective.

``Segmenter.segment(text, segments=N)`` (the evaluation's k-oracle mode) fixes
the number of segments; the question is whether the segments should still pay
the penalised search's per-start penalty ``β(start)`` and short-segment
surcharge (``topics.search_objective``) or only their scatter.  On the cached
unit vectors (``benchmarks/topic_cache.py``) of every dev document this scores
both with the reference number of segments and prints, per data set and per
family of the tuning rule (``benchmarks/tune_topics.py``), the mean Pk of each
and how many documents each does better on.

    python -m benchmarks.exact_k_objective --cache runs/topic_cache_int8 --jobs 2
    python -m benchmarks.exact_k_objective --cache runs/topic_cache_int8 --after penalty   # β only, no surcharge
    python -m benchmarks.exact_k_objective --cache runs/topic_cache_int8 --after rel25,rel50,below25,below50

Several candidates (comma-separated ``--after``) are each compared with the
same ``--before`` scores, one table per candidate.

The tuning rule's verdict (``benchmarks/tune_topics.py``): the candidate
(``--after``) is adopted only if the mean over the families improves and no
family, and no Choi, lecture or dialseg711 data set, loses more than 0.01.

Cost: two exact-k searches per document; the meetings dominate.
"""

from __future__ import annotations

import argparse
import json
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from benchmarks.common import REPO, dataset_path, segmentation_root, slug
from benchmarks.topic_sweep import EXACT_K_OBJECTIVES, document_scores, load_cache
from benchmarks.tune_topics import FAMILIES, GUARDED


def score_set(job: tuple[str, str, str, int | None, tuple[str, ...]]) -> tuple[str, dict[str, list[float]]]:
    """Pk of every document of one data set under each objective."""
    from headseg.segmenter.topics import TopicParams

    name, cache, data_root, limit, objectives = job
    docs = load_cache(Path(cache) / f"{slug(name)}.npz", limit, dataset_path(name, data_root))
    return name, {o: document_scores(docs, TopicParams(), True, o)[0] for o in objectives}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(REPO / "runs" / "topic_cache"))
    ap.add_argument("--data-root", default=str(segmentation_root()))
    ap.add_argument("--limit", type=int, default=0, help="documents per data set (0 = all)")
    ap.add_argument("--jobs", type=int, default=1, help="data sets scored in parallel processes")
    ap.add_argument("--before", default="scatter", choices=EXACT_K_OBJECTIVES, help="the reference objective")
    ap.add_argument("--after", default="penalised",
                    help="the candidate, or several separated by commas: " + ", ".join(EXACT_K_OBJECTIVES))
    ap.add_argument("--json", default=None, help="also write every document's Pk here")
    args = ap.parse_args(argv)
    names = [n for fam in FAMILIES.values() for n in fam]
    missing = [n for n in names if not (Path(args.cache) / f"{slug(n)}.npz").exists()]
    if missing:
        raise SystemExit(f"not cached in {args.cache}: {', '.join(missing)}")
    before, afters = args.before, [a for a in args.after.split(",") if a]
    bad = [a for a in afters if a not in EXACT_K_OBJECTIVES]
    if bad or not afters:
        raise SystemExit(f"--after: one or more of {', '.join(EXACT_K_OBJECTIVES)}, got {args.after!r}")
    jobs = [(n, args.cache, args.data_root, args.limit or None, (before, *afters)) for n in names]
    # the largest first, so the parallel processes finish together
    jobs.sort(key=lambda j: -(Path(j[1]) / f"{slug(j[0])}.npz").stat().st_size)
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            res = dict(pool.map(score_set, jobs))
    else:
        res = dict(map(score_set, jobs))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    print(f"load average {os.getloadavg()[0]:.1f}")
    for after in afters:
        verdict(res, names, before, after)
    return 0


def verdict(res: dict[str, dict[str, list[float]]], names: list[str], before: str, after: str) -> None:
    """Print one candidate's table against ``before`` and the tuning rule's verdict."""
    print(f"\n| data set | documents | {before} Pk | {after} Pk | Δ | documents better / worse / same |")
    print("|---|---:|---:|---:|---:|---|")

    def row(label: str, sets: list[str]) -> tuple[float, float]:
        b = float(np.mean([np.mean(res[n][before]) for n in sets]))
        a = float(np.mean([np.mean(res[n][after]) for n in sets]))
        d = np.concatenate([np.subtract(res[n][after], res[n][before]) for n in sets])
        docs = sum(len(res[n][before]) for n in sets)
        print(f"| {label} | {docs} | {b:.3f} | {a:.3f} | {a - b:+.3f} | "
              f"{int((d < -1e-12).sum())} / {int((d > 1e-12).sum())} / {int((np.abs(d) <= 1e-12).sum())} |")
        return b, a

    for n in names:
        row(n, [n])
    fams = {f: row(f"**{f}** (family)", sets) for f, sets in FAMILIES.items()}
    b, a = (float(np.mean([v[i] for v in fams.values()])) for i in (0, 1))
    print(f"| **mean of the families** | | {b:.4f} | {a:.4f} | {a - b:+.4f} | |")
    lost = [f for f, (fb, fa) in fams.items() if fa > fb + 0.01]
    lost += [n for n in GUARDED if np.mean(res[n][after]) > np.mean(res[n][before]) + 0.01]
    rule = "adopt" if a < b and not lost else "keep " + before
    print(f"\ntuning rule for {after}: {rule} (losing more than 0.01: {', '.join(lost) or 'none'})")


if __name__ == "__main__":
    raise SystemExit(main())
