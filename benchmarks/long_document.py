"""Segment one long document (default 0.5 MB and 5 MB) and report time and peak RSS.

The document is real prose: the manifesto corpus and Choi texts from
../shared/data, concatenated (topic lines removed) and repeated up to the size.
Each size runs in a fresh subprocess so peak RSS is that run's own.

    python benchmarks/long_document.py [--sizes 0.5,5] [--backend torch]

Prints a Markdown table; linear scaling shows as a constant seconds-per-MB.
"""

from __future__ import annotations

import argparse
import glob
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


def make_text(n_bytes: int) -> str:
    files = sorted(glob.glob(str(DATA / "corpus" / "manifesto_*.txt")))
    files += sorted(glob.glob(str(DATA / "segmentation" / "choi" / "1" / "*" / "*.ref")))
    parts, size = [], 0
    while size < n_bytes:
        for f in files:
            lines = [l for l in Path(f).read_text(encoding="utf-8").splitlines() if l.strip() != "=========="]
            chunk = "\n".join(lines) + "\n"
            parts.append(chunk)
            size += len(chunk.encode("utf-8"))
            if size >= n_bytes:
                break
    text = "".join(parts)
    return text.encode("utf-8")[:n_bytes].decode("utf-8", errors="ignore")


def timed_segment(seg, text: str):
    """``(result, seconds)`` of ``seg.segment(text)``; exits if the segments do not tile the text."""
    t0 = time.perf_counter()
    result = seg.segment(text)
    secs = time.perf_counter() - t0
    if "".join(s.text for s in result) != text:
        raise SystemExit("offset invariant broken")
    return result, secs


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(mb: float, backend: str) -> None:
    sys.path.insert(0, str(ROOT))
    from headseg.api import Segmenter

    text = make_text(int(mb * 1_000_000))
    t0 = time.perf_counter()
    seg = Segmenter(backend=backend)
    t_load = time.perf_counter() - t0
    result, t_seg = timed_segment(seg, text)
    rss = peak_rss_mb()
    print(json.dumps({"mb": mb, "chars": len(text), "units": result.meta["units"], "segments": len(result),
                      "load_s": t_load, "segment_s": t_seg, "peak_rss_mb": rss}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="0.5,5", help="comma-separated sizes in MB")
    ap.add_argument("--backend", default="torch")
    ap.add_argument("--child", type=float, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child, args.backend)
        return
    rows = []
    for mb in [float(s) for s in args.sizes.split(",")]:
        out = subprocess.run([sys.executable, __file__, "--child", str(mb), "--backend", args.backend],
                             capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"Long-document segmentation, backend {args.backend}, one process per size\n")
    print("| size (MB) | chars | units | segments | model load (s) | segment (s) | s per MB | peak RSS (MB) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['mb']:g} | {r['chars']:,} | {r['units']:,} | {r['segments']} | {r['load_s']:.1f} | "
              f"{r['segment_s']:.1f} | {r['segment_s'] / r['mb']:.1f} | {r['peak_rss_mb']:.0f} |")


if __name__ == "__main__":
    main()
