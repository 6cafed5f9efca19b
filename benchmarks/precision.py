"""Which precision the ONNX engine serves on CPU: Pk of fp32 and int8 on every dev set, side by side.

    .venv/bin/python -m benchmarks.precision [--limit N] [--precisions fp32,int8]

The rule (issue 11): int8 may be the CPU default only if its Pk is within 0.5
points of fp32's on every dev set.  Each set runs through `headseg evaluate
--method headseg --backend onnx --precision P` (no oracle k); the table prints
Pk ×100 per precision, the difference, and how many documents got exactly the
fp32 boundaries.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import load_average, segmentation_root

SETS = [f"choi/{c}/{f}" for c in (1, 2) for f in ("3-5", "6-8", "9-11", "3-11")] + [
    "choi/3/3-11", "lectures_ai", "lectures_physics", "dialseg711"]


def run(dataset: str, precision: str, limit: int, out: Path) -> dict:
    cmd = [sys.executable, "-m", "headseg", "evaluate", str(segmentation_root() / dataset), "--method", "headseg",
           "--backend", "onnx", "--precision", precision, "--json", "--quiet", "--out", str(out)]
    if limit:
        cmd += ["--limit", str(limit)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}\n{r.stderr[-2000:]}")
    (summary,) = json.loads(r.stdout)
    docs = json.loads(out.read_text())
    return {"pk": summary["metrics"]["pk"]["mean"], "docs": summary["documents"], "store": docs}


def boundaries(store: dict) -> dict:
    out = {}
    for key, rec in store.get("results", {}).items():
        if isinstance(rec, dict) and "predicted" in rec:
            out[key.split("|")[-1] if "|" in key else key] = rec["predicted"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=0, help="documents per set (0: all)")
    ap.add_argument("--precisions", default="fp32,int8")
    ap.add_argument("--sets", default=",".join(SETS))
    args = ap.parse_args()
    precisions = args.precisions.split(",")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for ds in args.sets.split(","):
            res = {p: run(ds, p, args.limit, Path(tmp) / f"{ds.replace('/', '_')}-{p}.json") for p in precisions}
            rows.append((ds, res))
            print(f"  {ds}: " + ", ".join(f"{p} {100 * r['pk']:.2f}" for p, r in res.items()), file=sys.stderr)
    print(f"\nPk ×100 (no oracle k), ONNX engine on CPU, {'all' if not args.limit else f'at most {args.limit}'} "
          f"documents per set; {load_average()}")
    head = " | ".join(precisions)
    print(f"| set | docs | {head} | " + " | ".join(f"{p} − {precisions[0]}" for p in precisions[1:]) + " |")
    print("|---|---|" + "---|" * (2 * len(precisions) - 1))
    worst = {p: 0.0 for p in precisions[1:]}
    for ds, res in rows:
        base = 100 * res[precisions[0]]["pk"]
        diffs = []
        for p in precisions[1:]:
            d = 100 * res[p]["pk"] - base
            worst[p] = max(worst[p], abs(d))
            diffs.append(f"{d:+.2f}")
        print(f"| {ds} | {res[precisions[0]]['docs']} | " + " | ".join(f"{100 * res[p]['pk']:.2f}" for p in precisions)
              + " | " + " | ".join(diffs) + " |")
    for p, w in worst.items():
        print(f"{p}: largest |ΔPk| {w:.2f} points -> {'may' if w <= 0.5 else 'may not'} be the CPU default")


if __name__ == "__main__":
    main()
