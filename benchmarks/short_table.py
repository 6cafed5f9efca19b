"""The short-document table: Pk and the share of documents with exactly the reference boundaries.

Reads the results ``benchmarks/segmentation.py --datasets short_dev`` stored, and prints one row
per method and k mode, overall and by kind of text (everyday paragraphs / segments of the dev sets)
and by what joins the paragraphs (blank line, line break, space).

    python benchmarks/segmentation.py --datasets short_dev --methods headseg,embedding-cosine --limit 0
    python benchmarks/short_table.py [benchmarks/results/short_dev.json]
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

DEFAULT = Path(__file__).resolve().parent / "results" / "short_dev.json"


def groups(doc_id: str) -> list[str]:
    kind = "everyday" if doc_id.startswith("everyday") else "dev-set segments"
    return ["all", kind, "joined by " + doc_id.rsplit("-", 1)[1]]


def table(path: Path) -> str:
    data = json.loads(path.read_text(encoding="utf-8"))
    refs = data["datasets"]["short_dev"]["documents"]
    cells: dict[tuple, list[tuple[float, bool]]] = defaultdict(list)
    for rec in data["records"].values():
        if rec.get("status") != "ok" or rec["doc"] not in refs:
            continue
        exact = rec["boundaries"] == refs[rec["doc"]]["boundaries"]
        for g in groups(rec["doc"]):
            cells[(rec["method"], rec["mode"], g)].append((rec["scores"]["pk"], exact))
    names = ["all", "everyday", "dev-set segments", "joined by blank", "joined by line", "joined by space"]
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


if __name__ == "__main__":
    print(table(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT))
