"""Merge one method's results from a separate ``--results-dir`` into ``benchmarks/results``.

Two benchmark processes must not share a results file (each rewrites it whole),
so a second method can run side by side into another folder and be merged here
afterwards.  The method's old records in the target are dropped first: those of
the k modes the source holds, and with ``--drop-other-modes`` every mode, so no
stale row survives a new segmenter.

    python -m benchmarks.merge_results runs/results_headseg --method headseg --drop-other-modes
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.common import REPO
from headseg.analysis.writing import atomic_write_json


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", help="results folder of the separate run")
    ap.add_argument("--method", required=True)
    ap.add_argument("--target", default=str(REPO / "benchmarks" / "results"))
    ap.add_argument("--drop-other-modes", action="store_true",
                    help="also drop the method's target records of k modes the source does not hold")
    args = ap.parse_args(argv)
    for src in sorted(Path(args.source).glob("*.json")):
        dst = Path(args.target) / src.name
        new = json.loads(src.read_text(encoding="utf-8"))
        old = json.loads(dst.read_text(encoding="utf-8")) if dst.exists() else new
        if old is not new:
            modes = {v.get("mode") for v in new["records"].values() if v.get("method") == args.method}
            old["records"] = {k: v for k, v in old["records"].items()
                              if not (v.get("method") == args.method
                                      and (v.get("mode") in modes or args.drop_other_modes))}
            old["records"].update({k: v for k, v in new["records"].items() if v.get("method") == args.method})
            old["methods"][args.method] = new["methods"][args.method]
            for name, info in new["datasets"].items():
                # the union of the documents: the source may hold a subset of the target's
                entry = old["datasets"].setdefault(name, {"path": info.get("path"), "documents": {}})
                entry["documents"].update(info.get("documents", {}))
            runs = old.setdefault("runs", [])
            runs.extend(r for r in new.get("runs", []) if r not in runs)
            old["updated"] = new.get("updated")
        atomic_write_json(dst, old)
        kept = sum(1 for v in old["records"].values() if v.get("method") == args.method)
        print(f"{dst.name}: {kept} {args.method} records")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
