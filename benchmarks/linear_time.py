"""Time per byte on any text: prose of growing size, the dev documents, unpunctuated and repeated text.

Issue 23 (item 14) asks that a document of N bytes cost O(N) with a constant
that depends neither on punctuation nor on repetition.  One process, one
warm :class:`Segmenter` (the default engine), every case in turn, so the
ratios are side by side:

* ``dev documents``: Choi 3-11 and lecture dev documents, each segmented on its
  own (the rate the issue compares against);
* ``prose``: real prose (``benchmarks/long_document.py``'s text: the manifesto
  corpus and Choi texts) cut to each size;
* ``unpunctuated``: the same prose with every punctuation mark removed, on one
  line (the heads' unit detector does all the unit work);
* ``one word``: ``"word "`` repeated.

    python -m benchmarks.linear_time                       # 0.1, 1, 4 MB prose; 1 MB of the others
    python -m benchmarks.linear_time --prose-mb 0.1,1 --other-mb 0.25 --dev-docs 60

Prints a Markdown table (seconds per MB and the ratio to 1 MB of prose) and the
load average before and after.
"""

from __future__ import annotations

import argparse
import os

from benchmarks.common import cut, make_text, prose, segmentation_root, strip_punctuation, timed_segment


def dev_texts(limit: int, lectures: int) -> list[str]:
    """The first ``limit`` Choi 3-11 documents and ``lectures`` of each lecture set, as the loaders read them."""
    from headseg.segmenter.evaluation.loaders import iter_documents

    root = segmentation_root()
    texts = [d.text for d in iter_documents(root / "choi" / "3" / "3-11", limit=limit)]
    for name in ("lectures_ai", "lectures_physics"):
        texts += [d.text for d in iter_documents(root / name, limit=lectures)]
    return texts


def timed(seg, texts: list[str]) -> float:
    return sum(timed_segment(seg, t)[1] for t in texts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prose-mb", default="0.1,1,4", help="prose sizes in MB (10^6 bytes)")
    ap.add_argument("--other-mb", type=float, default=1.0, help="size of the unpunctuated and one-word cases")
    ap.add_argument("--dev-docs", type=int, default=100, help="Choi 3-11 documents")
    ap.add_argument("--dev-lectures", type=int, default=4, help="documents of each lecture set")
    args = ap.parse_args()

    from headseg.api import Segmenter

    load_before = os.getloadavg()
    seg = Segmenter()
    seg.segment("A warm-up sentence. And another one.")
    cases: list[tuple[str, list[str]]] = [("dev documents", dev_texts(args.dev_docs, args.dev_lectures))]
    for mb in (float(x) for x in args.prose_mb.split(",")):
        cases.append((f"prose {mb:g} MB", [make_text(int(mb * 1e6))]))
    n = int(args.other_mb * 1e6)
    cases.append((f"unpunctuated {args.other_mb:g} MB", [cut(strip_punctuation(prose()), n)]))
    cases.append((f"one word {args.other_mb:g} MB", ["word " * (n // 5)]))
    rows = []
    for name, texts in cases:
        size = sum(len(t.encode("utf-8")) for t in texts)
        secs = timed(seg, texts)
        rows.append((name, len(texts), size, secs, secs / size * 1e6))
    ref = next((r[4] for r in rows if r[0] == "prose 1 MB"), rows[1][4])
    load_after = os.getloadavg()
    print(f"Segmenter() default engine ({seg.backend.name}, {getattr(seg.backend, 'precision', '?')}), one process, "
          f"{os.cpu_count()} CPUs; load average before {load_before[0]:.2f} / after {load_after[0]:.2f} (1 min)\n")
    print("| text | documents | bytes | seconds | s per MB | × prose 1 MB |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, docs, size, secs, rate in rows:
        print(f"| {name} | {docs} | {size:,} | {secs:.1f} | {rate:.1f} | {rate / ref:.2f} |")


if __name__ == "__main__":
    main()
