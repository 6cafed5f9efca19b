"""Segmenting unpunctuated text vs punctuated text of the same size.

The text is real prose (the manifesto corpus in ../shared/data, topic lines
removed) on one single line: once as it is, once with every punctuation
character removed, both cut to the same number of bytes at a word boundary.
Without punctuation the sentence rules find nothing, so the heads' unit
detector does all the work.  The two variants run in turns in one process
(best of ``--repeats``), so the ratio is the meaningful figure.

    python -m benchmarks.unpunctuated [--kb 16,64] [--repeats 1]

Prints a Markdown table and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import time

from benchmarks.common import cut, markdown_table, prose, strip_punctuation


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", default="16,64", help="sizes in KB, comma-separated (1024 = 1 MB)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--backend", default="torch")
    args = ap.parse_args()

    from headseg.api import Segmenter

    load_before = os.getloadavg()
    seg = Segmenter(backend=args.backend)
    base = prose()
    rows = []
    for kb in [float(x) for x in args.kb.split(",")]:
        n = int(kb * 1024)
        variants = {"punctuated": cut(base, n), "unpunctuated": cut(strip_punctuation(base), n)}
        best = {k: float("inf") for k in variants}
        res = {}
        for _ in range(args.repeats):
            for name, text in variants.items():
                t0 = time.perf_counter()
                r = seg.segment(text)
                best[name] = min(best[name], time.perf_counter() - t0)
                res[name] = r
        for name, text in variants.items():
            rows.append((f"{kb:g}", name, f"{len(text.encode('utf-8')):,}", f"{res[name].meta['units']:,}",
                         f"{len(res[name]):,}", f"{best[name]:.1f}",
                         f"{best[name] / best['punctuated']:.2f}"))
    load_after = os.getloadavg()
    print(f"Segmenter(backend={args.backend!r}), default settings; best of {args.repeats}; "
          f"{os.cpu_count()} CPUs; load average before {load_before[0]:.2f} / after {load_after[0]:.2f} (1 min)\n")
    print(markdown_table(["KB", "text", "bytes", "units", "segments", "seconds", "× punctuated"], rows))


if __name__ == "__main__":
    main()
