"""The short-document tables: Pk and the share of documents with exactly the reference boundaries.

Reads the results ``benchmarks/segmentation.py`` stored for the short family (``short_dev``) or
its guard (``short_sections_dev``), and prints one row per method and k mode, overall and by
group: for the short family by kind of text (everyday paragraphs / segments of the dev sets) and
by what joins the paragraphs (blank line, line break, space); for the guard by the number of
reference segments (one, or two, each written as several paragraphs).

    python -m benchmarks.segmentation --datasets short_dev --methods headseg,embedding-cosine --limit 0
    python -m benchmarks.short_table [benchmarks/results/short_dev.json]
    python -m benchmarks.short_table benchmarks/results/short_sections_dev.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from benchmarks.common import REPO

DEFAULT = REPO / "benchmarks" / "results" / "short_dev.json"


def short_groups(doc_id: str) -> list[str]:
    kind = "everyday" if doc_id.startswith("everyday") else "dev-set segments"
    return ["all", kind, "joined by " + doc_id.rsplit("-", 1)[1]]


def guard_groups(doc_id: str) -> list[str]:
    return ["all", {"1": "one segment", "2": "two segments"}[doc_id.split("-")[-2]]]


#: data set -> (the groups of a document id, the columns in order)
GROUPS = {
    "short_dev": (short_groups, ["all", "everyday", "dev-set segments", "joined by blank", "joined by line",
                                 "joined by space"]),
    "short_sections_dev": (guard_groups, ["all", "one segment", "two segments"]),
}


def table(path: Path) -> str:
    data = json.loads(path.read_text(encoding="utf-8"))
    known = [name for name in data["datasets"] if name in GROUPS]
    if len(known) != 1:
        raise SystemExit(f"{path}: holds {sorted(data['datasets'])}, not one of {sorted(GROUPS)}")
    name = known[0]
    groups, names = GROUPS[name]
    refs = data["datasets"][name]["documents"]
    cells: dict[tuple, list[tuple[float, bool]]] = defaultdict(list)
    for rec in data["records"].values():
        if rec.get("status") != "ok" or rec["doc"] not in refs:
            continue
        exact = rec["boundaries"] == refs[rec["doc"]]["boundaries"]
        for g in groups(rec["doc"]):
            cells[(rec["method"], rec["mode"], g)].append((rec["scores"]["pk"], exact))
    lines = ["| method | k | " + " | ".join(f"{n}: Pk / exact" for n in names) + " |",
             "|---|---|" + "---:|" * len(names)]
    for method, mode in sorted({(m, k) for m, k, _ in cells}):
        row = []
        for n in names:
            vals = cells.get((method, mode, n))
            if not vals:
                row.append("-")
                continue
            pk = sum(v for v, _ in vals) / len(vals)
            ex = sum(e for _, e in vals) / len(vals)
            row.append(f"{pk:.3f} / {100 * ex:.0f} % ({len(vals)})")
        lines.append(f"| {method} | {'given' if mode == 'oracle' else 'auto'} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="?", type=Path, default=DEFAULT,
                    help="a results file of segmentation.py (default benchmarks/results/short_dev.json)")
    print(table(ap.parse_args(argv).results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
