"""Behaviour unchanged? headseg's boundaries on every dev document against the committed results.

A change that should not move any boundary (a refactoring, a faster engine) is checked by running
headseg again on every document of every family, both k modes, into a results folder of its own
(``benchmarks.segmentation --methods headseg --redo``; the reference is never written), then comparing each record's ``boundaries`` with the
reference folder's.  Exit 0 when every record is the same, 1 otherwise (the differing records
listed).  ``--compare-only`` compares two folders that already hold runs (e.g. the code before a
change and after it, run side by side).

    python -m benchmarks.same_boundaries --out runs/same                   # run, then compare (about 15 min quiet)
    python -m benchmarks.same_boundaries --compare-only runs/before runs/after

On 2026-12-04 the code of 0334c05 gave 2424 of the 2426 committed headseg records: dialseg711
call_id_56 and call_id_165 (k not given) differ from the committed ones on that code too, so compare a
change against a run of the code before it, not only against the committed files.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from benchmarks.common import REPO

METHOD = "headseg"


def compare(reference: Path, new: Path) -> tuple[int, list[str]]:
    """How many of ``new``'s headseg records ``reference`` also holds, and the keys of those whose
    boundaries differ (a record only one side holds is not compared)."""
    compared, differ = 0, []
    for path in sorted(new.glob("*.json")):
        ref_path = reference / path.name
        if not ref_path.exists():
            continue
        ref = json.loads(ref_path.read_text(encoding="utf-8"))["records"]
        for key, record in json.loads(path.read_text(encoding="utf-8"))["records"].items():
            if record.get("method") != METHOD or key not in ref:
                continue
            compared += 1
            if ref[key]["boundaries"] != record["boundaries"]:
                differ.append(key)
    return compared, differ


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", default=str(REPO / "benchmarks" / "results"),
                    help="results folder to compare with (default: the committed benchmarks/results)")
    ap.add_argument("--out", default="runs/same_boundaries",
                    help="folder the new run writes (replaced; never the reference)")
    ap.add_argument("--datasets", help="comma-separated names or prefixes (default: every family)")
    ap.add_argument("--compare-only", nargs=2, metavar=("REFERENCE", "NEW"),
                    help="compare two folders of results without running anything")
    args = ap.parse_args(argv)
    if args.compare_only:
        reference, new = map(Path, args.compare_only)
    else:
        reference, new = Path(args.reference), Path(args.out)
        if new.resolve() == reference.resolve():
            ap.error("--out must not be the reference folder")
        if new.exists():
            shutil.rmtree(new)
        new.mkdir(parents=True)  # empty: only what this run writes is compared
        from benchmarks import segmentation

        run = ["--methods", METHOD, "--redo", "--limit", "0", "--oracle", "both", "--results-dir", str(new),
               "--markdown", str(new / "results.md"), "--threads", "1", "--quiet"]
        if args.datasets:
            run += ["--datasets", args.datasets]
        segmentation.main(run)
    compared, differ = compare(reference, new)
    print(f"same boundaries on {compared - len(differ)} of {compared} {METHOD} records")
    for key in differ:
        print(f"  differs: {key}")
    return 0 if compared and not differ else 1


if __name__ == "__main__":
    raise SystemExit(main())
