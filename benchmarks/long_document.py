"""Segment one long document (default 0.5 MB and 5 MB) and report time and peak RSS.

The document is real prose: the manifesto corpus and Choi texts from
../shared/data, concatenated (topic lines removed) and repeated up to the size.
Each size runs in a fresh subprocess so peak RSS is that run's own.

    python -m benchmarks.long_document [--sizes 0.5,5] [--backend torch]

Prints a Markdown table; linear scaling shows as a constant seconds-per-MB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time

from benchmarks.common import child_env, make_text, module_command, peak_rss_mb, timed_segment


def child(mb: float, backend: str) -> None:
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
        out = subprocess.run(module_command(__spec__.name, "--child", str(mb), "--backend", args.backend),
                             capture_output=True, text=True, check=True, env=child_env())
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"Long-document segmentation, backend {args.backend}, one process per size\n")
    print("| size (MB) | chars | units | segments | model load (s) | segment (s) | s per MB | peak RSS (MB) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['mb']:g} | {r['chars']:,} | {r['units']:,} | {r['segments']} | {r['load_s']:.1f} | "
              f"{r['segment_s']:.1f} | {r['segment_s'] / r['mb']:.1f} | {r['peak_rss_mb']:.0f} |")


if __name__ == "__main__":
    main()
