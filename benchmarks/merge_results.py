"""Merge one method's results from a separate ``--results-dir`` into ``benchmarks/results``.

Two benchmark processes must not share a results file (each rewrites it whole),
so a second method can run side by side into another folder and be merged here
afterwards.  The merged method's old records in the target are dropped first
(both k modes unless ``--keep-oracle``), so no stale row survives a new segmenter.

    python benchmarks/merge_results.py runs/results_headseg --method headseg
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from headseg.analysis.io import atomic_write_json  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", help="results folder of the separate run")
    ap.add_argument("--method", required=True)
    ap.add_argument("--target", default=str(REPO / "benchmarks" / "results"))
    ap.add_argument("--keep-oracle", action="store_true", help="keep the target's k-oracle records of the method")
    args = ap.parse_args(argv)
    for src in sorted(Path(args.source).glob("*.json")):
        dst = Path(args.target) / src.name
        new = json.loads(src.read_text(encoding="utf-8"))
        old = json.loads(dst.read_text(encoding="utf-8")) if dst.exists() else new
        if old is not new:
            old["records"] = {k: v for k, v in old["records"].items()
                              if not (v.get("method") == args.method
                                      and (v.get("mode") == "none" or not args.keep_oracle))}
            old["records"].update({k: v for k, v in new["records"].items() if v.get("method") == args.method})
            old["methods"][args.method] = new["methods"][args.method]
            old["datasets"].update(new["datasets"])
            old.setdefault("runs", []).extend(new.get("runs", []))
            old["updated"] = new.get("updated")
        atomic_write_json(dst, old)
        kept = sum(1 for v in old["records"].values() if v.get("method") == args.method)
        print(f"{dst.name}: {kept} {args.method} records")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
